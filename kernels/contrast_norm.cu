// GPU kernels of the contrast_norm layer (layers/contrast_norm.cpp): local contrast normalisation by
// Gaussian windows, as separate passes (any window up to 63) and as one fused two-pass form (13-tap
// window) with the YUV conversion and the standardisation folded in.
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"
#include "kernels/yuv.cuh"

namespace scenelab::cuda {
namespace {

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

}  // namespace

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

}  // namespace scenelab::cuda
