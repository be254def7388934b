// The format a simple layer (ReLU, pooling, resampling, concat, argmax, softmax) computes in:
// its input's on the GPU, where the kernels take it (kernels/layers_cuda.h: f32 NCHW and
// f32/f16/bf16 NHWC), so half-precision NHWC tensors flow through them unconverted; f32 NCHW
// otherwise (the CPU path).
#pragma once
#include "engine/backend.h"
#include "core/tensor.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {

// The format of the network's activations on this backend: half-precision NHWC on the GPU under
// fp16/bf16 with cuDNN (engine/cuda_backend.h), f32 NCHW otherwise. Convolutions compute in it;
// the last preprocessing step writes it.
inline Format activation_format_of(const Backend& b) {
#ifdef SCENELAB_WITH_CUDA
  if (const CudaContext* ctx = b.cuda()) return activation_format(*ctx);
#else
  (void)b;
#endif
  return Format{};
}

inline Format follow_on_gpu(const Format& in, const Backend& b) {
#ifdef SCENELAB_WITH_CUDA
  if (b.cuda() && cuda::supports(in)) return in;
#else
  (void)in, (void)b;
#endif
  return Format{};
}

}  // namespace scenelab
