// GPU kernels of the rgb_to_yuv layer (layers/rgb_to_yuv.cpp).
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"
#include "kernels/yuv.cuh"

namespace scenelab::cuda {
namespace {

__global__ void rgb_to_yuv_kernel(const float* x, float* y, int n, size_t plane) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * plane) return;
  const size_t b = i / plane, q = i % plane;
  const float r = x[b * 3 * plane + q], g = x[(b * 3 + 1) * plane + q], bl = x[(b * 3 + 2) * plane + q];
  for (int ch = 0; ch < 3; ++ch) y[(b * 3 + ch) * plane + q] = yuv_of(ch, r, g, bl);
}

}  // namespace

void rgb_to_yuv(const float* x, float* y, int n, size_t plane, cudaStream_t s) {
  rgb_to_yuv_kernel<<<blocks_for(size_t(n) * plane), kThreads, 0, s>>>(x, y, n, plane);
  SL_LAUNCH_CHECK("rgb_to_yuv kernel");
}

}  // namespace scenelab::cuda
