// GPU kernel of the pool layer (layers/pool.cpp): one thread an output pixel, the window's mean
// or largest value as the CPU computes it (layers/pool_window.h), f32 NCHW.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"
#include "layers/pool_window.h"

namespace scenelab::cuda {
namespace {

__global__ void pool_kernel(const float* x, float* y, int planes, int h, int w, int ho, int wo, PoolWindow p) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(planes) * ho * wo) return;
  const int ox = int(i % wo), oy = int((i / wo) % ho);
  const size_t plane = i / (size_t(wo) * ho);
  y[i] = pool_value(x + plane * h * w, h, w, oy, ox, p);
}

}  // namespace

void pool(const TensorView& x, const TensorView& y, const PoolWindow& p, cudaStream_t s) {
  SL_REQUIRE(is_nchw_f32(x) && is_nchw_f32(y), "pool: f32 NCHW tensors");
  const size_t n = y.shape.numel();
  if (!n) return;
  pool_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), x.shape.n * x.shape.c, x.shape.h, x.shape.w,
                                                 y.shape.h, y.shape.w, p);
  SL_LAUNCH_CHECK("pool kernel");
}

}  // namespace scenelab::cuda
