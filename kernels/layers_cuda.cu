// GPU kernels of the simple layers: each mirrors the CPU loop of its layer file. f32 NCHW
// kernels, and NHWC kernels for f32, f16 and bf16 (channels innermost: a warp reads neighbouring
// channels of one pixel), computing in float.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "engine/error.h"
#include "kernels/layers_cuda.h"
#include "layers/softmax_mean.h"
#include "layers/upsample_taps.h"

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

__global__ void maxpool_kernel(const float* x, float* y, int planes, int h, int w, int ho, int wo,
                               int k, int s) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(planes) * ho * wo) return;
  const auto [p, oy, ox] = plane_pixel(i, ho, wo);
  const float* src = x + p * h * w;
  float m = -FLT_MAX * 2;  // -inf
  for (int dy = 0; dy < k; ++dy)
    for (int dx = 0; dx < k; ++dx) m = fmaxf(m, src[size_t(oy * s + dy) * w + ox * s + dx]);
  y[i] = m;
}

__global__ void downscale_kernel(const float* x, float* y, int planes, int h, int w, int ho,
                                 int wo, int f) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(planes) * ho * wo) return;
  const auto [p, oy, ox] = plane_pixel(i, ho, wo);
  const float* src = x + p * h * w;
  float s = 0;
  for (int dy = 0; dy < f; ++dy)
    for (int dx = 0; dx < f; ++dx) s += src[size_t(oy * f + dy) * w + ox * f + dx];
  y[i] = s * (1.f / float(f * f));
}

__global__ void upsample_kernel(const float* x, float* y, int planes, int hi, int wi, int ho,
                                int wo, bool geometry, bool bilinear, Geometry gi, Geometry go) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(planes) * ho * wo) return;
  const auto [p, oy, ox] = plane_pixel(i, ho, wo);
  const UpsampleTap t = upsample_tap(oy, hi, ho, geometry, bilinear, gi.offset_y, gi.stride_y,
                                     go.offset_y, go.stride_y);
  const UpsampleTap u = upsample_tap(ox, wi, wo, geometry, bilinear, gi.offset_x, gi.stride_x,
                                     go.offset_x, go.stride_x);
  const float* r0 = x + p * hi * wi + size_t(t.i0) * wi;
  const float* r1 = x + p * hi * wi + size_t(t.i1) * wi;
  const float top = r0[u.i0] + u.w1 * (r0[u.i1] - r0[u.i0]);
  const float bot = r1[u.i0] + u.w1 * (r1[u.i1] - r1[u.i0]);
  y[i] = top + t.w1 * (bot - top);
}

__global__ void argmax_kernel(const float* x, float* y, int n, int c, size_t plane) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * plane) return;
  const size_t b = i / plane, q = i % plane;
  const float* px = x + b * c * plane + q;
  int best = 0;
  float bv = px[0];
  for (int k = 1; k < c; ++k) {
    const float v = px[size_t(k) * plane];
    if (v > bv || (bv != bv && v == v)) bv = v, best = k;
  }
  y[i] = float(best);
}

__global__ void softmax_kernel(const float* x, float* y, int n, int c, size_t plane) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * plane) return;
  const size_t b = i / plane, q = i % plane;
  const float* px = x + b * c * plane + q;
  float* py = y + b * c * plane + q;
  float m = px[0];
  for (int k = 1; k < c; ++k) m = fmaxf(m, px[size_t(k) * plane]);
  float s = 0;
  for (int k = 0; k < c; ++k) {
    const float e = expf(px[size_t(k) * plane] - m);
    py[size_t(k) * plane] = e;
    s += e;
  }
  const float inv = 1.f / s;
  for (int k = 0; k < c; ++k) py[size_t(k) * plane] *= inv;
}

// Channel ch of YUV from RGB (layers/rgb_to_yuv.cpp's coefficients): the rgb_to_yuv kernel and
// the contrast normalisation's loads when it is fused after it compute it alike.
__device__ __forceinline__ float yuv_of(int ch, float r, float g, float bl) {
  return ch == 0   ? 0.299f * r + 0.587f * g + 0.114f * bl
         : ch == 1 ? -0.14713f * r - 0.28886f * g + 0.436f * bl
                   : 0.615f * r - 0.51499f * g - 0.10001f * bl;
}

__global__ void rgb_to_yuv_kernel(const float* x, float* y, int n, size_t plane) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * plane) return;
  const size_t b = i / plane, q = i % plane;
  const float r = x[b * 3 * plane + q], g = x[(b * 3 + 1) * plane + q], bl = x[(b * 3 + 2) * plane + q];
  for (int ch = 0; ch < 3; ++ch) y[(b * 3 + ch) * plane + q] = yuv_of(ch, r, g, bl);
}

__global__ void standardize_kernel(const float* x, float* y, const float* mean, const float* sd,
                                   int c, size_t plane, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int ch = int((i / plane) % c);
  y[i] = (x[i] - mean[ch]) * (1.f / sd[ch]);
}

struct Taps {
  float k[64];
};

// out = zero-padded 1-D Gaussian along x (dir 0) or y (dir 1), divided by the window mass
// inside the image (as layers/contrast_norm.cpp).
__global__ void blur_kernel(const float* in, float* out, int planes, int h, int w, Taps t,
                            int size, int dir) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(planes) * h * w) return;
  const int x = int(i % w), y = int((i / w) % h);
  const int r = size / 2, n = dir == 0 ? w : h, pos = dir == 0 ? x : y;
  const size_t step = dir == 0 ? 1 : size_t(w);
  const int lo = max(-r, -pos), hi = min(r, n - 1 - pos);
  float s = 0, mass = 0;
  for (int k = lo; k <= hi; ++k) {
    s += t.k[k + r] * in[i + ptrdiff_t(k) * ptrdiff_t(step)];
    mass += t.k[k + r];
  }
  out[i] = s * (1.f / mass);
}

__global__ void center_square_kernel(const float* x, const float* mean, float* cen, float* sq,
                                     size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float c = x[i] - mean[i];
  cen[i] = c;
  sq[i] = c * c;
}

// sd = sqrt(max(var, 0)) in place; blockIdx.y is the plane, block x of it writes its partial
// sum of sd to partial[plane][x] (double). sum_partials_kernel adds them in a fixed order, so the
// result does not depend on which block finishes first (bit-identical runs, any batch).
__global__ void sd_sum_kernel(float* var, size_t plane, double* partial) {
  float* v = var + size_t(blockIdx.y) * plane;
  double acc = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < plane;
       i += size_t(gridDim.x) * blockDim.x) {
    const float s = sqrtf(fmaxf(v[i], 0.f));
    v[i] = s;
    acc += s;
  }
  __shared__ double red[kThreads];
  red[threadIdx.x] = acc;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[size_t(blockIdx.y) * gridDim.x + blockIdx.x] = red[0];
}

__global__ void sum_partials_kernel(const double* partial, int per_plane, int planes, double* sums) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= planes) return;
  double s = 0;
  for (int k = 0; k < per_plane; ++k) s += partial[size_t(p) * per_plane + k];
  sums[p] = s;
}

__global__ void divide_kernel(const float* cen, const float* sd, const double* sums, float eps,
                              float* y, size_t plane, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float thr = fmaxf(float(sums[i / plane] / double(plane)), eps);
  y[i] = cen[i] / fmaxf(sd[i], thr);
}

// dst[c][i] = act(src[c][i] + b[c]) for i < cols, rows `ld_src` / `ld_dst` apart (in place when
// src == dst). grid.y = channel, so the bias is a per-block constant and no index is divided.
__global__ void bias_act_kernel(const float* src, size_t ld_src, float* dst, size_t ld_dst,
                                const float* b, size_t cols, bool relu) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= cols) return;
  const int c = blockIdx.y;
  const float v = src[size_t(c) * ld_src + i] + (b ? b[c] : 0.f);
  dst[size_t(c) * ld_dst + i] = relu ? fmaxf(v, 0.f) : v;
}


// ---- NHWC, any element type ----
__device__ __forceinline__ float ld(const float* p, size_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half* p, size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half* p, size_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void st(__nv_bfloat16* p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

template <typename T>
__global__ void relu_any_kernel(const T* x, T* y, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) st(y, i, fmaxf(ld(x, i), 0.f));
}

// Output element i of an NHWC tensor (n x ho x wo x c) -> image, row, column, channel.
struct Nhwc {
  size_t b;
  int y, x, c;
};
__device__ __forceinline__ Nhwc nhwc_of(size_t i, int ho, int wo, int c) {
  return {i / (size_t(c) * wo * ho), int((i / (size_t(c) * wo)) % ho), int((i / c) % wo), int(i % c)};
}

template <typename T>
__global__ void maxpool_nhwc_kernel(const T* x, T* y, int c, int h, int w, int ho, int wo, int k,
                                    int s, size_t total) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const Nhwc o = nhwc_of(i, ho, wo, c);
  float m = -FLT_MAX * 2;
  for (int dy = 0; dy < k; ++dy)
    for (int dx = 0; dx < k; ++dx)
      m = fmaxf(m, ld(x, ((o.b * h + size_t(o.y * s + dy)) * w + size_t(o.x * s + dx)) * c + o.c));
  st(y, i, m);
}

template <typename T>
__global__ void downscale_nhwc_kernel(const T* x, T* y, int c, int h, int w, int ho, int wo,
                                      int f, size_t total) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const Nhwc o = nhwc_of(i, ho, wo, c);
  float s = 0;
  for (int dy = 0; dy < f; ++dy)
    for (int dx = 0; dx < f; ++dx)
      s += ld(x, ((o.b * h + size_t(o.y * f + dy)) * w + size_t(o.x * f + dx)) * c + o.c);
  st(y, i, s * (1.f / float(f * f)));
}

template <typename T>
__global__ void upsample_nhwc_kernel(const T* x, T* y, int c, int hi, int wi, int ho, int wo,
                                     bool geometry, bool bilinear, Geometry gi, Geometry go,
                                     size_t total) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const Nhwc o = nhwc_of(i, ho, wo, c);
  const UpsampleTap t = upsample_tap(o.y, hi, ho, geometry, bilinear, gi.offset_y, gi.stride_y,
                                     go.offset_y, go.stride_y);
  const UpsampleTap u = upsample_tap(o.x, wi, wo, geometry, bilinear, gi.offset_x, gi.stride_x,
                                     go.offset_x, go.stride_x);
  auto at = [&](int yy, int xx) { return ld(x, ((o.b * hi + size_t(yy)) * wi + size_t(xx)) * c + o.c); };
  const float a0 = at(t.i0, u.i0), a1 = at(t.i0, u.i1), b0 = at(t.i1, u.i0), b1 = at(t.i1, u.i1);
  const float top = a0 + u.w1 * (a1 - a0), bot = b0 + u.w1 * (b1 - b0);
  st(y, i, top + t.w1 * (bot - top));
}

// ---- Contrast normalisation in two passes (+ a reduction), the standardisation fused ----
// A block takes a tile of kLcnW x kLcnH pixels of one image, every channel in turn, and rebuilds
// in shared memory what the multi-pass path writes to global memory: the channel over the tile and
// a 2R margin (zero outside the image), its local mean on a margin of R (horizontal then vertical
// Gaussian, each divided by the window's mass inside the image), the centred values (zero
// outside), and the local variance on the tile. Each 1-D pass is a sliding window in registers
// (kSeg outputs a thread from kSeg + 2R loads); in the horizontal passes a warp's lanes take
// consecutive rows and in the vertical ones consecutive columns, and the rows' pitches are odd,
// so that no two lanes of a load meet in one shared-memory bank. Pass 1 writes the centred values
// and the local deviations sd and adds each tile's sd in double (per-block partial sums, then
// added in a fixed order: bit-identical runs); pass 2, one thread a pixel (every channel),
// writes y = c / max(sd, mean(sd), eps), standardised, in the output's format.
// (A 64 x 32 tile: 79 multiply-adds an output pixel and channel against 112 for 32 x 16, whose
// kernel took 189 us of a 1920x1080 fp16 pass on the H100, by Nsight Compute.)
// Two tile shapes: 64 x 32 (8 outputs a thread in a 1-D pass) where the image gives enough of
// them to fill the GPU, else 32 x 16 (4 a thread): smaller images keep more blocks.
constexpr int kLcnThreads = 256;
struct LcnBig {
  static constexpr int W = 64, H = 32, SEG = 8;
};
struct LcnSmall {
  static constexpr int W = 32, H = 16, SEG = 4;
};

template <int R, typename Tl>
struct LcnSmem {
  static constexpr int kLcnW = Tl::W, kLcnH = Tl::H;
  static constexpr int XW = kLcnW + 4 * R, XH = kLcnH + 4 * R;  // the channel, margin 2R
  static constexpr int MW = kLcnW + 2 * R, MH = kLcnH + 2 * R;  // mean and centred, margin R
  static constexpr int XP = XW | 1, MP = MW | 1, QP = kLcnW | 1;  // odd row pitches
  union {
    float x[XH * XP];   // the channel
    float q[MH * QP];   // horizontal pass of c^2 (once the centred values are made, x is spent)
  };
  float t[XH * MP];      // horizontal pass of x
  float c[MH * MP];      // the centred values (x less its local mean)
  float cx[XW], cy[XH];  // 1 / (window mass inside the image) per column / row of the x region
  float g[2 * R + 1];
};

// out[i] = sum_k g[k] * in[i + k * step], i over kSeg consecutive outputs from `in` (stride
// step); `count` (<= kSeg) outputs are wanted, loads beyond them are not made.
template <int R, int kSeg>
__device__ __forceinline__ void slide(const float* in, int step, const float* g, float (&out)[kSeg], int count) {
  float v[kSeg + 2 * R];
#pragma unroll
  for (int i = 0; i < kSeg + 2 * R; ++i) v[i] = i < count + 2 * R ? in[i * step] : 0.f;
#pragma unroll
  for (int o = 0; o < kSeg; ++o) {
    float acc = 0;
#pragma unroll
    for (int k = 0; k <= 2 * R; ++k) acc += g[k] * v[o + k];
    out[o] = acc;
  }
}

// The variance of channel `ch` of image b over the block's tile into var (kLcnH x kLcnW, in
// registers of the threads: each thread kSeg values of one column, `col` and `row0`).
// Returns false for threads without a column segment. Also leaves the centred values in S.c.
template <int R, typename Tl>
__device__ bool lcn_tile(const float* x, int C, int H, int W, int b, int ch, int y0, int x0,
                         LcnSmem<R, Tl>& S, float (&var)[Tl::SEG], int& col, int& row0, bool yuv) {
  using L = LcnSmem<R, Tl>;
  constexpr int kLcnW = Tl::W, kLcnH = Tl::H, kSeg = Tl::SEG;
  const size_t plane = size_t(H) * W;
  const float* src = x + (size_t(b) * C + (yuv ? 0 : ch)) * plane;  // yuv: the image's R, G, B planes
  // The region, kBatch pixels a thread at a time: every load of a batch is issued before any is
  // used (one pixel an iteration waited for memory 9 times over a small tile's region).
  constexpr int N = L::XH * L::XW, PER = (N + kLcnThreads - 1) / kLcnThreads, kBatch = 5;
  for (int k0 = 0; k0 < PER; k0 += kBatch) {
    float v[kBatch][3];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = int(threadIdx.x) + (k0 + k) * kLcnThreads, r = i / L::XW, j = i % L::XW;
      const int yy = y0 - 2 * R + r, xx = x0 - 2 * R + j;
      v[k][0] = v[k][1] = v[k][2] = 0.f;
      if (i < N && yy >= 0 && yy < H && xx >= 0 && xx < W) {
        const size_t at = size_t(yy) * W + xx;
        v[k][0] = src[at];
        if (yuv) v[k][1] = src[plane + at], v[k][2] = src[2 * plane + at];
      }
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = int(threadIdx.x) + (k0 + k) * kLcnThreads;
      if (i < N) S.x[(i / L::XW) * L::XP + i % L::XW] = yuv ? yuv_of(ch, v[k][0], v[k][1], v[k][2]) : v[k][0];
    }
  }
  __syncthreads();
  // t = horizontal blur of x at the mean's columns (x region column j + R), every x row; lanes
  // take consecutive rows of one segment.
  constexpr int TS = (L::MW + kSeg - 1) / kSeg;
  for (int i = threadIdx.x; i < L::XH * TS; i += blockDim.x) {
    const int r = i % L::XH, j0 = (i / L::XH) * kSeg, n = min(kSeg, L::MW - j0);
    float o[kSeg];
    slide<R, kSeg>(S.x + r * L::XP + j0, 1, S.g, o, n);
#pragma unroll
    for (int k = 0; k < kSeg; ++k)
      if (k < n) S.t[r * L::MP + j0 + k] = o[k] * S.cx[j0 + k + R];
  }
  __syncthreads();
  // c = x - vertical blur of t (the mean), zero outside the image; rows of the mean's region,
  // lanes on consecutive columns.
  constexpr int MS = (L::MH + kSeg - 1) / kSeg;
  for (int i = threadIdx.x; i < L::MW * MS; i += blockDim.x) {
    const int j = i % L::MW, r0 = (i / L::MW) * kSeg, n = min(kSeg, L::MH - r0);
    float o[kSeg];
    slide<R, kSeg>(S.t + r0 * L::MP + j, L::MP, S.g, o, n);
    const int xx = x0 - R + j;
#pragma unroll
    for (int k = 0; k < kSeg; ++k) {
      if (k >= n) break;
      const int yy = y0 - R + r0 + k;
      const bool in = yy >= 0 && yy < H && xx >= 0 && xx < W;
      S.c[(r0 + k) * L::MP + j] = in ? S.x[(r0 + k + R) * L::XP + j + R] - o[k] * S.cy[r0 + k + R] : 0.f;
    }
  }
  __syncthreads();  // x is spent: q takes its place
  // q = horizontal blur of c^2 at the tile's columns, rows of the mean's region; lanes on rows.
  constexpr int QS = kLcnW / kSeg;
  for (int i = threadIdx.x; i < L::MH * QS; i += blockDim.x) {
    const int r = i % L::MH, j0 = (i / L::MH) * kSeg;
    float v[kSeg + 2 * R];
#pragma unroll
    for (int k = 0; k < kSeg + 2 * R; ++k) {
      const float cv = S.c[r * L::MP + j0 + k];
      v[k] = cv * cv;
    }
#pragma unroll
    for (int o = 0; o < kSeg; ++o) {
      float acc = 0;
#pragma unroll
      for (int k = 0; k <= 2 * R; ++k) acc += S.g[k] * v[o + k];
      S.q[r * L::QP + j0 + o] = acc * S.cx[j0 + o + 2 * R];
    }
  }
  __syncthreads();
  // var = vertical blur of q on the tile: thread -> (column, kSeg rows).
  constexpr int VS = kLcnH / kSeg;
  static_assert(kLcnW * VS <= kLcnThreads, "one vertical segment a thread");
  if (int(threadIdx.x) >= kLcnW * VS) return false;
  col = threadIdx.x % kLcnW;
  row0 = (threadIdx.x / kLcnW) * kSeg;
  slide<R, kSeg>(S.q + row0 * L::QP + col, L::QP, S.g, var, kSeg);
#pragma unroll
  for (int k = 0; k < kSeg; ++k) var[k] *= S.cy[row0 + k + 2 * R];
  return true;
}

// sums[p] = the partials of plane p added by one block: thread i takes partials i, i + 256, ...
// in order, then a fixed tree (the same order every run; thousands of partials at 1080p, which
// one thread a plane added too slowly).
__global__ void __launch_bounds__(256) sum_partials_block_kernel(const double* partial, int per_plane,
                                                                 double* sums) {
  __shared__ double red[256];
  const double* p = partial + size_t(blockIdx.x) * per_plane;
  double s = 0;
  for (int i = threadIdx.x; i < per_plane; i += 256) s += p[i];
  red[threadIdx.x] = s;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (int(threadIdx.x) < k) red[threadIdx.x] += red[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = red[0];
}

template <int R, typename Tl>
__device__ void lcn_setup(LcnSmem<R, Tl>& S, const Taps& taps, int H, int W, int y0, int x0) {
  using L = LcnSmem<R, Tl>;
  for (int i = threadIdx.x; i < 2 * R + 1; i += blockDim.x) S.g[i] = taps.k[i];
  // Window mass inside the image around each column / row of the x region (the CPU's edge
  // coefficients, summed in the same order).
  for (int i = threadIdx.x; i < L::XW + L::XH; i += blockDim.x) {
    const bool is_col = i < L::XW;
    const int pos = is_col ? x0 - 2 * R + i : y0 - 2 * R + (i - L::XW), n = is_col ? W : H;
    double m = 0;
    for (int k = -R; k <= R; ++k)
      if (pos + k >= 0 && pos + k < n) m += double(taps.k[k + R]);
    const float v = m > 0 ? float(1.0 / m) : 0.f;  // no tap inside: a zero row or column anyway
    if (is_col) S.cx[i] = v;
    else S.cy[i - L::XW] = v;
  }
  __syncthreads();
}

// per_channel: blockIdx.z is image * C + channel, each block one channel (small images: three
// times the blocks, a third of each one's serial chain); else blockIdx.z is the image, every
// channel in turn.
template <int R, typename Tl>
__global__ void __launch_bounds__(kLcnThreads) lcn_sd_sum_kernel(const float* x, int C, int H, int W, Taps taps,
                                                         float* cen, float* sd, double* partial, bool yuv,
                                                         bool per_channel) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  LcnSmem<R, Tl>& S = *reinterpret_cast<LcnSmem<R, Tl>*>(smem_raw);
  __shared__ double red[8];
  constexpr int kSeg = Tl::SEG;
  const int b = per_channel ? blockIdx.z / C : blockIdx.z, y0 = blockIdx.y * Tl::H, x0 = blockIdx.x * Tl::W;
  const int blk = blockIdx.y * gridDim.x + blockIdx.x, nblk = gridDim.x * gridDim.y;
  const int ch_begin = per_channel ? blockIdx.z % C : 0, ch_end = per_channel ? ch_begin + 1 : C;
  pdl_wait();
  lcn_setup<R, Tl>(S, taps, H, W, y0, x0);
  for (int ch = ch_begin; ch < ch_end; ++ch) {
    float var[kSeg];
    int col = 0, row0 = 0;
    double acc = 0;
    if (lcn_tile<R, Tl>(x, C, H, W, b, ch, y0, x0, S, var, col, row0, yuv)) {
      const size_t at = (size_t(b) * C + ch) * size_t(H) * W + size_t(y0 + row0) * W + x0 + col;
      for (int k = 0; k < kSeg; ++k)
        if (y0 + row0 + k < H && x0 + col < W) {
          const float d = sqrtf(fmaxf(var[k], 0.f));
          cen[at + size_t(k) * W] = S.c[(row0 + k + R) * LcnSmem<R, Tl>::MP + col + R];
          sd[at + size_t(k) * W] = d;
          acc += double(d);
        }
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      double s = 0;
      for (int w = 0; w < int(blockDim.x >> 5); ++w) s += red[w];
      partial[(size_t(b) * C + ch) * nblk + blk] = s;
    }
    __syncthreads();  // S and red are reused by the next channel
  }
}

// y (n x C x H x W in T's layout: f32 NCHW, or NHWC of any type) = c / max(sd, thr), standardised:
// one thread a pixel of image blockIdx.y, every channel (C <= 4), from pass 1's centred values and
// deviations (f32 NCHW); no integer division.
// partial (not null): the image's planes' block partials (nblk each, at most kThreads) are added
// here, by each block in the same fixed order (one warp a plane), instead of by
// sum_partials_block_kernel first: one kernel fewer in the chain of a small image.
template <typename T>
__global__ void __launch_bounds__(kThreads) lcn_apply_kernel(const float* cen, const float* sdv, T* y, bool nhwc,
                                                            int C, unsigned plane, const double* sums,
                                                            const double* partial, int nblk, float eps,
                                                            const float* mean, const float* sdev) {
  const unsigned p = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t b = blockIdx.y;
  __shared__ double total[4];
  pdl_wait();
  if (partial) {  // warp ch adds plane ch's partials: lane i those at i, i + 32, ..., then a fixed tree
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp < C) {
      const double* pp = partial + (b * C + warp) * nblk;
      double v = 0;
      for (int i = lane; i < nblk; i += 32) v += pp[i];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) total[warp] = v;
    }
    __syncthreads();
  }
  if (p >= plane) return;
  for (int ch = 0; ch < C; ++ch) {
    const size_t at = (b * C + ch) * plane + p;
    const float thr = fmaxf(float((partial ? total[ch] : sums[b * C + ch]) / double(plane)), eps);
    const float v = cen[at] / fmaxf(sdv[at], thr);
    st(y, nhwc ? (b * plane + p) * C + ch : at, mean ? (v - mean[ch]) * (1.f / sdev[ch]) : v);
  }
}

// 2-byte types with channels a multiple of 8: one thread 8 channels of an output pixel (its taps
// computed once for them), 16-byte loads of the four neighbours and one 16-byte store.
template <typename T>
__global__ void upsample_nhwc8_kernel(const T* x, T* y, int c, int hi, int wi, int ho, int wo,
                                      bool geometry, bool bilinear, Geometry gi, Geometry go,
                                      size_t groups) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= groups) return;
  const int gc = c / 8;
  const int cg = int(i % gc);
  const size_t pix = i / gc;
  const int ox = int(pix % wo), oy = int((pix / wo) % ho);
  const size_t b = pix / (size_t(wo) * ho);
  const UpsampleTap t = upsample_tap(oy, hi, ho, geometry, bilinear, gi.offset_y, gi.stride_y,
                                     go.offset_y, go.stride_y);
  const UpsampleTap u = upsample_tap(ox, wi, wo, geometry, bilinear, gi.offset_x, gi.stride_x,
                                     go.offset_x, go.stride_x);
  auto at = [&](int yy, int xx) {
    return *reinterpret_cast<const uint4*>(x + ((b * hi + size_t(yy)) * wi + size_t(xx)) * c + 8 * size_t(cg));
  };
  const uint4 va0 = at(t.i0, u.i0), va1 = at(t.i0, u.i1), vb0 = at(t.i1, u.i0), vb1 = at(t.i1, u.i1);
  const T *a0 = reinterpret_cast<const T*>(&va0), *a1 = reinterpret_cast<const T*>(&va1);
  const T *b0 = reinterpret_cast<const T*>(&vb0), *b1 = reinterpret_cast<const T*>(&vb1);
  uint4 out;
  T* o = reinterpret_cast<T*>(&out);
  for (int q = 0; q < 8; ++q) {
    const float p00 = ld(a0, q), p01 = ld(a1, q), p10 = ld(b0, q), p11 = ld(b1, q);
    const float top = p00 + u.w1 * (p01 - p00), bot = p10 + u.w1 * (p11 - p10);
    st(o, q, top + t.w1 * (bot - top));
  }
  *reinterpret_cast<uint4*>(y + pix * c + 8 * size_t(cg)) = out;
}

// 2-byte types with channels a multiple of 8: one thread 8 channels of an output pixel, 16-byte
// loads and stores (the pools after cuDNN's convolutions read 16..64 channels a pixel).
// With bias (the channels', float) and relu: y = act(max + bias), which equals pooling act(x + b)
// as the unfused layers do, bit for bit (adding a constant and rounding are monotonic), from a
// convolution's raw output (bias_relu_maxpool).
template <typename T, typename Idx>
__global__ void maxpool_nhwc8_kernel(const T* x, T* y, int c, int h, int w, int ho, int wo, int k,
                                     int s, Idx total, const float* bias = nullptr, bool relu = false) {
  const Idx i = Idx(blockIdx.x) * blockDim.x + threadIdx.x;  // one 8-channel group
  if (i >= total) return;
  const Idx groups = Idx(c / 8);
  const int cg = int(i % groups);
  const Idx pix = i / groups;
  const int ox = int(pix % Idx(wo));
  const Idx row = pix / Idx(wo);  // b * ho + oy
  const int oy = int(row % Idx(ho));
  const size_t b = size_t(row / Idx(ho));
  float m[8];
  for (int q = 0; q < 8; ++q) m[q] = -FLT_MAX * 2;
  for (int dy = 0; dy < k; ++dy)
    for (int dx = 0; dx < k; ++dx) {
      const size_t at = ((b * h + size_t(oy * s + dy)) * w + size_t(ox * s + dx)) * c + 8 * size_t(cg);
      const uint4 v = *reinterpret_cast<const uint4*>(x + at);
      const T* e = reinterpret_cast<const T*>(&v);
      for (int q = 0; q < 8; ++q) m[q] = fmaxf(m[q], ld(e, q));
    }
  if (bias)
    for (int q = 0; q < 8; ++q) m[q] += bias[8 * cg + q];
  if (relu)
    for (int q = 0; q < 8; ++q) m[q] = fmaxf(m[q], 0.f);
  uint4 out;
  T* o = reinterpret_cast<T*>(&out);
  for (int q = 0; q < 8; ++q) st(o, q, m[q]);
  *reinterpret_cast<uint4*>(y + size_t(pix) * c + 8 * size_t(cg)) = out;
}

// One thread an output pixel: every channel resampled in float and compared.
constexpr int kUaW = 64, kUaH = 4;
template <typename T>
__global__ void __launch_bounds__(kUaW * kUaH) upsample_argmax_kernel(const T* x, T* y, int c, int hi, int wi, int ho, int wo,
                                       bool nhwc, bool geometry, bool bilinear, Geometry gi,
                                       Geometry go) {
  // A block of kUaW x kUaH output pixels (grid: columns, rows, images; no integer division):
  // the taps of its columns and rows, in double, computed once each into shared memory.
  __shared__ UpsampleTap col_tap[kUaW], row_tap[kUaH];
  pdl_wait();
  const int ox = int(blockIdx.x * kUaW + threadIdx.x), oy = int(blockIdx.y * kUaH + threadIdx.y);
  if (threadIdx.y == 0 && ox < wo)
    col_tap[threadIdx.x] = upsample_tap(ox, wi, wo, geometry, bilinear, gi.offset_x, gi.stride_x,
                                        go.offset_x, go.stride_x);
  if (threadIdx.x == 0 && oy < ho)
    row_tap[threadIdx.y] = upsample_tap(oy, hi, ho, geometry, bilinear, gi.offset_y, gi.stride_y,
                                        go.offset_y, go.stride_y);
  __syncthreads();
  if (ox >= wo || oy >= ho) return;
  const size_t b = blockIdx.z;
  const size_t i = (b * ho + size_t(oy)) * wo + size_t(ox);
  const UpsampleTap t = row_tap[threadIdx.y], u = col_tap[threadIdx.x];
  const size_t plane = size_t(hi) * wi;
  // Element (channel k, pixel p) of image b: NHWC or NCHW.
  const size_t cs = nhwc ? 1 : plane, ps = nhwc ? size_t(c) : 1;
  const T* xb = x + b * c * plane;
  const size_t p00 = (size_t(t.i0) * wi + u.i0) * ps, p01 = (size_t(t.i0) * wi + u.i1) * ps;
  const size_t p10 = (size_t(t.i1) * wi + u.i0) * ps, p11 = (size_t(t.i1) * wi + u.i1) * ps;
  int best = 0;
  float bv = 0;
  for (int k = 0; k < c; ++k) {
    const size_t o = size_t(k) * cs;
    const float a0 = ld(xb, p00 + o), a1 = ld(xb, p01 + o), b0 = ld(xb, p10 + o), b1 = ld(xb, p11 + o);
    const float top = a0 + u.w1 * (a1 - a0), bot = b0 + u.w1 * (b1 - b0);
    const float v = top + t.w1 * (bot - top);
    if (k == 0 || v > bv || (bv != bv && v == v)) bv = v, best = k;
  }
  st(y, i, float(best));
}

// One thread a pixel: the channels are contiguous.
template <typename T>
__global__ void argmax_nhwc_kernel(const T* x, T* y, int c, size_t pixels) {
  size_t p = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= pixels) return;
  const T* px = x + p * c;
  int best = 0;
  float bv = ld(px, 0);
  for (int k = 1; k < c; ++k) {
    const float v = ld(px, k);
    if (v > bv || (bv != bv && v == v)) bv = v, best = k;
  }
  st(y, p, float(best));
}

// One class's softmax probability over the channels of frame `frame`, as the CPU computes it
// (engine/labeler.h class_probabilities: exponentials in double after subtracting the maximum),
// into a float plane: the sliding-window head's input.
template <typename T>
__global__ void class_probability_kernel(const T* x, bool nhwc, int c, size_t plane, int frame, int cls,
                                         float* out) {
  const size_t p = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= plane) return;
  const size_t base = nhwc ? (size_t(frame) * plane + p) * c : size_t(frame) * c * plane + p;
  const size_t step = nhwc ? 1 : plane;
  float m = ld(x, base);
  for (int k = 1; k < c; ++k) m = fmaxf(m, ld(x, base + k * step));
  double sum = 0;
  for (int k = 0; k < c; ++k) sum += exp(double(ld(x, base + k * step) - m));
  out[p] = float(exp(double(ld(x, base + cls * step) - m)) / sum);
}

template <typename T>
__global__ void softmax_nhwc_kernel(const T* x, T* y, int c, size_t pixels) {
  size_t p = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= pixels) return;
  const T* px = x + p * c;
  T* py = y + p * c;
  float m = ld(px, 0);
  for (int k = 1; k < c; ++k) m = fmaxf(m, ld(px, k));
  float s = 0;
  for (int k = 0; k < c; ++k) s += expf(ld(px, k) - m);
  const float inv = 1.f / s;
  for (int k = 0; k < c; ++k) st(py, k, expf(ld(px, k) - m) * inv);
}

// 2-byte types, cx, cy and off multiples of 8: 8 channels (16 bytes) a thread.
template <typename T>
__global__ void concat_nhwc8_kernel(const T* x, int cx, T* y, int cy, int off, size_t groups) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;  // one 8-channel group of x
  if (i >= groups) return;
  const int gx = cx / 8;
  const size_t p = i / gx;
  const int g = int(i % gx);
  *reinterpret_cast<uint4*>(y + p * cy + off + 8 * g) = *reinterpret_cast<const uint4*>(x + 8 * i);
}

// Input channels [0, cx) of every pixel into channels [off, off + cx) of y (cy channels).
template <typename T>
__global__ void concat_nhwc_kernel(const T* x, int cx, T* y, int cy, int off, size_t total) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const size_t p = i / cx;
  y[p * cy + off + (i % cx)] = x[i];
}

// 2-byte types, c a multiple of 8: 8 channels (16 bytes) a thread, in place. Idx: 32-bit where
// the group count fits (no 64-bit division for the channel group).
template <typename T, typename Idx>
__global__ void bias_act_nhwc8_kernel(T* y, const float* b, Idx groups_per_pixel, Idx groups, bool relu) {
  const Idx i = Idx(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= groups) return;
  uint4 v = reinterpret_cast<uint4*>(y)[i];
  T* e = reinterpret_cast<T*>(&v);
  const float* bg = b ? b + 8 * (i % groups_per_pixel) : nullptr;
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    const float r = ld(e, q) + (bg ? bg[q] : 0.f);
    st(e, q, relu ? fmaxf(r, 0.f) : r);
  }
  reinterpret_cast<uint4*>(y)[i] = v;
}

template <typename T>
__global__ void bias_act_nhwc_kernel(T* y, const float* b, int c, size_t total, bool relu) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  float v = ld(y, i) + (b ? b[i % c] : 0.f);
  st(y, i, relu ? fmaxf(v, 0.f) : v);
}

// From f32 NCHW into NHWC of any type (one thread an output element: writes coalesced).
template <typename T>
__global__ void standardize_nhwc_kernel(const float* x, T* y, const float* mean, const float* sd,
                                        int c, size_t plane, size_t total) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int ch = int(i % c);
  const size_t p = (i / c) % plane, b = i / (size_t(c) * plane);
  st(y, i, (x[(b * c + ch) * plane + p] - mean[ch]) * (1.f / sd[ch]));
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

// The 8-channel NHWC max-pool (maxpool_nhwc8_kernel), with an optional bias and ReLU after the max.
template <typename T>
void maxpool8(const T* x, T* y, const Shape& a, const Shape& o, int k, int stride, const float* bias, bool relu,
              cudaStream_t s) {
  with_index(o.numel() / 8, [&](auto groups) {
    maxpool_nhwc8_kernel<<<blocks_for(groups), kThreads, 0, s>>>(x, y, a.c, a.h, a.w, o.h, o.w, k, stride, groups,
                                                                 bias, relu);
  });
}

// Mirror of each plane: rows reversed (rows) or each row reversed.
__global__ void flip_kernel(const float* x, float* y, size_t planes, int h, int w, bool rows) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= planes * h * w) return;
  const auto [p, oy, ox] = plane_pixel(i, h, w);
  y[i] = x[p * h * w + size_t(rows ? h - 1 - oy : oy) * w + (rows ? ox : w - 1 - ox)];
}

// refine (layers/refine.cpp), a thread a pixel: the first iteration's weights with the pixel to
// the left (vx) and above (vy), 0 on the first column and row, and the softmax of x into y.
__global__ void refine_prepare_kernel(const float* x, const float* g, float* y, float* vx, float* vy, int n, int c,
                                      int gc, int h, int w, RefineCoefficients k) {
  const size_t plane = size_t(h) * w;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * plane) return;
  const size_t f = i / plane, p = i % plane;
  const int row = int(p / w), col = int(p % w);
  const float* gf = g + f * gc * plane;
  vx[i] = col ? refine_weight(refine_distance(gf, gc, plane, p, p - 1), k) : 0.f;
  vy[i] = row ? refine_weight(refine_distance(gf, gc, plane, p, p - w), k) : 0.f;
  const float* px = x + f * c * plane + p;
  float* py = y + f * c * plane + p;
  float m = px[0];
  for (int ch = 1; ch < c; ++ch) m = fmaxf(m, px[size_t(ch) * plane]);
  float s = 0;
  for (int ch = 0; ch < c; ++ch) s += (py[size_t(ch) * plane] = expf(px[size_t(ch) * plane] - m));
  const float inv = 1.f / s;
  for (int ch = 0; ch < c; ++ch) py[size_t(ch) * plane] *= inv;
}

// A weight of iteration `it`: the first's squared `it` times, as the CPU path squares its maps.
__device__ __forceinline__ float refine_power(float v, int it) {
  for (int k = 0; k < it; ++k) v *= v;
  return v;
}

// One step of the recursive filter, y = (1 - a) x + a y_prev, is the affine map y_prev -> a y_prev + b
// with b = (1 - a) x; a row's steps compose, so a warp runs 32 of them at once as an inclusive
// scan of their maps (lane k's map then takes the value before the 32 to its value), 32 columns
// at a time, coalesced, carrying the last value to the next 32.
__device__ __forceinline__ float refine_scan(float a, float b, float carry, int lane) {
  for (int d = 1; d < 32; d <<= 1) {
    const float a_up = __shfl_up_sync(0xffffffffu, a, d), b_up = __shfl_up_sync(0xffffffffu, b, d);
    if (lane >= d) {
      b = fmaf(a, b_up, b);
      a *= a_up;
    }
  }
  return fmaf(a, carry, b);
}

// A warp a row of a plane: the recursive filter left to right, then right to left. vx[i] couples
// pixel i with its left neighbour (0 on the first column).
__global__ void refine_rows_kernel(float* __restrict__ y, const float* __restrict__ vx, int n, int c, int h, int w,
                                   int it) {
  const size_t r = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = int(threadIdx.x & 31);
  if (r >= size_t(n) * c * h) return;  // a whole warp at once
  const size_t f = r / (size_t(c) * h), row = r % h;
  float* p = y + r * w;
  const float* v = vx + (f * h + row) * w;
  float carry = 0;
  for (int x0 = 0; x0 < w; x0 += 32) {
    const int x = x0 + lane;
    float a = 1, b = 0;  // lanes past the row: the identity
    if (x < w) {
      a = refine_power(v[x], it);
      b = (1 - a) * p[x];
    }
    const float out = refine_scan(a, b, carry, lane);
    if (x < w) p[x] = out;
    carry = __shfl_sync(0xffffffffu, out, 31);
  }
  carry = 0;
  for (int x0 = w - 1; x0 >= 0; x0 -= 32) {  // lane k at column x0 - k
    const int x = x0 - lane;
    float a = 1, b = 0;
    if (x >= 0) {
      a = x + 1 < w ? refine_power(v[x + 1], it) : 0.f;
      b = (1 - a) * p[x];
    }
    const float out = refine_scan(a, b, carry, lane);
    if (x >= 0) p[x] = out;
    carry = __shfl_sync(0xffffffffu, out, 31);
  }
}

// A thread a column of a plane: top to bottom, then bottom to top (the threads of a warp on
// neighbouring columns: coalesced), eight rows' loads issued at once. vy[i] couples pixel i with
// the one above (0 on the first row). `last`: the log of the result is written, at least
// log(FLT_MIN).
__global__ void refine_cols_kernel(float* __restrict__ y, const float* __restrict__ vy, int n, int c, int h, int w,
                                   int it, bool last) {
  constexpr int kRows = 8;
  size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= size_t(n) * c * w) return;
  const size_t pl = t / w, col = t % w, plane = size_t(h) * w;
  float* p = y + pl * plane + col;
  const float* v = vy + (pl / c) * plane + col;
  float prev = p[0];
  for (int r0 = 1; r0 < h; r0 += kRows) {
    float cur[kRows], a[kRows];
    const int m = min(kRows, h - r0);
#pragma unroll
    for (int k = 0; k < kRows; ++k)
      if (k < m) cur[k] = p[size_t(r0 + k) * w], a[k] = v[size_t(r0 + k) * w];
#pragma unroll
    for (int k = 0; k < kRows; ++k)
      if (k < m) {
        prev = cur[k] + refine_power(a[k], it) * (prev - cur[k]);
        p[size_t(r0 + k) * w] = prev;
      }
  }
  // bottom to top: row h - 1 keeps its value; rows r1, r1 - 1, ... take the one below
  if (last) p[size_t(h - 1) * w] = logf(fmaxf(prev, FLT_MIN));
  for (int r1 = h - 2; r1 >= 0; r1 -= kRows) {
    float cur[kRows], a[kRows];
    const int m = min(kRows, r1 + 1);
#pragma unroll
    for (int k = 0; k < kRows; ++k)
      if (k < m) cur[k] = p[size_t(r1 - k) * w], a[k] = v[size_t(r1 - k + 1) * w];
#pragma unroll
    for (int k = 0; k < kRows; ++k)
      if (k < m) {
        prev = cur[k] + refine_power(a[k], it) * (prev - cur[k]);
        p[size_t(r1 - k) * w] = last ? logf(fmaxf(prev, FLT_MIN)) : prev;
      }
  }
}

struct SoftmaxMeanInputs {
  const float* x[kSoftmaxMeanMaxInputs];
};

// log(mean_k softmax(x_k)) over channels, a thread a pixel, as layers/softmax_mean.cpp computes
// it (log softmax of each input, then a log-sum-exp over the inputs).
__global__ void softmax_mean_kernel(SoftmaxMeanInputs in, int K, float* y, int n, int c, size_t plane) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * plane) return;
  const size_t at = (i / plane) * size_t(c) * plane + i % plane;
  float lse[kSoftmaxMeanMaxInputs];
  for (int k = 0; k < K; ++k) {
    const float* px = in.x[k] + at;
    float m = px[0];
    for (int ch = 1; ch < c; ++ch) m = fmaxf(m, px[size_t(ch) * plane]);
    float s = 0;
    for (int ch = 0; ch < c; ++ch) s += expf(px[size_t(ch) * plane] - m);
    lse[k] = m + logf(s);
  }
  const float log_k = logf(float(K));
  for (int ch = 0; ch < c; ++ch) {
    const size_t o = at + size_t(ch) * plane;
    float m = -INFINITY;
    for (int k = 0; k < K; ++k) m = fmaxf(m, in.x[k][o] - lse[k]);
    float s = 0;
    for (int k = 0; k < K; ++k) s += expf(in.x[k][o] - lse[k] - m);
    y[o] = m + logf(s) - log_k;
  }
}

bool is_nchw_f32(const TensorView& v) { return v.format == Format{}; }

// NHWC tensors of a 2-byte type whose channel count (c) is a multiple of 8, both 16-byte
// aligned: the kernels moving 8 channels (16 bytes) a thread apply.
bool vector8(const TensorView& x, const TensorView& y, int c) {
  return x.format.layout == Layout::NHWC && dtype_bytes(y.format.dtype) == 2 && c % 8 == 0 &&
         reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && reinterpret_cast<uintptr_t>(y.data) % 16 == 0;
}

void require_same_format(const TensorView& x, const TensorView& y, const char* what) {
  SL_REQUIRE(x.format == y.format && supports(x.format), what, ": input ", x.format.str(),
             ", output ", y.format.str());
}

}  // namespace

#define SL_LAUNCH_CHECK(what) SL_CUDA_CHECK(cudaGetLastError(), what)

bool supports(Format f) {
  return f == Format{} || (f.layout == Layout::NHWC && f.dtype != DType::U8);
}

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

void maxpool2d(const TensorView& x, const TensorView& y, int k, int stride, cudaStream_t s) {
  require_same_format(x, y, "maxpool2d");
  const Shape &a = x.shape, &b = y.shape;
  const size_t n = b.numel();
  if (is_nchw_f32(x)) {
    maxpool_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), a.n * a.c, a.h, a.w, b.h, b.w, k, stride);
  } else if (vector8(x, y, a.c)) {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      maxpool8(x.as<const T>(), y.as<T>(), a, b, k, stride, nullptr, false, s);
    });
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      maxpool_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), a.c, a.h, a.w,
                                                             b.h, b.w, k, stride, n);
    });
  }
  SL_LAUNCH_CHECK("maxpool2d kernel");
}

void bias_relu_maxpool(const TensorView& x, const float* b, bool relu, const TensorView& y, int k, int stride,
                       cudaStream_t s) {
  SL_REQUIRE(vector8(x, y, x.shape.c) && x.format == y.format, "bias + ReLU + max-pool: no kernel for ",
             x.format.str(), " ", x.shape.str());
  if (!y.shape.numel()) return;
  with_type(y, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    maxpool8(x.as<const T>(), y.as<T>(), x.shape, y.shape, k, stride, b, relu, s);
  });
  SL_LAUNCH_CHECK("bias + ReLU + max-pool kernel");
}

void downscale(const TensorView& x, const TensorView& y, int f, cudaStream_t s) {
  require_same_format(x, y, "downscale");
  const Shape &a = x.shape, &b = y.shape;
  const size_t n = b.numel();
  if (is_nchw_f32(x)) {
    downscale_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), a.n * a.c, a.h, a.w, b.h, b.w, f);
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      downscale_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), a.c, a.h,
                                                               a.w, b.h, b.w, f, n);
    });
  }
  SL_LAUNCH_CHECK("downscale kernel");
}

void upsample(const TensorView& x, const TensorView& y, bool geometry, bool bilinear,
              const Geometry& gin, const Geometry& gout, cudaStream_t s) {
  require_same_format(x, y, "upsample");
  const Shape &a = x.shape, &b = y.shape;
  const size_t n = b.numel();
  if (is_nchw_f32(x)) {
    upsample_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), a.n * a.c, a.h, a.w, b.h,
                                                       b.w, geometry, bilinear, gin, gout);
  } else if (vector8(x, y, a.c)) {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      upsample_nhwc8_kernel<<<blocks_for(n / 8), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), a.c, a.h, a.w,
                                                                   b.h, b.w, geometry, bilinear, gin, gout,
                                                                   n / 8);
    });
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      upsample_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), a.c, a.h,
                                                              a.w, b.h, b.w, geometry, bilinear,
                                                              gin, gout, n);
    });
  }
  SL_LAUNCH_CHECK("upsample kernel");
}

void upsample_argmax(const TensorView& x, const TensorView& y, bool geometry, bool bilinear,
                     const Geometry& gin, const Geometry& gout, cudaStream_t s) {
  require_same_format(x, y, "upsample + argmax");
  const Shape &a = x.shape, &b = y.shape;
  SL_REQUIRE(b.c == 1 && b.n == a.n, "upsample + argmax: output ", b.str(), " for input ", a.str());
  const size_t n = b.numel();
  if (!n) return;
  SL_REQUIRE(b.n <= 65535, "upsample + argmax: output ", b.str(), " is too large");
  with_type(y, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    launch_pdl(&upsample_argmax_kernel<T>,
               dim3(unsigned((b.w + kUaW - 1) / kUaW), unsigned((b.h + kUaH - 1) / kUaH), unsigned(b.n)),
               dim3(kUaW, kUaH), 0, s, "upsample + argmax kernel", x.as<const T>(), y.as<T>(), a.c, a.h, a.w, b.h,
               b.w, x.format.layout == Layout::NHWC, geometry, bilinear, gin, gout);
  });
  SL_LAUNCH_CHECK("upsample + argmax kernel");
}

void argmax(const TensorView& x, const TensorView& y, cudaStream_t s) {
  require_same_format(x, y, "argmax");
  const Shape& a = x.shape;
  const size_t pixels = size_t(a.n) * a.plane();
  if (is_nchw_f32(x)) {
    argmax_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(x.f32(), y.f32(), a.n, a.c, a.plane());
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      argmax_nhwc_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), a.c, pixels);
    });
  }
  SL_LAUNCH_CHECK("argmax kernel");
}

void class_probability(const TensorView& x, int frame, int cls, float* out, cudaStream_t s) {
  const Shape& a = x.shape;
  SL_REQUIRE(frame >= 0 && frame < a.n && cls >= 0 && cls < a.c && supports(x.format), "class probability: frame ",
             frame, ", class ", cls, " of ", a.str(), " ", x.format.str());
  const size_t plane = a.plane();
  if (!plane) return;
  with_type(x, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    class_probability_kernel<<<blocks_for(plane), kThreads, 0, s>>>(
        x.as<const T>(), x.format.layout == Layout::NHWC, a.c, plane, frame, cls, out);
  });
  SL_LAUNCH_CHECK("class probability kernel");
}

void softmax(const TensorView& x, const TensorView& y, cudaStream_t s) {
  require_same_format(x, y, "softmax");
  const Shape& a = x.shape;
  const size_t pixels = size_t(a.n) * a.plane();
  if (is_nchw_f32(x)) {
    softmax_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(x.f32(), y.f32(), a.n, a.c, a.plane());
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      softmax_nhwc_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), a.c, pixels);
    });
  }
  SL_LAUNCH_CHECK("softmax kernel");
}

void concat(const std::vector<TensorView>& xs, const TensorView& y, cudaStream_t s) {
  const Shape& b = y.shape;
  if (is_nchw_f32(y)) {  // whole channel blocks per image
    char* dst = static_cast<char*>(y.data);
    for (int n = 0; n < b.n; ++n)
      for (const auto& x : xs) {
        require_same_format(x, y, "concat");
        const size_t bytes = size_t(x.shape.c) * x.shape.plane() * sizeof(float);
        SL_CUDA_CHECK(cudaMemcpyAsync(dst, x.channel(n, 0), bytes, cudaMemcpyDeviceToDevice, s), "concat");
        dst += bytes;
      }
    return;
  }
  int off = 0;
  for (const auto& x : xs) {
    require_same_format(x, y, "concat");
    const size_t n = x.shape.numel();
    const bool v8 = vector8(x, y, x.shape.c) && b.c % 8 == 0 && off % 8 == 0;
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      if (v8)
        concat_nhwc8_kernel<<<blocks_for(n / 8), kThreads, 0, s>>>(x.as<const T>(), x.shape.c, y.as<T>(), b.c,
                                                                   off, n / 8);
      else
        concat_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), x.shape.c, y.as<T>(), b.c, off, n);
    });
    off += x.shape.c;
  }
  SL_LAUNCH_CHECK("concat kernel");
}

void bias_act_nhwc(const TensorView& y, const float* b, bool relu, cudaStream_t s) {
  SL_REQUIRE(y.format.layout == Layout::NHWC, "bias_act_nhwc on ", y.format.str());
  const size_t n = y.shape.numel();
  if (!n || (!b && !relu)) return;
  const int c = y.shape.c;
  if (dtype_bytes(y.format.dtype) == 2 && c % 8 == 0 && reinterpret_cast<uintptr_t>(y.data) % 16 == 0) {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      with_index(n / 8, [&](auto groups) {
        using Idx = decltype(groups);
        bias_act_nhwc8_kernel<T, Idx><<<blocks_for(groups), kThreads, 0, s>>>(y.as<T>(), b, Idx(c / 8), groups, relu);
      });
    });
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      bias_act_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(y.as<T>(), b, c, n, relu);
    });
  }
  SL_LAUNCH_CHECK("NHWC bias/ReLU epilogue");
}

void rgb_to_yuv(const float* x, float* y, int n, size_t plane, cudaStream_t s) {
  rgb_to_yuv_kernel<<<blocks_for(size_t(n) * plane), kThreads, 0, s>>>(x, y, n, plane);
  SL_LAUNCH_CHECK("rgb_to_yuv kernel");
}

void standardize(const float* x, const TensorView& y, const float* mean, const float* sd,
                 cudaStream_t s) {
  const Shape& a = y.shape;
  const size_t total = a.numel();
  if (is_nchw_f32(y)) {
    standardize_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, y.f32(), mean, sd, a.c, a.plane(), total);
  } else {
    SL_REQUIRE(supports(y.format), "standardize: no kernel writes ", y.format.str());
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      standardize_nhwc_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, y.as<T>(), mean, sd, a.c,
                                                                     a.plane(), total);
    });
  }
  SL_LAUNCH_CHECK("standardize kernel");
}

void contrast_norm(const float* x, float* y, int planes, int h, int w, const float* kernel,
                   int size, float eps, float* ws, cudaStream_t s) {
  SL_REQUIRE(size <= 63, "contrast_norm on the GPU supports windows up to 63, got ", size);
  Taps t{};
  for (int k = 0; k < size; ++k) t.k[k] = kernel[k];
  const size_t plane = size_t(h) * w, n = plane * planes;
  float *tmp = ws, *cen = ws + n, *sq = ws + 2 * n;
  // Per-plane sums of sd in double, 8-byte aligned after the three planes, and the blocks'
  // partial sums after them.
  double* sums = reinterpret_cast<double*>(ws + ((3 * n + 1) & ~size_t(1)));
  double* partial = sums + planes;
  blur_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, tmp, planes, h, w, t, size, 0);
  blur_kernel<<<blocks_for(n), kThreads, 0, s>>>(tmp, y, planes, h, w, t, size, 1);  // y = mean
  center_square_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, cen, sq, n);
  blur_kernel<<<blocks_for(n), kThreads, 0, s>>>(sq, tmp, planes, h, w, t, size, 0);
  blur_kernel<<<blocks_for(n), kThreads, 0, s>>>(tmp, sq, planes, h, w, t, size, 1);  // var
  const unsigned per_plane = unsigned(std::min<size_t>(256, (plane + kThreads - 1) / kThreads));
  sd_sum_kernel<<<dim3(per_plane, unsigned(planes)), kThreads, 0, s>>>(sq, plane, partial);
  sum_partials_kernel<<<blocks_for(size_t(planes)), kThreads, 0, s>>>(partial, int(per_plane),
                                                                      planes, sums);
  divide_kernel<<<blocks_for(n), kThreads, 0, s>>>(cen, sq, sums, eps, y, plane, n);
  SL_LAUNCH_CHECK("contrast_norm kernels");
}

bool contrast_norm_fused_supported(int size, int channels) { return size == 13 && channels >= 1 && channels <= 4; }

size_t contrast_norm_fused_workspace_floats(int n, int c, int h, int w) {
  // the small tiles' block count (the larger)
  const size_t blocks = size_t((w + LcnSmall::W - 1) / LcnSmall::W) * ((h + LcnSmall::H - 1) / LcnSmall::H);
  // doubles (partials, then the sums), then the centred values and the deviations
  return 2 * (size_t(n) * c * (blocks + 1)) + 2 * size_t(n) * c * size_t(h) * w;
}

// Pass 1 with tile shape Tl: the centred values and deviations, each block's sums of sd; a
// block a channel with the small tiles.
template <typename Tl>
size_t lcn_pass1(const float* x, const Shape& a, const Taps& t, float* cen, float* sd_plane, double* partial,
                 bool yuv, cudaStream_t s) {
  constexpr int R = 6;
  constexpr bool per_channel = std::is_same_v<Tl, LcnSmall>;
  const dim3 grid(unsigned((a.w + Tl::W - 1) / Tl::W), unsigned((a.h + Tl::H - 1) / Tl::H),
                  unsigned(per_channel ? a.n * a.c : a.n));
  const size_t smem = sizeof(LcnSmem<R, Tl>);  // over 48 KB for the big tiles: the limit raised once
  allow_dynamic_smem(reinterpret_cast<const void*>(&lcn_sd_sum_kernel<R, Tl>), smem, "contrast_norm pass 1");
  launch_pdl(&lcn_sd_sum_kernel<R, Tl>, grid, dim3(kLcnThreads), smem, s, "contrast_norm pass 1", x, a.c, a.h,
             a.w, t, cen, sd_plane, partial, yuv, per_channel);
  SL_LAUNCH_CHECK("contrast_norm pass 1");
  return size_t(grid.x) * grid.y;
}

void contrast_norm_fused(const float* x, const TensorView& y, const float* kernel, int size, float eps,
                         const float* mean, const float* sd, float* ws, cudaStream_t s, bool rgb_to_yuv) {
  const Shape& a = y.shape;
  SL_REQUIRE(!rgb_to_yuv || a.c == 3, "contrast_norm_fused: YUV from ", a.c, " channels");
  SL_REQUIRE(contrast_norm_fused_supported(size, a.c), "contrast_norm_fused: window ", size, ", ", a.c,
             " channels");
  SL_REQUIRE(is_nchw_f32(y) || (y.format.layout == Layout::NHWC && supports(y.format)),
             "contrast_norm_fused: no kernel writes ", y.format.str());
  SL_REQUIRE(a.plane() < (size_t(1) << 31) && size_t(a.n) * a.c <= 65535, "contrast_norm_fused: ", a.str(),
             " is too large");
  Taps t{};
  for (int k = 0; k < size; ++k) t.k[k] = kernel[k];
  const size_t planes = size_t(a.n) * a.c;
  const size_t small_blocks = size_t((a.w + LcnSmall::W - 1) / LcnSmall::W) * ((a.h + LcnSmall::H - 1) / LcnSmall::H);
  // The partials of the small tiles fit either (contrast_norm_fused_workspace_floats).
  double* partial = reinterpret_cast<double*>(ws);
  double* sums = partial + planes * small_blocks;
  float* cen = reinterpret_cast<float*>(sums + planes);
  float* sd_plane = cen + planes * a.plane();
  const size_t big_blocks = size_t((a.w + LcnBig::W - 1) / LcnBig::W) * ((a.h + LcnBig::H - 1) / LcnBig::H);
  const size_t nblk = big_blocks * a.n >= 512 ? lcn_pass1<LcnBig>(x, a, t, cen, sd_plane, partial, rgb_to_yuv, s)
                                              : lcn_pass1<LcnSmall>(x, a, t, cen, sd_plane, partial, rgb_to_yuv, s);
  // Few partials (small images): pass 2 adds them itself.
  const bool fold = nblk <= size_t(kThreads);
  if (!fold) {
    sum_partials_block_kernel<<<unsigned(planes), 256, 0, s>>>(partial, int(nblk), sums);
    SL_LAUNCH_CHECK("contrast_norm sums");
  }
  const bool nhwc = y.format.layout == Layout::NHWC;
  const dim3 grid2(blocks_for(a.plane()), unsigned(a.n));
  with_type(y, [&](auto* tp) {
    using T = std::remove_pointer_t<decltype(tp)>;
    launch_pdl(&lcn_apply_kernel<T>, grid2, dim3(kThreads), 0, s, "contrast_norm pass 2", cen,
               static_cast<const float*>(sd_plane), y.as<T>(), nhwc, a.c, unsigned(a.plane()),
               static_cast<const double*>(sums), static_cast<const double*>(fold ? partial : nullptr), int(nblk), eps,
               mean, sd);
  });
  SL_LAUNCH_CHECK("contrast_norm pass 2");
}

void bias_act(const float* src, size_t ld_src, float* dst, size_t ld_dst, const float* b,
              int channels, size_t cols, bool relu, cudaStream_t s) {
  if (src == dst && !b && !relu) return;
  if (!channels || !cols) return;
  bias_act_kernel<<<dim3(blocks_for(cols), unsigned(channels)), kThreads, 0, s>>>(
      src, ld_src, dst, ld_dst, b, cols, relu);
  SL_LAUNCH_CHECK("bias/ReLU epilogue");
}

void flip(const TensorView& x, const TensorView& y, bool rows, cudaStream_t s) {
  SL_REQUIRE(is_nchw_f32(x) && is_nchw_f32(y), "flip: f32 NCHW expected, got ", x.format.str(), " -> ",
             y.format.str());
  const size_t n = x.shape.numel();
  if (!n) return;
  flip_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), size_t(x.shape.n) * x.shape.c, x.shape.h,
                                                 x.shape.w, rows);
  SL_LAUNCH_CHECK("flip kernel");
}

void softmax_mean(const std::vector<TensorView>& xs, const TensorView& y, cudaStream_t s) {
  SL_REQUIRE(!xs.empty() && xs.size() <= size_t(kSoftmaxMeanMaxInputs), "softmax_mean: 1-",
             kSoftmaxMeanMaxInputs, " inputs, got ", xs.size());
  SoftmaxMeanInputs in{};
  for (size_t k = 0; k < xs.size(); ++k) {
    SL_REQUIRE(is_nchw_f32(xs[k]) && xs[k].shape == y.shape, "softmax_mean: input ", k + 1, " is ",
               xs[k].format.str(), " ", xs[k].shape.str(), ", expected f32 NCHW ", y.shape.str());
    in.x[k] = xs[k].f32();
  }
  SL_REQUIRE(is_nchw_f32(y), "softmax_mean: f32 NCHW output expected, got ", y.format.str());
  const size_t pixels = size_t(y.shape.n) * y.shape.plane();
  if (!pixels) return;
  softmax_mean_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(in, int(xs.size()), y.f32(), y.shape.n,
                                                              y.shape.c, y.shape.plane());
  SL_LAUNCH_CHECK("softmax_mean kernel");
}

void refine(const TensorView& x, const TensorView& g, const TensorView& y, float* workspace, RefineCoefficients k,
            int iterations, cudaStream_t s) {
  SL_REQUIRE(is_nchw_f32(x) && is_nchw_f32(g) && is_nchw_f32(y), "refine: f32 NCHW expected, got ", x.format.str(),
             ", ", g.format.str(), " -> ", y.format.str());
  SL_REQUIRE(x.shape == y.shape && g.shape.n == x.shape.n && g.shape.h == x.shape.h && g.shape.w == x.shape.w,
             "refine: scores ", x.shape.str(), ", image ", g.shape.str(), " -> ", y.shape.str());
  const int n = x.shape.n, c = x.shape.c, h = x.shape.h, w = x.shape.w;
  const size_t pixels = size_t(n) * x.shape.plane();
  if (!pixels || !c) return;
  float *vx = workspace, *vy = workspace + pixels;
  refine_prepare_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(x.f32(), g.f32(), y.f32(), vx, vy, n, c, g.shape.c,
                                                                 h, w, k);
  SL_LAUNCH_CHECK("refine prepare kernel");
  const size_t rows = size_t(n) * c * h, cols = size_t(n) * c * w;
  for (int it = 0; it < iterations; ++it) {
    refine_rows_kernel<<<blocks_for(rows * 32), kThreads, 0, s>>>(y.f32(), vx, n, c, h, w, it);
    SL_LAUNCH_CHECK("refine rows kernel");
    refine_cols_kernel<<<blocks_for(cols), kThreads, 0, s>>>(y.f32(), vy, n, c, h, w, it, it == iterations - 1);
    SL_LAUNCH_CHECK("refine columns kernel");
  }
}

}  // namespace scenelab::cuda
