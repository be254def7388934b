#include <algorithm>

#include "engine/cuda_backend.h"
#include "kernels/conv_cuda.h"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

// X[(ci * k + dy) * k + dx][(yy - y0) * wo + xx] = x[ci][yy + dy - pad][xx + dx - pad] (0 outside)
__global__ void im2col_kernel(const float* x, int cin, int h, int w, int k, int pad, int y0,
                              int rows, int wo, float* X) {
  const size_t cols = size_t(rows) * wo;
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(cin) * k * k * cols) return;
  const size_t col = i % cols, row = i / cols;
  const int dx = int(row % k), dy = int((row / k) % k), ci = int(row / (size_t(k) * k));
  const int yy = y0 + int(col / wo) + dy - pad, xx = int(col % wo) + dx - pad;
  X[i] = (yy >= 0 && yy < h && xx >= 0 && xx < w) ? x[(size_t(ci) * h + yy) * w + xx] : 0.f;
}

// Direct convolution: a CTA computes a tile of kTileW x (kTileH * kRows) output pixels for kOC
// output channels; 16 x 16 threads, each kRows pixels (a column) x kOC channels in registers.
constexpr int kTileW = 16, kTileH = 16, kRows = 4, kOC = 4, kMaxK = 7;

__global__ void __launch_bounds__(kTileW * kTileH)
direct_kernel(ConvShape c, const float* x, const float* w, const float* b, float* y, bool relu) {
  constexpr int kInH = kTileH * kRows + kMaxK - 1, kInW = kTileW + kMaxK - 1;
  __shared__ float tile[kInH][kInW];
  __shared__ float filt[kOC][kMaxK * kMaxK];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int ox0 = blockIdx.x * kTileW, oy0 = blockIdx.y * kTileH * kRows;
  const int groups = (c.cout + kOC - 1) / kOC;
  const int n = blockIdx.z / groups, oc0 = (blockIdx.z % groups) * kOC;
  const int k = c.k, in_h = kTileH * kRows + k - 1, in_w = kTileW + k - 1;
  float acc[kOC][kRows] = {};
  for (int ci = 0; ci < c.cin; ++ci) {
    const float* src = x + (size_t(n) * c.cin + ci) * c.h * c.w;
    for (int t = ty * kTileW + tx; t < in_h * in_w; t += kTileW * kTileH) {
      const int r = t / in_w, q = t % in_w;
      const int yy = oy0 + r - c.pad, xx = ox0 + q - c.pad;
      tile[r][q] = (yy >= 0 && yy < c.h && xx >= 0 && xx < c.w) ? src[size_t(yy) * c.w + xx] : 0.f;
    }
    for (int t = ty * kTileW + tx; t < kOC * k * k; t += kTileW * kTileH) {
      const int o = t / (k * k), q = t % (k * k);
      filt[o][q] = oc0 + o < c.cout ? w[((size_t(oc0 + o) * c.cin + ci) * k * k) + q] : 0.f;
    }
    __syncthreads();
    for (int dy = 0; dy < k; ++dy)
      for (int dx = 0; dx < k; ++dx) {
        float in[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) in[r] = tile[ty * kRows + r + dy][tx + dx];
#pragma unroll
        for (int o = 0; o < kOC; ++o) {
          const float f = filt[o][dy * k + dx];  // one coefficient, kRows multiply-adds
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[o][r] += f * in[r];
        }
      }
    __syncthreads();
  }
  const int ox = ox0 + tx;
  if (ox >= c.wo) return;
#pragma unroll
  for (int o = 0; o < kOC; ++o) {
    if (oc0 + o >= c.cout) break;
    const float bo = b ? b[oc0 + o] : 0.f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int oy = oy0 + ty * kRows + r;
      if (oy >= c.ho) continue;
      const float v = acc[o][r] + bo;
      y[((size_t(n) * c.cout + oc0 + o) * c.ho + oy) * c.wo + ox] = relu ? fmaxf(v, 0.f) : v;
    }
  }
}

}  // namespace

int conv_band_rows(const ConvShape& c, size_t ws_floats) {
  const size_t per_row = size_t(c.cin) * c.k * c.k * c.wo;
  return int(std::max<size_t>(1, std::min<size_t>(size_t(c.ho), ws_floats / per_row)));
}

void conv2d_gemm(const ConvShape& c, const float* x, const float* w, const float* b, float* y,
                 bool relu, float* ws, size_t ws_floats, cublasHandle_t h, cudaStream_t s) {
  const float one = 1.f, zero = 0.f;
  const size_t plane_in = size_t(c.h) * c.w, plane = size_t(c.ho) * c.wo;
  const int K = c.cin * c.k * c.k;
  for (int n = 0; n < c.n; ++n) {
    const float* xn = x + size_t(n) * c.cin * plane_in;
    float* yn = y + size_t(n) * c.cout * plane;
    if (c.k == 1 && c.pad == 0) {  // pixel-wise fully connected: X is the input
      SL_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, int(plane), c.cout, K, &one, xn,
                                  int(plane_in), w, K, &zero, yn, int(plane)),
                      "conv2d 1x1 GEMM");
      bias_act(yn, b, c.cout, plane, plane, relu, s);
      continue;
    }
    const int rows = conv_band_rows(c, ws_floats);
    for (int y0 = 0; y0 < c.ho; y0 += rows) {
      const int r = std::min(rows, c.ho - y0);
      const size_t cols = size_t(r) * c.wo;
      const size_t total = size_t(K) * cols;
      im2col_kernel<<<unsigned((total + 255) / 256), 256, 0, s>>>(xn, c.cin, c.h, c.w, c.k, c.pad,
                                                                 y0, r, c.wo, ws);
      SL_CUDA_CHECK(cudaGetLastError(), "conv2d im2col kernel");
      // Row-major Y (cout x cols, ld plane) = W (cout x K) X (K x cols), as column-major
      // Y^T = X^T W^T.
      SL_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, int(cols), c.cout, K, &one, ws,
                                  int(cols), w, K, &zero, yn + size_t(y0) * c.wo, int(plane)),
                      "conv2d GEMM");
      bias_act(yn + size_t(y0) * c.wo, b, c.cout, cols, plane, relu, s);
    }
  }
}

void conv2d_gemm2s(const ConvShape& c, const float* x, const float* w, const float* b, float* y,
                   bool relu, float* ws, size_t ws_floats, cublasHandle_t h, cudaStream_t main,
                   cudaStream_t side, const cudaEvent_t* ev) {
  if (c.k == 1 && c.pad == 0) {  // no im2col to hide
    conv2d_gemm(c, x, w, b, y, relu, ws, ws_floats, h, main);
    return;
  }
  const float one = 1.f, zero = 0.f;
  const size_t plane_in = size_t(c.h) * c.w, plane = size_t(c.ho) * c.wo;
  const int K = c.cin * c.k * c.k;
  // Two band buffers, each sized for half the workspace bound (at least one output row).
  const int rows = conv_band_rows(c, ws_floats / 2);
  float* buf[2] = {ws, ws + size_t(rows) * c.wo * K};
  // The side stream starts after everything queued on the main stream (the input).
  SL_CUDA_CHECK(cudaEventRecord(ev[0], main), "conv2d gemm2s");
  SL_CUDA_CHECK(cudaStreamWaitEvent(side, ev[0], 0), "conv2d gemm2s");
  int band = 0;
  for (int n = 0; n < c.n; ++n) {
    const float* xn = x + size_t(n) * c.cin * plane_in;
    float* yn = y + size_t(n) * c.cout * plane;
    for (int y0 = 0; y0 < c.ho; y0 += rows, ++band) {
      const int j = band % 2;
      const int r = std::min(rows, c.ho - y0);
      const size_t cols = size_t(r) * c.wo, total = size_t(K) * cols;
      if (band >= 2)  // buffer j is free once the GEMM two bands back has read it
        SL_CUDA_CHECK(cudaStreamWaitEvent(side, ev[3 + j], 0), "conv2d gemm2s");
      im2col_kernel<<<unsigned((total + 255) / 256), 256, 0, side>>>(xn, c.cin, c.h, c.w, c.k,
                                                                    c.pad, y0, r, c.wo, buf[j]);
      SL_CUDA_CHECK(cudaGetLastError(), "conv2d gemm2s im2col kernel");
      SL_CUDA_CHECK(cudaEventRecord(ev[1 + j], side), "conv2d gemm2s");
      SL_CUDA_CHECK(cudaStreamWaitEvent(main, ev[1 + j], 0), "conv2d gemm2s");
      SL_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, int(cols), c.cout, K, &one, buf[j],
                                  int(cols), w, K, &zero, yn + size_t(y0) * c.wo, int(plane)),
                      "conv2d gemm2s GEMM");
      bias_act(yn + size_t(y0) * c.wo, b, c.cout, cols, plane, relu, main);
      SL_CUDA_CHECK(cudaEventRecord(ev[3 + j], main), "conv2d gemm2s");
    }
  }
}

void conv2d_direct(const ConvShape& c, const float* x, const float* w, const float* b, float* y,
                   bool relu, cudaStream_t s) {
  SL_REQUIRE(c.k <= kMaxK, "direct convolution supports kernels up to ", kMaxK, ", got ", c.k);
  const dim3 block(kTileW, kTileH);
  const dim3 grid((c.wo + kTileW - 1) / kTileW, (c.ho + kTileH * kRows - 1) / (kTileH * kRows),
                  c.n * ((c.cout + kOC - 1) / kOC));
  direct_kernel<<<grid, block, 0, s>>>(c, x, w, b, y, relu);
  SL_CUDA_CHECK(cudaGetLastError(), "conv2d direct kernel");
}

}  // namespace scenelab::cuda
