// How the server keeps the page's small requests quick while heavy ones run (private to
// src/server). Every request is priced before its work starts (attnlab/scenario/price.hpp);
// work up to kMaxSmallWorkBytes runs at once, whatever else runs; heavier work takes one of
// a few slots and is refused with 503 and Retry-After when they are all taken, rather than
// queueing behind each other and in front of everyone else. The slots share the cores: each
// job runs on cores ÷ slots threads (its OpenMP regions, and so its kernels and products,
// under a ThreadBudget), so that slots × threads per job ≤ cores and no job's threads spin waiting
// for cores another job holds. A training run or an analysis job started by a request holds
// its slot, and its share of the cores, until it ends.
// With many more worker threads than slots, a slow or idle client holds a thread, never a
// core, and the health check and a slider step always find a free thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "attnlab/model/threads.hpp"

namespace attnlab {

// Work priced at up to this many bytes is small (a slider step of the lab's scenarios is a
// few KB; 8 MiB is a 64-token, 8-head, 256-wide scenario).
inline constexpr std::uint64_t kMaxSmallWorkBytes = std::uint64_t{8} << 20;

// Heavy work found every slot taken: 503 with Retry-After.
class ServerBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The slots a server has by default on `cores` cores: a quarter as many as cores (so that
// each job has four threads), at least two (a training run or an analysis job leaves one for
// the page's requests), at most one per core.
std::size_t default_heavy_slots(int cores);

class HeavySlots {
 public:
  explicit HeavySlots(int cores = attnlab::cores()) : cores_(cores), total_(default_heavy_slots(cores)) {}
  bool try_take();
  void give_back();
  void resize(std::size_t slots);  // the slots taken stay taken until given back
  std::size_t total() const;
  std::size_t taken() const;  // heavy work running now (GET /api/health says it)
  int cores() const { return cores_; }
  int threads_per_job() const;  // cores ÷ slots, at least 1

 private:
  mutable std::mutex mutex_;
  const int cores_;
  std::size_t taken_ = 0, total_;
};

// A heavy slot held by work that outlives the request that started it (a training run, an
// analysis job): given back when the last copy of the claim goes. The work's thread runs
// under ThreadBudget(threads()).
class SlotClaim {
 public:
  explicit SlotClaim(HeavySlots& slots) : slots_(slots) {}
  ~SlotClaim() { slots_.give_back(); }
  SlotClaim(const SlotClaim&) = delete;
  SlotClaim& operator=(const SlotClaim&) = delete;
  int threads() const { return slots_.threads_per_job(); }

 private:
  HeavySlots& slots_;
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
  friend std::shared_ptr<SlotClaim> claim_slot_for_background();
  HeavySlots& slots_;
  bool holds_slot_ = false;
  std::optional<ThreadBudget> budget_;  // while the slot is held: the job's share of the cores
  RequestScope* outer_ = nullptr;
};

// Called once a request's work is priced at `bytes`: heavy work takes a slot for the
// request on this thread or throws ServerBusy. Without a RequestScope (the API called
// directly, as the tests and fuzzers do) it does nothing.
void admit_work(std::uint64_t bytes);

// Called by a request that starts work of its own thread (a training run, an analysis
// job): the request's slot, or a new one, handed to that work. Throws ServerBusy when every
// slot is taken; null without a RequestScope (the work then keeps the default budget).
std::shared_ptr<SlotClaim> claim_slot_for_background();

// Work that is heavy whatever its size (a model's forward pass, a timed measure).
inline constexpr std::uint64_t kHeavyWork = UINT64_MAX;

}  // namespace attnlab
