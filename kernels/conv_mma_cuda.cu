// Our implicit-GEMM convolution on tensor cores for half-precision NHWC tensors (f16, bf16): 7x7
// windows, cin 16 or 32, cout a multiple of 64, bias and ReLU in the epilogue, and a 2x2 max-pool
// there too where one follows (only the pooled map written). It is a candidate of `--conv auto`
// beside cuDNN (layers/conv2d.cpp times both once per size): cuDNN runs the nets' 16 -> 64 layer
// at 92 TOp/s at 320x240 (its tiles leave most of an H100's SMs idle) and its pool and bias are a
// second kernel. On the H100 this one takes that layer at every size measured (auto's timings:
// 0.16-0.19 ms against cuDNN's 0.28 with its pool pass at 1920x1080, 0.015 against 0.027 at
// 320x240). Not 64 -> 256:
// with a warp's weight fragments from L2 for 32 pixels it ran 2-3x slower than cuDNN (whose Hopper
// kernels share them across SMs), so cin is limited to 16 and 32.
//
// A block (8 warps, 8 x 16 conv outputs, 64 output channels) stages its input tile (the outputs'
// window with its halo, every channel; zero outside the image: padding) in shared memory once,
// and the weights' fragments one window row at a time, the next row loading (cp.async) while this
// one is multiplied. Two warps compute each 4 x 8 patch of output pixels (two m16 tiles: rows g
// and g + 8 of a tile are the same column in two neighbouring rows, so a 2x2 pool is a max in
// registers and one shuffle, as in kernels/conv_fused_cuda.cu) by the 64 channels (eight n8
// tiles), each over a share of the window's columns (K shares), their sums added in shared
// memory at the end: with one warp a patch (4 warps a block) the kernel was latency-bound at one
// warp a scheduler (Nsight Compute at 320x240: 0.29 instructions issued a cycle, most stalls on
// the MMAs' fixed latency). K runs over (ky, kx, 16 channels). Within each 16 channels the K
// order is permuted so that a lane's four A elements of a row are channels 4t..4t+3, one 8-byte
// shared-memory load (pixel pitches chosen so that a half-warp's loads hit distinct banks), and
// its B fragment one 8-byte load from weights rearranged once into fragment order (HalfWeights):
// a warp's 32 lanes read 256 consecutive bytes.
// Tried and dropped (H100): blocks of 8 x 8 and of 16 x 16 outputs, two warps sharing each 4 x 8
// patch with 32 channels each, every window row's weights requested at once (98 KB of shared
// memory a block: 12% slower at 1920x1080), patches of 2 x 8 outputs a warp with or without K
// shares, blocks of 4 x 16 outputs with K shares, three window rows in flight: none faster at
// both 320x240 and 1920x1080 (docs/BENCHMARKS.md at fb0dc9a).
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

using namespace mma_sm80;

constexpr int kKs = 7;
constexpr int kWx = 2;                  // warps across a block
constexpr int kCols = 8 * kWx;          // its conv outputs across
constexpr int kIw = kCols + kKs - 1;    // its input tile's width

// A block's shape: WY x kWx warps of pixels, each MT m-tiles (2 MT rows x 8 columns of outputs)
// by the 64 channels, KSPLIT warps on each such patch (each a share of the window's columns, the
// shares added in shared memory at the end), NSTAGE window rows of weights in flight.
template <int WY_, int MT_, int KSPLIT_, int NSTAGE_>
struct MmaShape {
  static constexpr int WY = WY_, MT = MT_, KSPLIT = KSPLIT_, NSTAGE = NSTAGE_;
  static constexpr int kRows = 2 * MT * WY, kIh = kRows + kKs - 1;
  static constexpr int kWarps = WY * kWx * KSPLIT;
};

// Bytes a pixel in the tile: a half-warp's 8-byte loads (4 pixels x 4 lanes) on distinct banks
// need a pitch of 32 or 96 modulo 128.
__host__ __device__ constexpr int pixel_pitch(int cin) { return cin * 2 + ((cin * 2) % 64 == 0 ? 32 : 0); }
// Shared memory of a block: NSTAGE window rows of B fragments (kKs * cin / 16 k-steps x 8
// n-tiles x 32 lanes x 8 bytes each), then the input tile; the K shares' partial sums reuse it.
template <typename S>
constexpr size_t smem_bytes(int cin) {
  const size_t b = S::NSTAGE * size_t(kKs) * (cin / 16) * 8 * 32 * 8 + size_t(S::kIh) * kIw * pixel_pitch(cin);
  const size_t red = S::KSPLIT > 1 ? size_t(S::WY) * kWx * (S::KSPLIT - 1) * S::MT * 32 * 32 * 4 : 0;
  return b > red ? b : red;
}

// Window column kx of row ky belongs to K share `share` of KSPLIT (2: the seven columns split
// 4 + 3 and 3 + 4 on alternate rows, each share 25 or 24 of the 49 window positions).
template <int KSPLIT>
__device__ __forceinline__ bool in_share(int ky, int kx, int share) {
  if constexpr (KSPLIT == 1) return true;
  else return (kx < ((ky & 1) ? 3 : 4)) == (share == 0);
}

template <typename T, int CIN, bool POOL, typename S>
__global__ void __launch_bounds__(32 * S::kWarps)
conv_mma_kernel(ConvShape c, const T* __restrict__ x, const uint2* __restrict__ wf, const float* __restrict__ bias,
                T* __restrict__ y, int groups, bool relu) {
  constexpr int KS = kKs, C16 = CIN / 16, PB = pixel_pitch(CIN), Q = CIN / 8, MT = S::MT;
  constexpr int KK = KS * C16;         // k-steps of one window row
  constexpr int BROW = KK * 8 * 32;    // B fragments (uint2) of one window row, 64 channels
  constexpr int STAGES = S::NSTAGE, iw = kIw, kRows = S::kRows, kIh = S::kIh;
  constexpr int PW = S::WY * kWx;      // warps of pixels (each patch has KSPLIT warps)
  extern __shared__ __align__(16) unsigned char smem[];
  uint2* bs = reinterpret_cast<uint2*>(smem);  // STAGES window rows of B, a ring
  unsigned char* tile = smem + STAGES * BROW * sizeof(uint2);
  const int b = blockIdx.z / groups, group = blockIdx.z % groups;  // image, 64-channel group
  const int oy0 = blockIdx.y * kRows, ox0 = blockIdx.x * kCols;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int pw = warp % PW, share = warp / PW;
  const int g = lane >> 2, t = lane & 3;
  const int ntiles = c.cout / 8;
  pdl_wait();

  // B of window row ky into buffer `buf`: KK chunks of 2 KB (8 n-tiles x 32 lanes, contiguous in
  // wf), 16 bytes a step.
  auto load_b = [&](int ky, int buf) {
    const uint2* src = wf + (size_t(ky) * KK * ntiles + size_t(group) * 8) * 32;
    uint2* dst = bs + buf * BROW;
    for (int i = tid; i < KK * 128; i += blockDim.x) {
      const int kk = i / 128, r = i % 128;
      cp_async16(dst + kk * 256 + r * 2, src + size_t(kk) * ntiles * 32 + r * 2, true);
    }
  };
  const T* xb = x + size_t(b) * c.h * c.w * CIN;
  for (int i = tid; i < kIh * kIw * Q; i += blockDim.x) {  // the tile, zero outside the image
    const int p = i / Q, q = i % Q;
    const int iy = oy0 - c.pad + p / iw, ix = ox0 - c.pad + p % iw;
    const bool in = iy >= 0 && iy < c.h && ix >= 0 && ix < c.w;
    cp_async16(tile + p * PB + q * 16, in ? xb + (size_t(iy) * c.w + ix) * CIN + q * 8 : x, in);
  }
  for (int r = 0; r < STAGES - 1; ++r) {  // the tile arrives with row 0
    load_b(r, r);
    cp_async_commit();
  }

  const int ty = 2 * MT * (pw / kWx), tx = 8 * (pw % kWx);  // the warp's first conv row, column
  const bool active = oy0 + ty < c.ho && ox0 + tx < c.wo;   // any of its outputs exists
  // A: lane's row g of m-tile m is pixel (ty + 2m, tx + g), row g + 8 the pixel below.
  const unsigned char* abase = tile + (ty * iw + tx + g) * PB + 8 * t;
  float acc[MT][8][4] = {};
  for (int ky = 0; ky < KS; ++ky) {
    if (ky + STAGES - 1 < KS) load_b(ky + STAGES - 1, (ky + STAGES - 1) % STAGES);  // later rows in flight
    cp_async_commit();
    cp_async_wait<STAGES - 1>();  // row ky (and the tile) arrived
    __syncthreads();
    if (active) {
      const uint2* bk = bs + (ky % STAGES) * BROW + lane;
#pragma unroll
      for (int kx = 0; kx < KS; ++kx) {
        if (!in_share<S::KSPLIT>(ky, kx, share)) continue;
#pragma unroll
        for (int cc = 0; cc < C16; ++cc) {
          const unsigned char* p = abase + (ky * iw + kx) * PB + cc * 32;
          uint32_t a[MT][4];
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            const uint2 r0 = *reinterpret_cast<const uint2*>(p + 2 * m * iw * PB);
            const uint2 r1 = *reinterpret_cast<const uint2*>(p + (2 * m + 1) * iw * PB);
            a[m][0] = r0.x, a[m][1] = r1.x, a[m][2] = r0.y, a[m][3] = r1.y;
          }
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const uint2 bw = bk[((kx * C16 + cc) * 8 + j) * 32];
#pragma unroll
            for (int m = 0; m < MT; ++m) mma<T>(acc[m][j], a[m], bw.x, bw.y);
          }
        }
      }
    }
    __syncthreads();  // this buffer is refilled STAGES rows on
  }
  if constexpr (S::KSPLIT > 1) {  // the other shares' sums into share 0's, in share order
    float* red = reinterpret_cast<float*>(smem);  // [share - 1][pw][MT * 32][lane]: B and the tile are spent
    constexpr int N = MT * 32;
    if (share > 0) {
      float* dst = red + ((share - 1) * PW + pw) * N * 32 + lane;
#pragma unroll
      for (int i = 0; i < N; ++i) dst[i * 32] = acc[i / 32][(i / 4) % 8][i % 4];
    }
    __syncthreads();
    if (share > 0) return;
    for (int s2 = 1; s2 < S::KSPLIT; ++s2) {
      const float* src = red + ((s2 - 1) * PW + pw) * N * 32 + lane;
#pragma unroll
      for (int i = 0; i < N; ++i) acc[i / 32][(i / 4) % 8][i % 4] += src[i * 32];
    }
  }
  if (!active) return;

  // acc[m][j]: [0], [1] pixel (ty + 2m, tx + g), channels 64 group + 8j + 2t, +1; [2], [3] the
  // pixel below.
  const int ch0 = 64 * group + 2 * t;
  float bj[8][2];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    bj[j][0] = bias ? bias[ch0 + 8 * j] : 0.f;
    bj[j][1] = bias ? bias[ch0 + 8 * j + 1] : 0.f;
  }
  if constexpr (POOL) {
    const int hp = c.ho / 2, wp = c.wo / 2;
    const int px = (ox0 + tx + g) / 2;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int py = (oy0 + ty + 2 * m) / 2;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float v0 = fmaxf(acc[m][j][0], acc[m][j][2]), v1 = fmaxf(acc[m][j][1], acc[m][j][3]);
        v0 = fmaxf(v0, __shfl_xor_sync(0xffffffffu, v0, 4));  // the pixel beside (g ^ 1)
        v1 = fmaxf(v1, __shfl_xor_sync(0xffffffffu, v1, 4));
        v0 += bj[j][0], v1 += bj[j][1];  // bias and ReLU commute with the max
        if (relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
        if ((g & 1) == 0 && py < hp && px < wp)
          *reinterpret_cast<uint32_t*>(y + ((size_t(b) * hp + py) * wp + px) * c.cout + ch0 + 8 * j) =
              pack2<T>(v0, v1);
      }
    }
  } else {
    const int ox = ox0 + tx + g;
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int oy = oy0 + ty + 2 * m + h;
        if (oy >= c.ho || ox >= c.wo) continue;
        T* dst = y + ((size_t(b) * c.ho + oy) * c.wo + ox) * c.cout + ch0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float v0 = acc[m][j][2 * h] + bj[j][0], v1 = acc[m][j][2 * h + 1] + bj[j][1];
          if (relu) v0 = fmaxf(v0, 0.f), v1 = fmaxf(v1, 0.f);
          *reinterpret_cast<uint32_t*>(dst + 8 * j) = pack2<T>(v0, v1);
        }
      }
  }
}

// OIHW float weights -> fragment order: element (kstep, n-tile, lane) is 4 values, W[n][c16 * 16
// + 4t .. + 3][ky][kx] with n = 8 n-tile + g, kstep = (ky * k + kx) * cin / 16 + c16.
template <typename T>
__global__ void mma_weights_kernel(const float* __restrict__ w, int cout, int cin, int k, T* __restrict__ out) {
  const size_t total = size_t(k) * k * (cin / 16) * (cout / 8) * 32;
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const int lane = int(i % 32), g = lane / 4, t = lane % 4;
  const size_t rest = i / 32;
  const int nt = int(rest % (cout / 8));
  const size_t ks = rest / (cout / 8);
  const int c16 = int(ks % (cin / 16));
  const int win = int(ks / (cin / 16));  // ky * k + kx
  const int n = 8 * nt + g;
  for (int e = 0; e < 4; ++e) {
    const float v = w[(size_t(n) * cin + 16 * c16 + 4 * t + e) * k * k + win];
    if constexpr (std::is_same_v<T, __half>)
      out[4 * i + e] = __float2half_rn(v);
    else
      out[4 * i + e] = __float2bfloat16_rn(v);
  }
}

// 8 warps: 2 x 2 patches of 4 x 8 outputs, two K shares on each; two window rows of weights in
// flight. (H100, reference net 320x240, same process: 57.8-58.2 us a pass against 61.2-61.5 with
// one warp a patch; 1920x1080 0.76 ms either way. Tried beside it: 3 rows in flight, patches of
// 2 x 8 outputs with or without K shares, blocks of 4 x 16 outputs: none faster at both sizes.)
using Default = MmaShape<2, 2, 2, 2>;

template <typename T>
bool has_binary() {
  static const bool ok =
      mma_sm80::has_sm80_binary(reinterpret_cast<const void*>(&conv_mma_kernel<T, 16, false, Default>));
  return ok;
}

template <typename T, int CIN, bool POOL, typename S>
void launch_v(const ConvShape& c, const void* x, const void* wf, const float* b, void* y, bool relu, cudaStream_t s) {
  constexpr size_t smem = smem_bytes<S>(CIN);
  auto* k = &conv_mma_kernel<T, CIN, POOL, S>;
  allow_dynamic_smem(reinterpret_cast<const void*>(k), smem, "conv_mma_nhwc");
  const int groups = c.cout / 64;
  const dim3 grid(unsigned((c.wo + kCols - 1) / kCols), unsigned((c.ho + S::kRows - 1) / S::kRows),
                  unsigned(c.n * groups));
  launch_pdl(k, grid, dim3(32 * S::kWarps), smem, s, "conv_mma_nhwc kernel", c, static_cast<const T*>(x),
             static_cast<const uint2*>(wf), b, static_cast<T*>(y), groups, relu);
}

template <typename T, int CIN, bool POOL>
void launch(const ConvShape& c, const void* x, const void* wf, const float* b, void* y, bool relu, cudaStream_t s) {
  launch_v<T, CIN, POOL, Default>(c, x, wf, b, y, relu, s);
}

template <typename T, bool POOL>
void launch_cin(const ConvShape& c, const void* x, const void* wf, const float* b, void* y, bool relu, cudaStream_t s) {
  if (c.cin == 16) launch<T, 16, POOL>(c, x, wf, b, y, relu, s);
  else launch<T, 32, POOL>(c, x, wf, b, y, relu, s);
}

}  // namespace

bool conv_mma_supported(const ConvShape& c, bool pool, DType t) {
  if (!(t == DType::F16 || t == DType::BF16) || c.k != kKs || (c.cin != 16 && c.cin != 32) ||
      c.cout < 64 || c.cout % 64 || c.pad < 0 || c.pad > c.k / 2 || c.n < 1 ||
      size_t(c.n) * (c.cout / 64) > 65535 || c.ho < 1 || c.wo < 1 || (pool && (c.ho < 2 || c.wo < 2)))
    return false;
  return t == DType::F16 ? has_binary<__half>() : has_binary<__nv_bfloat16>();
}

void conv_mma_nhwc(const ConvShape& c, const void* x, const void* wf, const float* b, void* y, bool relu,
                   bool pool, DType t, cudaStream_t s) {
  SL_REQUIRE(conv_mma_supported(c, pool, t), "conv_mma_nhwc: unsupported ", c.cin, "->", c.cout, " k=", c.k,
             " pad=", c.pad, pool ? " with a pool" : "", " or type ", dtype_name(t));
  if (t == DType::F16) {
    if (pool) launch_cin<__half, true>(c, x, wf, b, y, relu, s);
    else launch_cin<__half, false>(c, x, wf, b, y, relu, s);
  } else {
    if (pool) launch_cin<__nv_bfloat16, true>(c, x, wf, b, y, relu, s);
    else launch_cin<__nv_bfloat16, false>(c, x, wf, b, y, relu, s);
  }
  SL_CUDA_CHECK(cudaGetLastError(), "conv_mma_nhwc kernel");
}

size_t conv_mma_weights_bytes(const ConvShape& c) { return size_t(c.k) * c.k * c.cin * c.cout * 2; }

void conv_mma_weights(const float* w, const ConvShape& c, DType t, void* out, cudaStream_t s) {
  const size_t total = size_t(c.k) * c.k * (c.cin / 16) * (c.cout / 8) * 32;  // 4 values each
  const unsigned blocks = unsigned((total + 255) / 256);
  if (t == DType::F16)
    mma_weights_kernel<<<blocks, 256, 0, s>>>(w, c.cout, c.cin, c.k, static_cast<__half*>(out));
  else
    mma_weights_kernel<<<blocks, 256, 0, s>>>(w, c.cout, c.cin, c.k, static_cast<__nv_bfloat16*>(out));
  SL_CUDA_CHECK(cudaGetLastError(), "conv_mma_nhwc: the weights in fragment order");
}

}  // namespace scenelab::cuda
