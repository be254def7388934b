#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/convert_cuda.h"
#include "core/cuda_check.h"

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

__device__ __forceinline__ float load(const float* p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const __half* p, size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float load(const __nv_bfloat16* p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float load(const uint8_t* p, size_t i) { return float(p[i]); }
__device__ __forceinline__ void store(float* p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__half* p, size_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(uint8_t* p, size_t i, float v) {
  p[i] = v >= 0.f ? uint8_t(fminf(v + 0.5f, 255.f)) : uint8_t(0);  // NaN fails v >= 0
}

// One thread an element, in the destination's order (its writes coalesced).
template <typename S, typename D>
__global__ void convert_kernel(const S* __restrict__ src, bool src_nhwc, D* __restrict__ dst,
                               bool dst_nhwc, int c, size_t plane, size_t total) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  size_t b, ch, p;
  if (dst_nhwc) {
    ch = i % c;
    p = (i / c) % plane;
    b = i / (size_t(c) * plane);
  } else {
    p = i % plane;
    ch = (i / plane) % c;
    b = i / (size_t(c) * plane);
  }
  const size_t j = src_nhwc ? (b * plane + p) * c + ch : (b * c + ch) * plane + p;
  store(dst, i, load(src, j));
}

template <typename S>
void launch_to(const S* src, bool sn, void* dst, Format df, int c, size_t plane, size_t total,
               cudaStream_t s) {
  const unsigned blocks = unsigned((total + kThreads - 1) / kThreads);
  const bool dn = df.layout == Layout::NHWC;
  switch (df.dtype) {
    case DType::F32: convert_kernel<<<blocks, kThreads, 0, s>>>(src, sn, static_cast<float*>(dst), dn, c, plane, total); break;
    case DType::F16: convert_kernel<<<blocks, kThreads, 0, s>>>(src, sn, static_cast<__half*>(dst), dn, c, plane, total); break;
    case DType::BF16: convert_kernel<<<blocks, kThreads, 0, s>>>(src, sn, static_cast<__nv_bfloat16*>(dst), dn, c, plane, total); break;
    case DType::U8: convert_kernel<<<blocks, kThreads, 0, s>>>(src, sn, static_cast<uint8_t*>(dst), dn, c, plane, total); break;
  }
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

void convert(const void* src, Format sf, void* dst, Format df, int n, int c, size_t plane,
             cudaStream_t s) {
  const size_t total = size_t(n) * c * plane;
  if (!total) return;
  if (sf == df) {
    SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, total * dtype_bytes(sf.dtype), cudaMemcpyDeviceToDevice, s),
                  "format conversion (copy)");
    return;
  }
  const bool sn = sf.layout == Layout::NHWC;
  switch (sf.dtype) {
    case DType::F32: launch_to(static_cast<const float*>(src), sn, dst, df, c, plane, total, s); break;
    case DType::F16: launch_to(static_cast<const __half*>(src), sn, dst, df, c, plane, total, s); break;
    case DType::BF16: launch_to(static_cast<const __nv_bfloat16*>(src), sn, dst, df, c, plane, total, s); break;
    case DType::U8: launch_to(static_cast<const uint8_t*>(src), sn, dst, df, c, plane, total, s); break;
  }
  SL_CUDA_CHECK(cudaGetLastError(), str_cat("format conversion ", sf.str(), " -> ", df.str()));
}

}  // namespace scenelab::cuda
