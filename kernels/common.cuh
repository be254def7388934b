// What the GPU kernels of the simple layers share (kernels/<op>.cu, one file an operation):
// launch sizes, index arithmetic for NCHW planes and NHWC pixels, loads and stores of f32, f16
// and bf16 that compute in float, dispatch on a view's element type and on the index width, and
// the format checks of the launchers. Internal to the ops floor: included by .cu files only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/layers_cuda.h"

#define SL_LAUNCH_CHECK(what) SL_CUDA_CHECK(cudaGetLastError(), what)

namespace scenelab::cuda {
namespace {

constexpr int kThreads = 256;

inline unsigned blocks_for(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

// Output element i of `planes` planes of ho x wo -> its plane and pixel.
struct PlanePixel {
  size_t plane;
  int oy, ox;
};

__device__ __forceinline__ PlanePixel plane_pixel(size_t i, int ho, int wo) {
  return {i / (size_t(wo) * ho), int((i / wo) % ho), int(i % wo)};
}

// ---- NHWC, any element type ----
__device__ __forceinline__ float ld(const float* p, size_t i) { return p[i]; }

__device__ __forceinline__ float ld(const __half* p, size_t i) { return __half2float(p[i]); }

__device__ __forceinline__ float ld(const __nv_bfloat16* p, size_t i) { return __bfloat162float(p[i]); }

__device__ __forceinline__ void st(float* p, size_t i, float v) { p[i] = v; }

__device__ __forceinline__ void st(__half* p, size_t i, float v) { p[i] = __float2half_rn(v); }

__device__ __forceinline__ void st(__nv_bfloat16* p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// Output element i of an NHWC tensor (n x ho x wo x c) -> image, row, column, channel.
struct Nhwc {
  size_t b;
  int y, x, c;
};

__device__ __forceinline__ Nhwc nhwc_of(size_t i, int ho, int wo, int c) {
  return {i / (size_t(c) * wo * ho), int((i / (size_t(c) * wo)) % ho), int((i / c) % wo), int(i % c)};
}

// Runs `launch` with the element type of an f32, f16 or bf16 view.
template <typename F>
void with_type(const TensorView& v, F&& launch) {
  switch (v.format.dtype) {
    case DType::F32: launch(static_cast<float*>(nullptr)); break;
    case DType::F16: launch(static_cast<__half*>(nullptr)); break;
    case DType::BF16: launch(static_cast<__nv_bfloat16*>(nullptr)); break;
    default: throw_error("no GPU kernel for ", v.format.str(), " tensors");
  }
}

// Runs `launch` with an index type for `count` elements: 32-bit where it fits (no 64-bit
// division in the kernel's index arithmetic), else size_t.
template <typename F>
void with_index(size_t count, F&& launch) {
  if (count < (size_t(1) << 31))
    launch(unsigned(count));
  else
    launch(count);
}

inline bool is_nchw_f32(const TensorView& v) { return v.format == Format{}; }

// NHWC tensors of a 2-byte type whose channel count (c) is a multiple of 8, both 16-byte
// aligned: the kernels moving 8 channels (16 bytes) a thread apply.
inline bool vector8(const TensorView& x, const TensorView& y, int c) {
  return x.format.layout == Layout::NHWC && dtype_bytes(y.format.dtype) == 2 && c % 8 == 0 &&
         reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && reinterpret_cast<uintptr_t>(y.data) % 16 == 0;
}

inline void require_same_format(const TensorView& x, const TensorView& y, const char* what) {
  SL_REQUIRE(x.format == y.format && supports(x.format), what, ": input ", x.format.str(),
             ", output ", y.format.str());
}

// Thread `i`'s pixel of n NCHW images of c channels of `plane` pixels: where its channel 0 is
// (`at`; its channels lie `plane` apart). False for a thread past the last pixel.
__device__ __forceinline__ bool nchw_pixel(int n, int c, size_t plane, size_t& i, size_t& at) {
  i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * plane) return false;
  at = (i / plane) * c * plane + i % plane;
  return true;
}

// One thread a pixel over its channels (x and y of one format and shape): `nchw` on f32 NCHW
// tensors (x, y, n, c, plane), else the NHWC kernel of y's element type, `nhwc(element)` (a null
// pointer of that type), on NHWC ones (x, y, c, pixels); `what` names the operation in errors.
using PerPixelNchw = void (*)(const float*, float*, int, int, size_t);
template <typename Nhwc>
void per_pixel(const TensorView& x, const TensorView& y, cudaStream_t s, const char* what, PerPixelNchw nchw,
               Nhwc&& nhwc) {
  require_same_format(x, y, what);
  const Shape& a = x.shape;
  const size_t pixels = size_t(a.n) * a.plane();
  if (is_nchw_f32(x)) {
    nchw<<<blocks_for(pixels), kThreads, 0, s>>>(x.f32(), y.f32(), a.n, a.c, a.plane());
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      nhwc(t)<<<blocks_for(pixels), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), a.c, pixels);
    });
  }
  SL_LAUNCH_CHECK(what);
}

}  // namespace
}  // namespace scenelab::cuda
