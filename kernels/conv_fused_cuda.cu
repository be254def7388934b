// The first convolution of the shipped nets (3 -> 16 channels, 7x7) with its bias, ReLU and 2x2
// max-pool in one kernel on tensor cores: half-precision NHWC in, only the pooled map out.
//
// Implicit GEMM with mma.sync m16n8k16 (f16 or bf16 operands, f32 accumulation): a warp's 16 GEMM
// rows are 2 x 8 neighbouring output pixels, its columns the output channels, K = 7 * 7 * 3 = 147
// (padded to 160 with zero weights) in the order of the NHWC input and of KRSC weights. The mma's
// accumulator layout puts the two rows of a 2x2 pooling window in one thread and its two columns
// in lanes 4 apart, so the pool is a max in registers and one shuffle; bias and ReLU follow
// (both commute with the max) and the pooled pixel is written once, rounded once. The block
// stages its input tile (zero outside the image: padding) in shared memory; each thread keeps its
// weight fragments in registers for the whole block.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "engine/error.h"
#include "kernels/conv_cuda.h"
#include "kernels/cuda_check.h"

namespace scenelab::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kTileRows = 16, kTileCols = 64;  // conv output pixels per block (8 x 32 pooled)

__device__ __forceinline__ uint32_t pack(uint16_t lo, uint16_t hi) {
  return uint32_t(lo) | (uint32_t(hi) << 16);
}
template <typename T>
__device__ __forceinline__ uint16_t bits(T v) {
  return *reinterpret_cast<const uint16_t*>(&v);
}
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);  // .x = a (low half)
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// d += a (16x16, row-major) * b (16x8, column-major), f32 accumulators.
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __half>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // launched only where conv_pool_supported() found an sm_80+ binary
#endif
}

// CIN (<= 4) input channels, KS x KS window, NT * 8 output channels; pad 0 or KS / 2; pool 2x2
// stride 2. The tile keeps 4 channels a pixel (8 bytes, zero beyond CIN), and the GEMM's K runs
// over (window pixel, channel) in an order chosen for the fragments: at k-step s, lane t's four
// A elements of a row (mma columns 2t, 2t+1, 2t+8, 2t+9) are the 4 channels of window pixel
// 4s + t, one 8-byte shared-memory load; the weights are permuted alike (channel 3 and window
// pixels past KS * KS have zero weights). 2 loads a k-step where the 16-bit gather took 8 and
// 4 offsets (that kernel took 121 us at 1920x1080 on the H100, by Nsight Compute).
template <typename T, int CIN, int KS, int NT>
__global__ void __launch_bounds__(kWarps * 32)
conv_pool_kernel(ConvShape c, const T* __restrict__ x, const T* __restrict__ w,
                 const float* __restrict__ bias, T* __restrict__ y, int hp, int wp, bool relu) {
  static_assert(CIN >= 1 && CIN <= 4, "4 channels a pixel in the tile");
  constexpr int WIN = KS * KS, KSTEPS = (WIN + 3) / 4;
  constexpr int IN_ROWS = kTileRows + KS - 1, IN_COLS = kTileCols + KS - 1;
  __shared__ uint2 tile[IN_ROWS * IN_COLS];  // 4 channels (8 bytes) a pixel

  const int b = blockIdx.z;
  const int oy0 = blockIdx.y * kTileRows, ox0 = blockIdx.x * kTileCols;  // conv output origin
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;

  const T* xb = x + size_t(b) * c.h * c.w * CIN;
  for (int i = tid; i < IN_ROWS * IN_COLS; i += blockDim.x) {
    const int ry = i / IN_COLS, rx = i % IN_COLS;
    const int iy = oy0 - c.pad + ry, ix = ox0 - c.pad + rx;
    uint16_t v[4] = {0, 0, 0, 0};
    if (iy >= 0 && iy < c.h && ix >= 0 && ix < c.w) {
      const T* px = xb + (size_t(iy) * c.w + ix) * CIN;
#pragma unroll
      for (int ci = 0; ci < CIN; ++ci) v[ci] = bits(px[ci]);
    }
    tile[i] = make_uint2(pack(v[0], v[1]), pack(v[2], v[3]));
  }

  // This thread's window pixel at each k-step (its offset in the tile, in pixels) and weight
  // fragments: B[k][n] = w[n][pixel 4s + t][channel], n = 8j + g.
  int off[KSTEPS];
  uint32_t bw[KSTEPS][NT][2];
#pragma unroll
  for (int s = 0; s < KSTEPS; ++s) {
    const int q = 4 * s + t;
    off[s] = q < WIN ? (q / KS) * IN_COLS + q % KS : 0;  // past the window: zero weights
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const T* wr = w + (size_t(8 * j + g) * WIN + q) * CIN;
      auto wk = [&](int ci) { return q < WIN && ci < CIN ? bits(wr[ci]) : uint16_t(0); };
      bw[s][j][0] = pack(wk(0), wk(1));
      bw[s][j][1] = pack(wk(2), wk(3));
    }
  }
  float bj[NT][2];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    bj[j][0] = bias ? bias[8 * j + 2 * t] : 0.f;
    bj[j][1] = bias ? bias[8 * j + 2 * t + 1] : 0.f;
  }
  __syncthreads();

  constexpr int TILES_X = kTileCols / 8, TILES = (kTileRows / 2) * TILES_X;
  for (int wt = warp; wt < TILES; wt += kWarps) {
    const int ty = (wt / TILES_X) * 2, tx = (wt % TILES_X) * 8;  // in conv pixels, in the block
    const int py = (oy0 + ty) / 2, px0 = (ox0 + tx) / 2;         // pooled row, first column
    if (py >= hp || px0 >= wp) continue;  // whole warp: no pooled pixel of this tile exists
    // A rows g and g + 8: pixels (ty, tx + g) and (ty + 1, tx + g).
    const int base0 = ty * IN_COLS + tx + g, base1 = base0 + IN_COLS;
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s) {
      const uint2 r0 = tile[base0 + off[s]], r1 = tile[base1 + off[s]];
      const uint32_t a[4] = {r0.x, r1.x, r0.y, r1.y};
#pragma unroll
      for (int j = 0; j < NT; ++j) mma<T>(acc[j], a, bw[s][j][0], bw[s][j][1]);
    }
    // acc[j]: [0], [1] pixel (ty, tx + g), channels 8j + 2t, +1; [2], [3] pixel (ty + 1, tx + g).
    const int px = px0 + g / 2;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      float v0 = fmaxf(acc[j][0], acc[j][2]), v1 = fmaxf(acc[j][1], acc[j][3]);
      v0 = fmaxf(v0, __shfl_xor_sync(0xffffffffu, v0, 4));  // the pixel beside (g ^ 1)
      v1 = fmaxf(v1, __shfl_xor_sync(0xffffffffu, v1, 4));
      v0 += bj[j][0];
      v1 += bj[j][1];
      if (relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
      if ((g & 1) == 0 && px < wp) {
        T* dst = y + ((size_t(b) * hp + py) * wp + px) * (NT * 8) + 8 * j + 2 * t;
        *reinterpret_cast<uint32_t*>(dst) = pack2<T>(v0, v1);
      }
    }
  }
}

template <typename T>
const void* kernel_of() {
  return reinterpret_cast<const void*>(&conv_pool_kernel<T, 3, 7, 2>);
}

// The mma instructions need sm_80 or later, in the binary built for the device (asked once: the
// build's architectures are the same for every device of a process).
template <typename T>
bool has_binary() {
  static const bool ok = [] {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, kernel_of<T>()) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return attr.binaryVersion >= 80;
  }();
  return ok;
}

bool shape_fits(const ConvShape& c, int pool_k, int pool_stride, DType t) {
  return c.cin == 3 && c.k == 7 && c.cout == 16 && (c.pad == 0 || c.pad == c.k / 2) && pool_k == 2 &&
         pool_stride == 2 && c.ho >= 2 && c.wo >= 2 && c.n >= 1 && c.n <= 65535 &&
         (t == DType::F16 || t == DType::BF16);
}

}  // namespace

bool conv_pool_supported(const ConvShape& c, int pool_k, int pool_stride, DType t) {
  if (!shape_fits(c, pool_k, pool_stride, t)) return false;
  return t == DType::F16 ? has_binary<__half>() : has_binary<__nv_bfloat16>();
}

void conv_relu_pool_nhwc(const ConvShape& c, const void* x, const void* w, const float* b, void* y,
                         bool relu, DType t, cudaStream_t s) {
  SL_REQUIRE(shape_fits(c, 2, 2, t), "conv_relu_pool_nhwc: unsupported shape ", c.cin, "->", c.cout,
             " k=", c.k, " pad=", c.pad, " or type ", dtype_name(t));
  const int hp = c.ho / 2, wp = c.wo / 2;
  const dim3 grid(unsigned((c.wo + kTileCols - 1) / kTileCols), unsigned((c.ho + kTileRows - 1) / kTileRows),
                  unsigned(c.n));
  if (t == DType::F16)
    conv_pool_kernel<__half, 3, 7, 2><<<grid, kWarps * 32, 0, s>>>(
        c, static_cast<const __half*>(x), static_cast<const __half*>(w), b, static_cast<__half*>(y), hp,
        wp, relu);
  else
    conv_pool_kernel<__nv_bfloat16, 3, 7, 2><<<grid, kWarps * 32, 0, s>>>(
        c, static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w), b,
        static_cast<__nv_bfloat16*>(y), hp, wp, relu);
  SL_CUDA_CHECK(cudaGetLastError(), "fused conv + pool kernel");
}

}  // namespace scenelab::cuda
