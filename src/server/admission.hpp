// How the server keeps the page's small requests quick while heavy ones run (private to
// src/server). Every request is priced before its work starts (attnlab/scenario/price.hpp);
// work up to kMaxSmallWorkBytes runs at once, whatever else runs; heavier work takes one of
// a few slots (one per core by default) and is refused with 503 and Retry-After when they
// are all taken, rather than queueing behind each other and in front of everyone else.
// With many more worker threads than slots, a slow or idle client holds a thread, never a
// core, and the health check and a slider step always find a free thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>

namespace attnlab {

// Work priced at up to this many bytes is small (a slider step of the lab's scenarios is a
// few KB; 8 MiB is a 64-token, 8-head, 256-wide scenario).
inline constexpr std::uint64_t kMaxSmallWorkBytes = std::uint64_t{8} << 20;

// Heavy work found every slot taken: 503 with Retry-After.
class ServerBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class HeavySlots {
 public:
  explicit HeavySlots(std::size_t slots) : total_(slots) {}
  bool try_take();
  void give_back();
  void resize(std::size_t slots);  // the slots taken stay taken until given back
  std::size_t total() const;
  std::size_t taken() const;  // heavy work running now (GET /api/health says it)

 private:
  mutable std::mutex mutex_;
  std::size_t taken_ = 0, total_;
};

// The request being served on this thread: while it lives, admit_work() takes at most one
// heavy slot for it, given back when the scope ends.
class RequestScope {
 public:
  explicit RequestScope(HeavySlots& slots);
  ~RequestScope();
  RequestScope(const RequestScope&) = delete;
  RequestScope& operator=(const RequestScope&) = delete;

 private:
  friend void admit_work(std::uint64_t bytes);
  HeavySlots& slots_;
  bool holds_slot_ = false;
  RequestScope* outer_ = nullptr;
};

// Called once a request's work is priced at `bytes`: heavy work takes a slot for the
// request on this thread or throws ServerBusy. Without a RequestScope (the API called
// directly, as the tests and fuzzers do) it does nothing.
void admit_work(std::uint64_t bytes);

// Work that is heavy whatever its size (a model's forward pass, a timed measure).
inline constexpr std::uint64_t kHeavyWork = UINT64_MAX;

}  // namespace attnlab
