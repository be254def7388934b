// The format a simple layer (ReLU, pooling, resampling, concat, argmax, softmax) computes in:
// its input's on the GPU, where the kernels take it (kernels/layers_cuda.h: f32 NCHW and
// f32/f16/bf16 NHWC), so half-precision NHWC tensors flow through them unconverted; f32 NCHW
// otherwise (the CPU path).
#pragma once
#include "engine/backend.h"
#include "engine/tensor.h"
#ifdef SCENELAB_WITH_CUDA
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {

inline Format follow_on_gpu(const Format& in, const Backend& b) {
#ifdef SCENELAB_WITH_CUDA
  if (b.cuda() && cuda::supports(in)) return in;
#else
  (void)in, (void)b;
#endif
  return Format{};
}

}  // namespace scenelab
