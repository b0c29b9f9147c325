// A time budget and a cancel token for the work of one thread, checked cooperatively: long
// computations call check_deadline() between heads, layers or measured lengths, and past
// the deadline it throws DeadlineExceeded, once a token the thread registered is cancelled
// it throws WorkCancelled, so the work stops there and the thread is free again. Without a
// DeadlineScope or CancelScope on the thread, check_deadline() does nothing (the CLI's runs
// have no budget). Core knows nothing of who cancels: a server registers its shutdown token
// in each request's scope; anything else may hold a token of its own.
#pragma once
#include <atomic>
#include <chrono>
#include <stdexcept>

namespace attnlab {

class DeadlineExceeded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Work stopped because a token it was registered with was cancelled (not a time budget).
class WorkCancelled : public std::runtime_error {
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

// A flag any thread may raise; the work of every thread that registered it (CancelScope)
// stops at its next check. Cancelling is final.
class CancelToken {
 public:
  void cancel() noexcept { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const noexcept { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

// While it lives, check_deadline() on this thread throws WorkCancelled once `token` is
// cancelled. Scopes nest, and every token registered on the thread applies (an inner scope
// does not hide an outer token). `token` must outlive the scope.
class CancelScope {
 public:
  explicit CancelScope(const CancelToken& token);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  friend void check_deadline();
  const CancelToken& token_;
  const CancelScope* outer_;
};

// Throws WorkCancelled when a token registered on this thread is cancelled, and
// DeadlineExceeded when this thread has a deadline and it has passed.
void check_deadline();

}  // namespace attnlab
