// A team held for a whole step. Generating one token of a small model makes ~60 products and
// attention calls, each a few tens of microseconds of work; opening an OpenMP region for
// each cost 3.3 µs on this project's 2-core machines (a futex wake-up at each of its two
// barriers), and the threads waited for each other at each one's end. Inside hold_team the
// budget's other threads stay in one region for the whole step, spinning, and each
// share_items hands them its items directly (under a microsecond from the post to the
// other thread's start, measured). Outside it, share_items opens an OpenMP region as before.
//
//   hold_team([&] { ...; share_items(rows, 0, [&](std::size_t i) { ... }); ... });
//
// The held threads spin (then yield, past a few tenths of a millisecond) while the holder
// works alone, so a held step should be short and mostly shared work: a generated token,
// not a prompt (whose products are OpenBLAS's and oneDNN's, which open OpenMP's regions
// themselves, and inside a held team would run on the holder alone).
#pragma once
#include <cstddef>
#include <functional>

namespace attnlab {

// Runs step() on this thread with the thread budget's other threads held beside it (see
// above); the step's own exceptions come out of it as they would without. Where holding
// would not help it just runs step(): a budget of one, or of more threads than cores (they
// would spin waiting for each other's cores), inside another parallel region or hold_team.
void hold_team(const std::function<void()>& step);

// How many threads share_items would run on, `threads` asked for (0: the thread budget's):
// the held team's size inside hold_team (1 inside one of its shares' items), 1 inside any
// other parallel region.
int sharing_threads(int threads = 0);

// A run of items [first, end) of a share_items; it must not throw.
using ItemRun = std::function<void(std::size_t first, std::size_t end)>;

// Each item in [0, count) run exactly once, the items shared between sharing_threads(threads)
// threads in runs of consecutive items: each thread takes a share of what is left, smaller
// as less is left (a run's items read one stream; a thread that starts late is waited for
// little at the end). With one thread, run(0, count) on this one.
void share_runs(std::size_t count, int threads, const ItemRun& run);

// share_runs, an item at a time: body(item) for each item in [0, count).
template <class Body>
void share_items(std::size_t count, int threads, const Body& body) {
  share_runs(count, threads, [&body](std::size_t first, std::size_t end) {
    for (std::size_t i = first; i < end; ++i)
      body(i);
  });
}

}  // namespace attnlab
