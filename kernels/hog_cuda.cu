#include <cstdint>

#include "engine/error.h"
#include "engine/resize_linear.h"
#include "kernels/cuda_check.h"
#include "kernels/hog_cuda.h"
#include "layers/hog_math.h"

namespace scenelab::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBins = 32;

unsigned blocks_for(size_t n, int threads = kThreads) { return unsigned((n + size_t(threads) - 1) / size_t(threads)); }

// One thread a pixel (layers/hog_gradient.cpp).
__global__ void hog_gradient_kernel(const float* __restrict__ x, float* __restrict__ y, int n, int c, int h, int w,
                                    int bins, bool gamma, bool signed_gradient) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t plane = size_t(h) * w;
  if (i >= plane * size_t(n)) return;
  const size_t b = i / plane, p = i % plane;
  const int r = int(p / size_t(w)), col = int(p % size_t(w));
  const int up = hog::reflect101(r - 1, h), down = hog::reflect101(r + 1, h);
  const int left = hog::reflect101(col - 1, w), right = hog::reflect101(col + 1, w);
  float best_dx = 0, best_dy = 0, best = -1;
  for (int k = 0; k < c; ++k) {
    const float* q = x + (b * c + size_t(k)) * plane;
    const float dx = hog::byte_value(q[size_t(r) * w + right], gamma) - hog::byte_value(q[size_t(r) * w + left], gamma);
    const float dy = hog::byte_value(q[size_t(down) * w + col], gamma) - hog::byte_value(q[size_t(up) * w + col], gamma);
    const float m = hog::sq_mag(dx, dy);
    if (m >= best) best = m, best_dx = dx, best_dy = dy;
  }
  const hog::Vote v = hog::vote_of(best_dx, best_dy, bins, signed_gradient);
  float* out = y + b * 3 * plane + p;
  out[0] = v.w0;
  out[plane] = v.w1;
  out[2 * plane] = float(v.bin);
}

// One thread a (block, cell): the cell's histogram over the block's pixels, then L2-Hys over the
// block's cells together (a group of `group` lanes, a power of two >= cells^2, by shuffles).
__global__ void hog_blocks_kernel(const float* __restrict__ x, float* __restrict__ y, int n, int h, int w,
                                  int bh, int bw, int cell, int cells, int stride, int bins, float sigma,
                                  float clip, int group) {
  const size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int lane = int(t % size_t(group));
  const size_t blk = t / size_t(group);
  const int ncell = cells * cells;
  const bool live = blk < size_t(n) * bh * bw && lane < ncell;
  const size_t plane = size_t(h) * w;
  float hist[kMaxBins];
  for (int k = 0; k < kMaxBins; ++k) hist[k] = 0.f;
  size_t b = 0;
  int by = 0, bx = 0;
  if (live) {
    b = blk / (size_t(bh) * bw);
    const size_t rest = blk % (size_t(bh) * bw);
    by = int(rest / size_t(bw)), bx = int(rest % size_t(bw));
    const int cx = lane / cells, cy = lane % cells, B = cell * cells;
    const float* g0 = x + b * 3 * plane;
    const float* g1 = g0 + plane;
    const float* gb = g1 + plane;
    for (int i = 0; i < B; ++i) {
      const float wy = hog::cell_weight(i, cy, cell);
      if (wy == 0.f) continue;
      const size_t o = size_t(by * stride + i) * w + size_t(bx) * stride;
      for (int j = 0; j < B; ++j) {
        const float wx = hog::cell_weight(j, cx, cell);
        if (wx == 0.f) continue;
        const float wgt = hog::block_gauss(i, j, B, B, sigma) * (wx * wy);
        const int h0 = int(gb[o + j]), h1 = h0 + 1 < bins ? h0 + 1 : 0;
        hist[h0] += g0[o + j] * wgt;
        hist[h1] += g1[o + j] * wgt;
      }
    }
  }
  const unsigned mask = 0xffffffffu;
  auto group_sum = [&](float v) {
    for (int d = 1; d < group; d <<= 1) v += __shfl_xor_sync(mask, v, d, group);
    return v;
  };
  float s = 0.f;
  for (int k = 0; k < bins; ++k) s += hist[k] * hist[k];
  s = group_sum(s);
  const float scale = 1.f / (sqrtf(s) + float(ncell * bins) * 0.1f);
  float s2 = 0.f;
  for (int k = 0; k < bins; ++k) {
    const float v = hist[k] * scale;
    hist[k] = v < clip ? v : clip;
    s2 += hist[k] * hist[k];
  }
  s2 = group_sum(s2);
  const float scale2 = 1.f / (sqrtf(s2) + 1e-3f);
  if (!live) return;
  const size_t oplane = size_t(bh) * bw;
  float* out = y + b * size_t(ncell * bins) * oplane + size_t(by) * bw + bx;
  for (int k = 0; k < bins; ++k) out[size_t(lane * bins + k) * oplane] = hist[k] * scale2;
}

// One thread an output (n, o, r, c); the weights of output o in shared memory when they fit.
__global__ void linear_window_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                                     const float* __restrict__ bias, float* __restrict__ y, int n, int out,
                                     int c, int h, int w, int ho, int wo, int kh, int kw, bool shared) {
  extern __shared__ float ws[];
  const int o = blockIdx.z % out, b = blockIdx.z / out;
  const int taps = c * kh * kw;
  const float* wt = weight + size_t(o) * taps;
  if (shared) {
    for (int k = threadIdx.x; k < taps; k += blockDim.x) ws[k] = wt[k];
    __syncthreads();
    wt = ws;
  }
  const int col = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (col >= wo) return;
  const size_t plane = size_t(h) * w;
  const float* xb = x + size_t(b) * c * plane;
  float s = 0.f;
  for (int k = 0; k < c; ++k)
    for (int i = 0; i < kh; ++i) {
      const float* row = xb + size_t(k) * plane + size_t(r + i) * w + col;
      const float* wr = wt + (size_t(k) * kh + i) * kw;
      for (int j = 0; j < kw; ++j) s += row[j] * wr[j];
    }
  y[((size_t(b) * out + o) * ho + r) * wo + col] = s + bias[o];
}

__global__ void resize_u8_kernel(const uint8_t* __restrict__ src, int n, int c, int sh, int sw,
                                 float* __restrict__ dst, int h, int w, float divisor) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t plane = size_t(h) * w;
  if (i >= plane * size_t(n)) return;
  const size_t b = i / plane, p = i % plane;
  const int yy = int(p / size_t(w)), xx = int(p % size_t(w));
  const LinearTap ty = linear_tap(yy, sh, h), tx = linear_tap(xx, sw, w);
  const uint8_t* img = src + b * size_t(sh) * sw * c;
  for (int ch = 0; ch < c; ++ch)
    dst[(b * c + size_t(ch)) * plane + p] = float(linear_sample(img, sw, c, ch, ty, tx)) / divisor;
}

}  // namespace

void hog_gradient(const TensorView& x, const TensorView& y, int bins, bool gamma, bool signed_gradient,
                  cudaStream_t s) {
  const size_t total = size_t(x.shape.n) * x.shape.plane();
  if (!total) return;
  hog_gradient_kernel<<<blocks_for(total), kThreads, 0, s>>>(x.f32(), y.f32(), x.shape.n, x.shape.c, x.shape.h,
                                                             x.shape.w, bins, gamma, signed_gradient);
  SL_CUDA_CHECK(cudaGetLastError(), "hog_gradient kernel");
}

void hog_blocks(const TensorView& x, const TensorView& y, int cell, int cells, int stride, int bins, float sigma,
                float clip, cudaStream_t s) {
  SL_REQUIRE(bins <= kMaxBins, "hog_blocks on the GPU: at most ", kMaxBins, " bins, got ", bins);
  int group = 1;
  while (group < cells * cells) group <<= 1;
  SL_REQUIRE(group <= 32, "hog_blocks on the GPU: at most 32 cells a block");
  const size_t total = size_t(y.shape.n) * y.shape.plane() * size_t(group);
  if (!total) return;
  hog_blocks_kernel<<<blocks_for(total), kThreads, 0, s>>>(x.f32(), y.f32(), x.shape.n, x.shape.h, x.shape.w,
                                                           y.shape.h, y.shape.w, cell, cells, stride, bins,
                                                           sigma, clip, group);
  SL_CUDA_CHECK(cudaGetLastError(), "hog_blocks kernel");
}

void linear_window(const TensorView& x, const float* weight, const float* bias, const TensorView& y, int kh,
                   int kw, cudaStream_t s) {
  const int taps = x.shape.c * kh * kw;
  const bool shared = size_t(taps) * sizeof(float) <= 40 * 1024;
  const int threads = 128;
  SL_REQUIRE(y.shape.h <= 65535 && size_t(y.shape.n) * y.shape.c <= 65535,
             "linear_window on the GPU: output of ", y.shape.str(), " too large for the grid");
  if (!y.shape.numel()) return;
  const dim3 grid(unsigned((y.shape.w + threads - 1) / threads), unsigned(y.shape.h),
                  unsigned(y.shape.n * y.shape.c));
  linear_window_kernel<<<grid, threads, shared ? size_t(taps) * sizeof(float) : 0, s>>>(
      x.f32(), weight, bias, y.f32(), y.shape.n, y.shape.c, x.shape.c, x.shape.h, x.shape.w, y.shape.h,
      y.shape.w, kh, kw, shared);
  SL_CUDA_CHECK(cudaGetLastError(), "linear_window kernel");
}

void resize_u8_to_f32(const uint8_t* src, int n, int c, int sh, int sw, float* dst, int h, int w,
                      float divisor, cudaStream_t s) {
  const size_t total = size_t(n) * h * w;
  if (!total) return;
  resize_u8_kernel<<<blocks_for(total), kThreads, 0, s>>>(src, n, c, sh, sw, dst, h, w, divisor);
  SL_CUDA_CHECK(cudaGetLastError(), "resize kernel");
}

}  // namespace scenelab::cuda
