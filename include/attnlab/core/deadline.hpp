// A time budget for the work of one thread, checked cooperatively: long computations call
// check_deadline() between heads, layers or measured lengths, and past the deadline it
// throws DeadlineExceeded, so the work stops there and the thread is free again. Without a
// DeadlineScope on the thread, check_deadline() does nothing (the CLI's runs have no budget).
#pragma once
#include <chrono>
#include <stdexcept>

namespace attnlab {

class DeadlineExceeded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// While it lives, this thread's work must end within `budget` of its construction.
// Scopes nest: the inner one's deadline holds until it ends, then the outer one's again.
class DeadlineScope {
 public:
  explicit DeadlineScope(std::chrono::steady_clock::duration budget);
  ~DeadlineScope();
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;

 private:
  std::chrono::steady_clock::time_point outer_;
  bool had_outer_ = false;
};

// Throws DeadlineExceeded when this thread has a deadline and it has passed.
void check_deadline();

}  // namespace attnlab
