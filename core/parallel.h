// Work split over OpenMP threads; layers use this instead of writing pragmas everywhere.
#pragma once
#include <omp.h>

#include <cstdint>

namespace scenelab {

// Calls f(i) for i in [0, n), spread over `threads` threads (dynamic schedule); inside another
// parallel_for (e.g. independent graphs run side by side, a thread each), on the calling thread.
template <typename F>
void parallel_for(int64_t n, int threads, F&& f) {
  if (threads <= 1 || n <= 1 || omp_in_parallel()) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// Which of parallel_for's threads is running (0 outside one): an index into per-thread scratch.
inline int parallel_thread_index() { return omp_get_thread_num(); }

}  // namespace scenelab
