#include "engine/resize_cuda.h"

#include <cstdint>

#include "core/cuda_check.h"
#include "core/cuda_grid.h"
#include "core/error.h"
#include "engine/resize_linear.h"

namespace scenelab::cuda {
namespace {

// One thread an output pixel (all channels), the batch in z; a CTA's column and row taps computed
// once into shared memory (blockDim (32, 8)).
__global__ void __launch_bounds__(256)
resize_u8_kernel(const uint8_t* __restrict__ src, int c, int sh, int sw, float* __restrict__ dst, int h, int w,
                 float divisor) {
  __shared__ LinearTap tys[8], txs[32];
  const int xx = int(blockIdx.x * blockDim.x + threadIdx.x), yy = int(blockIdx.y * blockDim.y + threadIdx.y);
  if (threadIdx.y == 0 && xx < w) txs[threadIdx.x] = linear_tap(xx, sw, w);
  if (threadIdx.x == 0 && yy < h) tys[threadIdx.y] = linear_tap(yy, sh, h);
  __syncthreads();
  if (xx >= w || yy >= h) return;
  const size_t plane = size_t(h) * w, b = blockIdx.z, p = size_t(yy) * w + xx;
  const LinearTap ty = tys[threadIdx.y], tx = txs[threadIdx.x];
  const uint8_t* img = src + b * size_t(sh) * sw * c;
  for (int ch = 0; ch < c; ++ch)
    dst[(b * c + size_t(ch)) * plane + p] = float(linear_sample(img, sw, c, ch, ty, tx)) / divisor;
}

}  // namespace

void resize_u8_to_f32(const uint8_t* src, int n, int c, int sh, int sw, float* dst, int h, int w,
                      float divisor, cudaStream_t s) {
  if (!size_t(n) * h * w) return;
  SL_REQUIRE(n <= 65535 && h <= 65535 * 8, "resize on the GPU: ", n, " x ", w, "x", h, " too large for the grid");
  const dim3 block(32, 8);
  resize_u8_kernel<<<grid2d(w, h, n, block), block, 0, s>>>(src, c, sh, sw, dst, h, w, divisor);
  SL_CUDA_CHECK(cudaGetLastError(), "resize kernel");
}

}  // namespace scenelab::cuda
