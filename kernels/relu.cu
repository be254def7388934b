// GPU kernels of the relu layer (layers/relu.cpp): y = max(x, 0) in any f32/f16/bf16 format.
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

template <typename T>
__global__ void relu_any_kernel(const T* x, T* y, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) st(y, i, fmaxf(ld(x, i), 0.f));
}

}  // namespace

void relu(const TensorView& x, const TensorView& y, cudaStream_t s) {
  require_same_format(x, y, "relu");
  const size_t n = y.shape.numel();
  if (!n) return;
  with_type(y, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    relu_any_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), n);
  });
  SL_LAUNCH_CHECK("relu kernel");
}

}  // namespace scenelab::cuda
