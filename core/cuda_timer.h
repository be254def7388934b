// GPU time of the work one stream runs, by a pair of CUDA events: the timing step of `--conv auto`
// (layers/conv2d.cpp) and of the benchmarks. The caller waits for the work.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include "core/cuda_check.h"

namespace scenelab {

class StreamTimer {
 public:
  // Milliseconds from before to after what fn enqueues on s; `what` names it in errors.
  template <typename F>
  float time(cudaStream_t s, F&& fn, const char* what) {
    SL_CUDA_CHECK(cudaEventRecord(begin_.get(), s), what);
    fn();
    SL_CUDA_CHECK(cudaEventRecord(end_.get(), s), what);
    SL_CUDA_CHECK(cudaEventSynchronize(end_.get()), what);
    float ms = 0;
    SL_CUDA_CHECK(cudaEventElapsedTime(&ms, begin_.get(), end_.get()), what);
    return ms;
  }

 private:
  CudaEvent begin_, end_;
};

}  // namespace scenelab
#endif  // SCENELAB_WITH_CUDA
