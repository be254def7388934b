#include "kernels/convert_cuda.h"
#include "kernels/cuda_check.h"

namespace scenelab::cuda {
namespace {

constexpr int kThreads = 256;

// One thread a pixel: reads its c bytes, writes one float to each of the c planes (coalesced
// per plane).
__global__ void u8_hwc_to_f32_nchw_kernel(const uint8_t* __restrict__ src, float* __restrict__ dst,
                                          size_t pixels_per_image, int n, int c, float divisor) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pixels_per_image * size_t(n)) return;
  const size_t b = i / pixels_per_image, q = i % pixels_per_image;
  const uint8_t* px = src + i * size_t(c);
  float* out = dst + b * size_t(c) * pixels_per_image + q;
  for (int ch = 0; ch < c; ++ch) out[size_t(ch) * pixels_per_image] = float(px[ch]) / divisor;
}

__global__ void f32_to_u8_kernel(const float* __restrict__ src, uint8_t* __restrict__ dst,
                                 size_t count) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float v = src[i];
  dst[i] = v >= 0.f ? uint8_t(fminf(v + 0.5f, 255.f)) : uint8_t(0);  // NaN fails v >= 0
}

}  // namespace

void u8_hwc_to_f32_nchw(const uint8_t* src, float* dst, int n, int c, int h, int w,
                        float divisor, cudaStream_t s) {
  const size_t pixels = size_t(h) * w, total = pixels * size_t(n);
  if (!total) return;
  u8_hwc_to_f32_nchw_kernel<<<unsigned((total + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      src, dst, pixels, n, c, divisor);
  SL_CUDA_CHECK(cudaGetLastError(), "u8 -> float input conversion");
}

void f32_to_u8(const float* src, uint8_t* dst, size_t count, cudaStream_t s) {
  if (!count) return;
  f32_to_u8_kernel<<<unsigned((count + kThreads - 1) / kThreads), kThreads, 0, s>>>(src, dst,
                                                                                      count);
  SL_CUDA_CHECK(cudaGetLastError(), "float -> u8 output conversion");
}

}  // namespace scenelab::cuda
