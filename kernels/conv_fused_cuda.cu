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

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "kernels/conv_cuda.h"
#include "core/cuda_check.h"
#include "kernels/mma_sm80.cuh"

namespace scenelab::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kTileRows = 16;  // conv output rows per block; columns 64, or 32 where 64 would not fill the GPU

using namespace mma_sm80;

// CIN (<= 4) input channels, KS x KS window, NT * 8 output channels; pad 0 or KS / 2; pool 2x2
// stride 2. The tile keeps 4 channels a pixel (8 bytes, zero beyond CIN), and the GEMM's K runs
// over (window pixel, channel) in an order chosen for the fragments: at k-step s, lane t's four
// A elements of a row (mma columns 2t, 2t+1, 2t+8, 2t+9) are the 4 channels of window pixel
// 4s + t, one 8-byte shared-memory load; the weights are permuted alike (channel 3 and window
// pixels past KS * KS have zero weights). 2 loads a k-step where the 16-bit gather took 8 and
// 4 offsets (that kernel took 121 us at 1920x1080 on the H100, by Nsight Compute).
template <typename T, int CIN, int KS, int NT, int kTileCols>
__global__ void __launch_bounds__(kWarps * 32)
conv_pool_kernel(ConvShape c, const T* __restrict__ x, const uint2* __restrict__ wf,
                 const float* __restrict__ bias, T* __restrict__ y, int hp, int wp, bool relu) {
  static_assert(CIN >= 1 && CIN <= 4, "4 channels a pixel in the tile");
  constexpr int WIN = KS * KS, KSTEPS = (WIN + 3) / 4;
  constexpr int IN_ROWS = kTileRows + KS - 1, IN_COLS = kTileCols + KS - 1;
  __shared__ uint2 tile[IN_ROWS * IN_COLS];  // 4 channels (8 bytes) a pixel
  pdl_wait();

  const int b = blockIdx.z;
  const int oy0 = blockIdx.y * kTileRows, ox0 = blockIdx.x * kTileCols;  // conv output origin
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;

  const T* xb = x + size_t(b) * c.h * c.w * CIN;
  // The tile, every load of a thread issued before any is stored (a pixel an iteration waited for
  // memory four times over).
  constexpr int N = IN_ROWS * IN_COLS, PER = (N + kWarps * 32 - 1) / (kWarps * 32);
  uint16_t v[PER][4];
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    const int i = tid + k * kWarps * 32, ry = i / IN_COLS, rx = i % IN_COLS;
    const int iy = oy0 - c.pad + ry, ix = ox0 - c.pad + rx;
    v[k][0] = v[k][1] = v[k][2] = v[k][3] = 0;
    if (i < N && iy >= 0 && iy < c.h && ix >= 0 && ix < c.w) {
      const T* px = xb + (size_t(iy) * c.w + ix) * CIN;
#pragma unroll
      for (int ci = 0; ci < CIN; ++ci) v[k][ci] = bits(px[ci]);
    }
  }
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    const int i = tid + k * kWarps * 32;
    if (i < N) tile[i] = make_uint2(pack(v[k][0], v[k][1]), pack(v[k][2], v[k][3]));
  }

  // This thread's window pixel at each k-step (its offset in the tile, in pixels) and weight
  // fragments (conv_pool_weights: B[k][n] = w[n][pixel 4s + t][channel], n = 8j + g; one coalesced
  // 8-byte load each where gathering them from KRSC weights took 8 two-byte loads).
  int off[KSTEPS];
  uint32_t bw[KSTEPS][NT][2];
#pragma unroll
  for (int s = 0; s < KSTEPS; ++s) {
    const int q = 4 * s + t;
    off[s] = q < WIN ? (q / KS) * IN_COLS + q % KS : 0;  // past the window: zero weights
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const uint2 v = __ldg(wf + (s * NT + j) * 32 + lane);
      bw[s][j][0] = v.x;
      bw[s][j][1] = v.y;
    }
  }
  float bj[NT][2];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    bj[j][0] = bias ? bias[8 * j + 2 * t] : 0.f;
    bj[j][1] = bias ? bias[8 * j + 2 * t + 1] : 0.f;
  }
  __syncthreads();

  // A warp takes two m-tiles at once (wt and wt + kWarps): four independent accumulator chains
  // where one tile's two (NT = 2) left it waiting on each MMA's latency.
  constexpr int TILES_X = kTileCols / 8, TILES = (kTileRows / 2) * TILES_X;
  static_assert(TILES % (2 * kWarps) == 0, "tiles in pairs");
  for (int w0 = warp; w0 < TILES; w0 += 2 * kWarps) {
    int base0[2], py[2], px0[2];
    bool live[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int wt = w0 + u * kWarps;
      const int ty = (wt / TILES_X) * 2, tx = (wt % TILES_X) * 8;  // in conv pixels, in the block
      py[u] = (oy0 + ty) / 2, px0[u] = (ox0 + tx) / 2;             // pooled row, first column
      live[u] = py[u] < hp && px0[u] < wp;  // whole warp: some pooled pixel of this tile exists
      base0[u] = ty * IN_COLS + tx + g;      // A rows g and g + 8: pixels (ty, tx + g), (ty + 1, tx + g)
    }
    if (!live[0] && !live[1]) continue;
    float acc[2][NT][4] = {};
#pragma unroll
    for (int s = 0; s < KSTEPS; ++s)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const uint2 r0 = tile[base0[u] + off[s]], r1 = tile[base0[u] + IN_COLS + off[s]];
        const uint32_t a[4] = {r0.x, r1.x, r0.y, r1.y};
#pragma unroll
        for (int j = 0; j < NT; ++j) mma<T>(acc[u][j], a, bw[s][j][0], bw[s][j][1]);
      }
    // acc[u][j]: [0], [1] pixel (ty, tx + g), channels 8j + 2t, +1; [2], [3] pixel (ty + 1, tx + g).
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (!live[u]) continue;
      const int px = px0[u] + g / 2;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        float v0 = fmaxf(acc[u][j][0], acc[u][j][2]), v1 = fmaxf(acc[u][j][1], acc[u][j][3]);
        v0 = fmaxf(v0, __shfl_xor_sync(0xffffffffu, v0, 4));  // the pixel beside (g ^ 1)
        v1 = fmaxf(v1, __shfl_xor_sync(0xffffffffu, v1, 4));
        v0 += bj[j][0];
        v1 += bj[j][1];
        if (relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
        if ((g & 1) == 0 && px < wp) {
          T* dst = y + ((size_t(b) * hp + py[u]) * wp + px) * (NT * 8) + 8 * j + 2 * t;
          *reinterpret_cast<uint32_t*>(dst) = pack2<T>(v0, v1);
        }
      }
    }
  }
}

// OIHW float weights (3 -> 16, 7x7) -> the kernel's fragments: element (k-step s, n-tile j, lane)
// holds channels 0..3 of window pixel 4s + t for output 8j + g (zero past the window and for
// channel 3).
template <typename T>
__global__ void conv_pool_weights_kernel(const float* __restrict__ w, int cin, int ks, int nt, T* __restrict__ out) {
  const int win = ks * ks, ksteps = (win + 3) / 4;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= ksteps * nt * 32) return;
  const int lane = i % 32, j = (i / 32) % nt, s = i / (32 * nt);
  const int g = lane / 4, t = lane % 4, q = 4 * s + t, n = 8 * j + g;
  for (int ci = 0; ci < 4; ++ci) {
    const float v = q < win && ci < cin ? w[(size_t(n) * cin + ci) * win + q] : 0.f;
    if constexpr (std::is_same_v<T, __half>)
      out[4 * i + ci] = __float2half_rn(v);
    else
      out[4 * i + ci] = __float2bfloat16_rn(v);
  }
}

template <typename T>
const void* kernel_of() {
  return reinterpret_cast<const void*>(&conv_pool_kernel<T, 3, 7, 2, 64>);
}

template <typename T>
bool has_binary() {
  static const bool ok = mma_sm80::has_sm80_binary(kernel_of<T>());
  return ok;
}

bool shape_fits(const ConvShape& c, int pool_k, int pool_stride, DType t) {
  return c.cin == 3 && c.k == 7 && c.cout == 16 && (c.pad == 0 || c.pad == c.k / 2) && pool_k == 2 &&
         pool_stride == 2 && c.ho >= 2 && c.wo >= 2 && c.n >= 1 && c.n <= 65535 &&
         (t == DType::F16 || t == DType::BF16);
}

// The pair's second half for a warp's m16 tile: acc (the first product) + b1, ReLU, rounded to
// T, fed from registers as the A operand of the second product with W2 (staged in w2s, row
// pitch p2 halfs, zero beyond c3), + b2, written to y (pixels x c3).
template <typename T, int NT1>
__device__ __forceinline__ void pair_second(const float (&acc)[NT1][4], const float* __restrict__ b1, bool relu,
                                            const T* w2s, int p2, const float* __restrict__ b2, T* __restrict__ y,
                                            int base, int pixels, int c3, int g, int t) {
  float out[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < NT1 / 2; ++kk) {
    // a0 (row g, k 2t), a1 (row g + 8, k 2t), a2 (row g, k 2t + 8), a3 (row g + 8, k 2t + 8):
    // n-tiles 2kk and 2kk + 1 of the first product
    uint32_t af[4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int j = 2 * kk + h, col = 8 * j + 2 * t;
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[e] = acc[j][e] + b1[col + (e & 1)];
        if (relu) v[e] = fmaxf(v[e], 0.f);
      }
      af[2 * h] = pack2<T>(v[0], v[1]);      // row g
      af[2 * h + 1] = pack2<T>(v[2], v[3]);  // row g + 8
    }
#pragma unroll
    for (int j2 = 0; j2 < 2; ++j2) {
      const T* wr = w2s + (8 * j2 + g) * p2 + 16 * kk + 2 * t;
      mma<T>(out[j2], af, *reinterpret_cast<const uint32_t*>(wr), *reinterpret_cast<const uint32_t*>(wr + 8));
    }
  }
#pragma unroll
  for (int j2 = 0; j2 < 2; ++j2)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * j2 + 2 * t + (e & 1), px = base + g + (e >= 2 ? 8 : 0);
      if (col < c3 && px < pixels) {
        const float v = out[j2][e] + (b2 ? b2[col] : 0.f);
        if constexpr (std::is_same_v<T, __half>)
          y[size_t(px) * c3 + col] = __float2half_rn(v);
        else
          y[size_t(px) * c3 + col] = __float2bfloat16_rn(v);
      }
    }
}

// W2 (c3 x C2) into shared memory, 16 rows of pitch p2 halfs, zero beyond c3.
template <typename T, int C2>
__device__ __forceinline__ void stage_w2(const T* __restrict__ w2, int c3, T* w2s, int p2) {
  const uint16_t zero = 0;
  for (int i = threadIdx.x; i < 16 * C2; i += blockDim.x) {
    const int n = i / C2, k = i % C2;
    w2s[n * p2 + k] = n < c3 ? w2[size_t(n) * C2 + k] : *reinterpret_cast<const T*>(&zero);
  }
}

// Two pixel-wise layers in one pass (conv1x1_pair_nhwc): Y = W2 act(W1 X + b1) + b2 on NHWC
// half-precision tensors, X (pixels x C1), W1 (C2 x C1), W2 (C3 x C2). A warp computes 16 pixels
// (one m16 tile) of the first product with mma.sync m16n8k16 (f32 accumulators), adds b1,
// applies the ReLU, rounds to the tensors' type (as the unfused pass writes its intermediate
// tensor) and, the accumulator layout being the A-operand layout of the next mma, feeds the
// second product from registers: the intermediate never leaves the SM. K of the first product
// runs over the channels permuted within each 32 (at k-step 2s + p, lane t's four A elements are
// channels 32s + 8t + 4p .. + 3), so a lane loads its row's A elements of two k-steps as one
// 16-byte load (the next 32 channels' loads in flight while these are multiplied), and its B
// elements from W1 (staged in shared memory, rows 32 halfs longer than C1: conflict-free) as one
// 16-byte load too. W2 (at most 16 rows, zero beyond C3) is staged too. One m-tile a warp keeps
// the registers at about 80 (three blocks of 8 warps an SM): two took 140 and ran slower. (Blocks
// of 2 warps at small maps, to fill more SMs, made the 320x240 reference pass's pair slower, 9.3
// -> 16.1 us: each block stages all of W1.)
// STAGED false (small maps, where blocks of 8 warps would leave SMs idle): blocks of
// kPairSmallWarps warps read W1's fragments from global memory (L1/L2) instead of staging all of
// it per block, which made small blocks slower than big ones (9.3 -> 16.1 us for the 320x240
// reference pass's pair with blocks of 2 warps).
constexpr int kPairWarps = 8;  // 128 pixels a block
constexpr int kPairSmallWarps = 2;
// C1: c1 known at compile time (0: it is not), so that the small blocks' loop over it unrolls
// and its global loads are issued ahead of the MMAs that use them (a loop with one 16-byte input
// load in flight left the pair latency-bound at 9.3 us at 320x240).
// KSPLIT (small maps only, STAGED false): KSPLIT warps on each m16 tile, each a share of the C1
// channels, the shares' first products added in shared memory (in share order) before the
// second half; a block kPairSmallWarps tiles, the grid one block a kPairSmallWarps tiles. (Four
// shares where C1 allows: the 320x240 reference pass's pair 7.9 -> 6.7 us by Nsight Compute,
// the pass 57.8-58.2 -> 56.6-57.1 us on the H100.)
template <typename T, int NT1, bool STAGED, int C1, int KSPLIT = 1>
__global__ void __launch_bounds__(STAGED ? kPairWarps * 32 : kPairSmallWarps * KSPLIT * 32, STAGED ? 3 : 1)
conv1x1_pair_kernel(int pixels, int c1_arg, int c3, const T* __restrict__ x, const T* __restrict__ w1,
                    const float* __restrict__ b1, bool relu, const T* __restrict__ w2,
                    const float* __restrict__ b2, T* __restrict__ y) {
  static_assert(KSPLIT == 1 || !STAGED, "the K shares are for the small blocks");
  constexpr int C2 = NT1 * 8;
  const int c1 = C1 ? C1 : c1_arg;
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  const int p1 = STAGED ? c1 + 32 : c1, p2 = C2 + 8;  // row pitches (halfs)
  T* w1s = reinterpret_cast<T*>(smem);
  T* w2s = w1s + (STAGED ? size_t(C2) * p1 : 0);
  const T* w1b = STAGED ? w1s : w1;
  if constexpr (STAGED)
    for (int i = threadIdx.x; i < C2 * (c1 / 8); i += blockDim.x) {  // 16 bytes a thread
      const int n = i / (c1 / 8), k = (i % (c1 / 8)) * 8;
      *reinterpret_cast<uint4*>(w1s + size_t(n) * p1 + k) = *reinterpret_cast<const uint4*>(w1 + size_t(n) * c1 + k);
    }
  stage_w2<T, C2>(w2, c3, w2s, p2);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tiles = (pixels + 15) / 16;
  const int warps = blockDim.x / 32 / KSPLIT;  // tiles a block at once
  const int share = warp / warps, wt = warp % warps;
  const int nk = c1 / 32 / KSPLIT, k0 = share * nk * 32;  // this share's 32-channel steps
  const int first = blockIdx.x * warps + wt;
  // with K shares the grid covers the tiles once, and every warp reaches the barrier below
  for (int tile = first; KSPLIT > 1 ? tile == first : tile < tiles; tile += gridDim.x * warps) {
    const int base = tile * 16;
    float acc[NT1][4] = {};
    // rows g and g + 8 of the tile (null past the end: zeros)
    const T* row0 = base + g < pixels ? x + size_t(base + g) * c1 + k0 + 8 * t : nullptr;
    const T* row1 = base + g + 8 < pixels ? x + size_t(base + g + 8) * c1 + k0 + 8 * t : nullptr;
    const uint4 z = make_uint4(0, 0, 0, 0);
    uint4 lo = row0 ? *reinterpret_cast<const uint4*>(row0) : z;
    uint4 hi = row1 ? *reinterpret_cast<const uint4*>(row1) : z;
#pragma unroll
    for (int i = 0; i < nk; ++i) {
      const int k32 = 32 * i;
      uint4 nlo = z, nhi = z;
      if (i + 1 < nk) {
        if (row0) nlo = *reinterpret_cast<const uint4*>(row0 + k32 + 32);
        if (row1) nhi = *reinterpret_cast<const uint4*>(row1 + k32 + 32);
      }
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const uint32_t af[4] = {p ? lo.z : lo.x, p ? hi.z : hi.x, p ? lo.w : lo.y, p ? hi.w : hi.y};
#pragma unroll
        for (int j = 0; j < NT1; ++j) {
          const uint4 bw = *reinterpret_cast<const uint4*>(w1b + size_t(8 * j + g) * p1 + k0 + k32 + 8 * t);
          mma<T>(acc[j], af, p ? bw.z : bw.x, p ? bw.w : bw.y);
        }
      }
      lo = nlo, hi = nhi;
    }
    if constexpr (KSPLIT > 1) {  // shares 1.. hand their sums to share 0: [share - 1][wt][NT1 * 4][lane]
      float* red = reinterpret_cast<float*>(w2s + 16 * p2);
      constexpr int N = NT1 * 4;
      if (share > 0) {
        float* dst = red + ((share - 1) * warps + wt) * N * 32 + lane;
#pragma unroll
        for (int e = 0; e < N; ++e) dst[e * 32] = acc[e / 4][e % 4];
      }
      __syncthreads();
      if (share == 0)
        for (int s2 = 1; s2 < KSPLIT; ++s2) {
          const float* src = red + ((s2 - 1) * warps + wt) * N * 32 + lane;
#pragma unroll
          for (int e = 0; e < N; ++e) acc[e / 4][e % 4] += src[e * 32];
        }
      if (share > 0 || tile >= tiles) continue;
    }
    pair_second<T, NT1>(acc, b1, relu, w2s, p2, b2, y, base, pixels, c3, g, t);
  }
}

size_t pair_smem_bytes(int c1, int c2, bool staged = true, int ksplit = 1) {
  return ((staged ? size_t(c2) * (c1 + 32) : 0) + 16 * size_t(c2 + 8)) * 2 +
         size_t(ksplit - 1) * kPairSmallWarps * (c2 / 2) * 32 * 4;  // the K shares' sums (NT1 * 4 floats a lane)
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
  int sms = 0;
  SL_REQUIRE(current_device_attribute(cudaDevAttrMultiProcessorCount, sms), "fused conv + pool: no CUDA device");
  const unsigned rows = unsigned((c.ho + kTileRows - 1) / kTileRows);
  const bool narrow = size_t((c.wo + 63) / 64) * rows * c.n < size_t(sms);  // 64 columns would not fill it
  auto go = [&](auto type_tag, auto cols_tag) {
    using T = decltype(type_tag);
    constexpr int cols = decltype(cols_tag)::value;
    launch_pdl(&conv_pool_kernel<T, 3, 7, 2, cols>, dim3(unsigned((c.wo + cols - 1) / cols), rows, unsigned(c.n)),
               dim3(kWarps * 32), 0, s, "fused conv + pool kernel", c, static_cast<const T*>(x),
               static_cast<const uint2*>(w), b, static_cast<T*>(y), hp, wp, relu);
  };
  using C32 = std::integral_constant<int, 32>;
  using C64 = std::integral_constant<int, 64>;
  if (t == DType::F16) {
    if (narrow) go(__half{}, C32{});
    else go(__half{}, C64{});
  } else {
    if (narrow) go(__nv_bfloat16{}, C32{});
    else go(__nv_bfloat16{}, C64{});
  }
  SL_CUDA_CHECK(cudaGetLastError(), "fused conv + pool kernel");
}

size_t conv_pool_weights_bytes(const ConvShape& c) {
  return size_t((c.k * c.k + 3) / 4) * (c.cout / 8) * 32 * 8;
}

void conv_pool_weights(const float* w, const ConvShape& c, DType t, void* out, cudaStream_t s) {
  const int nt = c.cout / 8, total = (c.k * c.k + 3) / 4 * nt * 32;
  if (t == DType::F16)
    conv_pool_weights_kernel<<<(total + 255) / 256, 256, 0, s>>>(w, c.cin, c.k, nt, static_cast<__half*>(out));
  else
    conv_pool_weights_kernel<<<(total + 255) / 256, 256, 0, s>>>(w, c.cin, c.k, nt, static_cast<__nv_bfloat16*>(out));
  SL_CUDA_CHECK(cudaGetLastError(), "fused conv + pool: the weights' fragments");
}

bool conv1x1_pair_supported(int c1, int c2, int c3, DType t) {
  if (!(t == DType::F16 || t == DType::BF16) || c1 < 32 || c1 % 32 || (c2 != 16 && c2 != 32 && c2 != 64) ||
      c3 < 1 || c3 > 16)
    return false;
  // W1 staged in shared memory by the big blocks: past 48 KiB (the multiscale net's 768-channel
  // fc1: 102 KiB) by opting in, up to what a block of this device may have.
  int optin = 0;
  if (!current_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, optin)) return false;  // no device
  if (pair_smem_bytes(c1, c2) > size_t(std::max(optin, 48 * 1024))) return false;
  return t == DType::F16 ? has_binary<__half>() : has_binary<__nv_bfloat16>();
}

namespace {
template <typename T, int NT1>
void launch_pair(int pixels, int c1, int c3, const void* x, const void* w1, const float* b1, bool relu,
                 const void* w2, const float* b2, void* y, cudaStream_t s) {
  int sms = 0;
  SL_REQUIRE(current_device_attribute(cudaDevAttrMultiProcessorCount, sms), "fused 1x1 pair: no CUDA device");
  const int tiles = (pixels + 15) / 16;
  decltype(&conv1x1_pair_kernel<T, NT1, true, 0>) kernel = nullptr;
  int blocks = 0, warps = 0;
  size_t smem = 0;
  if ((tiles + kPairWarps - 1) / kPairWarps >= sms) {  // blocks of 8 warps fill the GPU: W1 staged
    kernel = &conv1x1_pair_kernel<T, NT1, true, 0>;
    blocks = std::min((tiles + kPairWarps - 1) / kPairWarps, 6 * sms);
    warps = kPairWarps;
    smem = pair_smem_bytes(c1, NT1 * 8);
    if (smem > 48 * 1024) allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, "fused 1x1 pair kernel");
  } else {  // small blocks reading W1 from global memory; four K shares where c1 allows
    const int split = c1 % 128 == 0 ? 4 : 1;
    if (split == 4)
      kernel = c1 == 256 ? &conv1x1_pair_kernel<T, NT1, false, 256, 4>  // the nets' classifier
                         : &conv1x1_pair_kernel<T, NT1, false, 0, 4>;
    else
      kernel = &conv1x1_pair_kernel<T, NT1, false, 0>;
    blocks = std::max(1, (tiles + kPairSmallWarps - 1) / kPairSmallWarps);
    warps = kPairSmallWarps * split;
    smem = pair_smem_bytes(c1, NT1 * 8, false, split);
  }
  launch_pdl(kernel, dim3(unsigned(blocks)), dim3(unsigned(warps * 32)), smem, s, "fused 1x1 pair kernel", pixels,
             c1, c3, static_cast<const T*>(x), static_cast<const T*>(w1), b1, relu, static_cast<const T*>(w2), b2,
             static_cast<T*>(y));
}
template <typename T>
void launch_pair_c2(int c2, int pixels, int c1, int c3, const void* x, const void* w1, const float* b1,
                    bool relu, const void* w2, const float* b2, void* y, cudaStream_t s) {
  if (c2 == 16) launch_pair<T, 2>(pixels, c1, c3, x, w1, b1, relu, w2, b2, y, s);
  else if (c2 == 32) launch_pair<T, 4>(pixels, c1, c3, x, w1, b1, relu, w2, b2, y, s);
  else launch_pair<T, 8>(pixels, c1, c3, x, w1, b1, relu, w2, b2, y, s);
}
}  // namespace

void conv1x1_pair_nhwc(int pixels, int c1, int c2, int c3, const void* x, const void* w1, const float* b1,
                       bool relu, const void* w2, const float* b2, void* y, DType t, cudaStream_t s) {
  SL_REQUIRE(conv1x1_pair_supported(c1, c2, c3, t), "conv1x1_pair_nhwc: unsupported ", c1, "->", c2, "->",
             c3, " or type ", dtype_name(t));
  if (pixels <= 0) return;
  if (t == DType::F16)
    launch_pair_c2<__half>(c2, pixels, c1, c3, x, w1, b1, relu, w2, b2, y, s);
  else
    launch_pair_c2<__nv_bfloat16>(c2, pixels, c1, c3, x, w1, b1, relu, w2, b2, y, s);
  SL_CUDA_CHECK(cudaGetLastError(), "fused 1x1 pair kernel");
}

}  // namespace scenelab::cuda
