// GPU kernels of the refine layer (layers/refine.cpp; weights in layers/refine_weights.h): edge-aware
// recursive filtering of the class probabilities along rows and columns.
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

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

}  // namespace

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
