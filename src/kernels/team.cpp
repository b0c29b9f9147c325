// The held team and the shared items (attnlab/kernels/team.hpp).
#include "attnlab/kernels/team.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

namespace attnlab {

namespace {

// A waiting thread's breath: a pause instruction (the core's other hardware thread runs,
// less power) while the wait is short; past kSpins of them the wait is long (the holder at
// work on its own, or this thread's core taken by another process) and each breath gives
// the core away to whatever else waits for it.
class Breath {
 public:
  void operator()() {
    if (++count_ > kSpins) return std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

 private:
  static constexpr int kSpins = 1 << 14;  // a few tenths of a millisecond of pauses
  int count_ = 0;
};

// The items of one share_runs still to take: each thread takes runs from the front until
// none is left, each run 1/threads of what is left, rounded up (as OpenMP's guided schedule).
class Handout {
 public:
  Handout() = default;
  Handout(std::size_t count, int threads) { reset(count, threads); }

  void reset(std::size_t count, int threads) {
    count_ = count, threads_ = std::size_t(std::max(threads, 1));
    next_.store(0, std::memory_order_relaxed);
  }

  void work(const ItemRun& run) {
    std::size_t first = next_.load(std::memory_order_relaxed);
    while (first < count_) {
      const std::size_t left = count_ - first, take = std::max<std::size_t>(1, (left + threads_ - 1) / threads_);
      if (next_.compare_exchange_weak(first, first + take, std::memory_order_relaxed)) {
        run(first, first + take);
        first = next_.load(std::memory_order_relaxed);
      }  // else `first` now holds what another thread left: try again from there
    }
  }

 private:
  alignas(64) std::atomic<std::size_t> next_{0};  // each counter on a cache line of its own
  std::size_t count_ = 0, threads_ = 1;
};

// The threads of one hold_team: the holder posts work, the others run it until the end.
class Team {
 public:
  int size() const { return size_; }
  void set_size(int size) { size_ = size; }  // by the holder, before its first share
  bool sharing() const { return sharing_; }  // a share under way (the holder asks)

  // The holder: every item run, its share on this thread, before it returns. The others
  // are all waiting for the next post when it starts (the last share waited for them).
  void share(std::size_t count, const ItemRun& run) {
    sharing_ = true;
    handout_.reset(count, size_);
    run_ = &run;
    finished_.store(0, std::memory_order_relaxed);
    posted_.fetch_add(1, std::memory_order_release);  // what is written above, seen by who sees this
    handout_.work(run);
    Breath breath;
    while (finished_.load(std::memory_order_acquire) < size_ - 1)
      breath();
    sharing_ = false;
  }

  // The holder, once its step is done: the others leave.
  void end() {
    ending_ = true;
    posted_.fetch_add(1, std::memory_order_release);
  }

  // Each of the others: what the holder posts, until the end.
  void serve() {
    unsigned seen = 0;  // posts start at 0: one made before this thread looks is still seen
    for (;;) {
      unsigned now;
      Breath breath;
      while ((now = posted_.load(std::memory_order_acquire)) == seen)
        breath();
      seen = now;
      if (ending_) return;
      handout_.work(*run_);
      finished_.fetch_add(1, std::memory_order_release);
    }
  }

 private:
  int size_ = 1;
  Handout handout_;
  const ItemRun* run_ = nullptr;
  bool ending_ = false, sharing_ = false;
  alignas(64) std::atomic<unsigned> posted_{0};
  alignas(64) std::atomic<int> finished_{0};
};

// The team this thread holds, inside hold_team.
thread_local Team* held = nullptr;

}  // namespace

void hold_team(const std::function<void()>& step) {
  // Held threads wait spinning: more of them than cores would wait for each other's cores.
  const int size = omp_get_max_threads();
  if (held || omp_in_parallel() || size <= 1 || size > omp_get_num_procs()) return step();
  Team team;
  std::exception_ptr error;
#pragma omp parallel num_threads(size)
  if (omp_get_thread_num() == 0) {
    team.set_size(omp_get_num_threads());  // (OpenMP may give fewer threads than asked)
    held = &team;
    try {
      step();
    } catch (...) {
      error = std::current_exception();
    }
    held = nullptr;
    team.end();
  } else {
    team.serve();
  }
  if (error) std::rethrow_exception(error);
}

int sharing_threads(int threads) {
  // An item of a share that shares again runs its items on its own thread (as on the others).
  if (held) return threads == 1 || held->sharing() ? 1 : held->size();
  if (omp_in_parallel()) return 1;
  return threads > 0 ? threads : std::max(1, omp_get_max_threads());
}

void share_runs(std::size_t count, int threads, const ItemRun& run) {
  if (count == 0) return;
  const int team = sharing_threads(threads);
  if (team <= 1 || count == 1) return run(0, count);
  if (held) return held->share(count, run);
  Handout handout(count, team);
#pragma omp parallel num_threads(team)
  handout.work(run);
}

}  // namespace attnlab
