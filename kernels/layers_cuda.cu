// GPU kernels of the simple layers: each mirrors the CPU loop of its layer file.
#include <algorithm>
#include <cfloat>

#include "kernels/cuda_check.h"
#include "kernels/layers_cuda.h"
#include "layers/upsample_taps.h"

namespace scenelab::cuda {
namespace {

constexpr int kThreads = 256;
inline unsigned blocks_for(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

__global__ void relu_kernel(const float* x, float* y, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}

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

__global__ void rgb_to_yuv_kernel(const float* x, float* y, int n, size_t plane) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * plane) return;
  const size_t b = i / plane, q = i % plane;
  const float r = x[b * 3 * plane + q], g = x[(b * 3 + 1) * plane + q], bl = x[(b * 3 + 2) * plane + q];
  y[b * 3 * plane + q] = 0.299f * r + 0.587f * g + 0.114f * bl;
  y[(b * 3 + 1) * plane + q] = -0.14713f * r - 0.28886f * g + 0.436f * bl;
  y[(b * 3 + 2) * plane + q] = 0.615f * r - 0.51499f * g - 0.10001f * bl;
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

}  // namespace

#define SL_LAUNCH_CHECK(what) SL_CUDA_CHECK(cudaGetLastError(), what)

void relu(const float* x, float* y, size_t n, cudaStream_t s) {
  if (!n) return;
  relu_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  SL_LAUNCH_CHECK("relu kernel");
}

void maxpool2d(const float* x, float* y, int planes, int h, int w, int ho, int wo, int k,
               int stride, cudaStream_t s) {
  const size_t n = size_t(planes) * ho * wo;
  maxpool_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, planes, h, w, ho, wo, k, stride);
  SL_LAUNCH_CHECK("maxpool2d kernel");
}

void downscale(const float* x, float* y, int planes, int h, int w, int ho, int wo, int f,
               cudaStream_t s) {
  const size_t n = size_t(planes) * ho * wo;
  downscale_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, planes, h, w, ho, wo, f);
  SL_LAUNCH_CHECK("downscale kernel");
}

void upsample(const float* x, float* y, int planes, int hi, int wi, int ho, int wo,
              bool geometry, bool bilinear, const Geometry& gin, const Geometry& gout,
              cudaStream_t s) {
  const size_t n = size_t(planes) * ho * wo;
  upsample_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, planes, hi, wi, ho, wo, geometry,
                                                     bilinear, gin, gout);
  SL_LAUNCH_CHECK("upsample kernel");
}

void argmax(const float* x, float* y, int n, int c, size_t plane, cudaStream_t s) {
  argmax_kernel<<<blocks_for(size_t(n) * plane), kThreads, 0, s>>>(x, y, n, c, plane);
  SL_LAUNCH_CHECK("argmax kernel");
}

void softmax(const float* x, float* y, int n, int c, size_t plane, cudaStream_t s) {
  softmax_kernel<<<blocks_for(size_t(n) * plane), kThreads, 0, s>>>(x, y, n, c, plane);
  SL_LAUNCH_CHECK("softmax kernel");
}

void rgb_to_yuv(const float* x, float* y, int n, size_t plane, cudaStream_t s) {
  rgb_to_yuv_kernel<<<blocks_for(size_t(n) * plane), kThreads, 0, s>>>(x, y, n, plane);
  SL_LAUNCH_CHECK("rgb_to_yuv kernel");
}

void standardize(const float* x, float* y, const float* mean, const float* sd, int n, int c,
                 size_t plane, cudaStream_t s) {
  const size_t total = size_t(n) * c * plane;
  standardize_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, y, mean, sd, c, plane, total);
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

void bias_act(const float* src, size_t ld_src, float* dst, size_t ld_dst, const float* b,
              int channels, size_t cols, bool relu, cudaStream_t s) {
  if (src == dst && !b && !relu) return;
  if (!channels || !cols) return;
  bias_act_kernel<<<dim3(blocks_for(cols), unsigned(channels)), kThreads, 0, s>>>(
      src, ld_src, dst, ld_dst, b, cols, relu);
  SL_LAUNCH_CHECK("bias/ReLU epilogue");
}

}  // namespace scenelab::cuda
