// Work split over threads; layers use this instead of writing threading code everywhere.
//
// Each calling thread has a team of its own: helper threads made on its first parallel_for with
// more than one thread and kept for the next. A waiting thread (a helper between calls, the
// caller for its helpers) spins briefly, then yields its core, then sleeps (core/parallel.cpp).
// OpenMP's teams spin for a whole time slice instead: with another process keeping both cores of
// a 2-core machine busy, a pass of DDRNet-23-slim slowed 3x where ONNX Runtime's own pool slowed
// 2x (docs/performance.md). A forked child's calls make a team of their own (its parent's
// helpers are not there).
#pragma once
#include <cstdint>
#include <type_traits>

namespace scenelab {
namespace detail {

// Runs call(ctx, i) for i in [0, n) on the calling thread and threads - 1 helpers of its team,
// each taking the next i (a dynamic schedule, one at a time); returns when all have run.
void run_team(int64_t n, int threads, void (*call)(void*, int64_t), void* ctx);
// True on a team's helper, or on a caller inside run_team.
bool in_team();
int team_index();

}  // namespace detail

// Calls f(i) for i in [0, n), spread over `threads` threads (dynamic schedule); inside another
// parallel_for (e.g. independent graphs run side by side, a thread each), on the calling thread.
template <typename F>
void parallel_for(int64_t n, int threads, F&& f) {
  if (threads <= 1 || n <= 1 || detail::in_team()) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  detail::run_team(n, threads, [](void* c, int64_t i) { (*static_cast<Fn*>(c))(i); },
                   const_cast<void*>(static_cast<const void*>(&f)));
}

// Which of parallel_for's threads is running (0 outside one, 0 to threads - 1 inside): an index
// into per-thread scratch.
inline int parallel_thread_index() { return detail::team_index(); }

}  // namespace scenelab
