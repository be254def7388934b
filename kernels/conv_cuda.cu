#include <cuda_fp16.h>

#include <algorithm>

#include "engine/cuda_backend.h"
#include "kernels/conv_cuda.h"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

// X[(ci * k + dy) * k + dx][(yy - y0) * wo + xx] = x[ci][yy + dy - pad][xx + dx - pad] (0 outside).
// One thread per (ci, output row of the band, output column) writes its k x k entries: the index
// decoding is paid once per k * k elements, and each of the k * k stores is coalesced across the
// warp (consecutive output columns), so the kernel runs at memory speed.
template <typename T>
__global__ void im2col_kernel(const float* __restrict__ x, int cin, int h, int w, int k, int pad,
                              int y0, int rows, int wo, T* __restrict__ X) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= cin * rows * wo) return;
  const int ox = t % wo, q = t / wo, oy = q % rows, ci = q / rows;
  const size_t cols = size_t(rows) * wo;
  T* dst = X + size_t(ci) * k * k * cols + size_t(oy) * wo + ox;
  const float* src = x + size_t(ci) * h * w;
  for (int dy = 0; dy < k; ++dy) {
    const int yy = y0 + oy + dy - pad;
    const bool row_in = yy >= 0 && yy < h;
    for (int dx = 0; dx < k; ++dx) {
      const int xx = ox + dx - pad;
      dst[size_t(dy * k + dx) * cols] =
          T((row_in && xx >= 0 && xx < w) ? __ldg(src + size_t(yy) * w + xx) : 0.f);
    }
  }
}

template <typename T>
void launch_im2col(const float* x, int cin, int h, int w, int k, int pad, int y0, int rows, int wo,
                   T* X, cudaStream_t s) {
  const int threads = cin * rows * wo;
  im2col_kernel<<<unsigned((threads + 255) / 256), 256, 0, s>>>(x, cin, h, w, k, pad, y0, rows, wo, X);
  SL_CUDA_CHECK(cudaGetLastError(), "conv2d im2col kernel");
}

__global__ void to_half_kernel(const float* __restrict__ x, __half* __restrict__ y, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(x[i]);
}

// NCHW float -> NHWC half, per image a (channels x plane) -> (plane x channels) transpose through
// a shared-memory tile (both sides coalesced).
constexpr int kT = 32;
__global__ void nchw_to_nhwc_half_kernel(const float* __restrict__ x, __half* __restrict__ y,
                                         int channels, int plane) {
  __shared__ float tile[kT][kT + 1];
  const size_t img = size_t(blockIdx.z) * channels * plane;
  const int p0 = blockIdx.x * kT, c0 = blockIdx.y * kT;
  for (int r = threadIdx.y; r < kT; r += blockDim.y) {
    const int c = c0 + r, p = p0 + threadIdx.x;
    if (c < channels && p < plane) tile[r][threadIdx.x] = x[img + size_t(c) * plane + p];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kT; r += blockDim.y) {
    const int p = p0 + r, c = c0 + threadIdx.x;
    if (c < channels && p < plane) y[img + size_t(p) * channels + c] = __float2half_rn(tile[threadIdx.x][r]);
  }
}

// NHWC half -> NCHW float with bias and optional ReLU (the transpose back).
__global__ void nhwc_half_to_nchw_kernel(const __half* __restrict__ y16, const float* __restrict__ b,
                                         float* __restrict__ y, int channels, int plane, bool relu) {
  __shared__ float tile[kT][kT + 1];
  const size_t img = size_t(blockIdx.z) * channels * plane;
  const int p0 = blockIdx.x * kT, c0 = blockIdx.y * kT;
  for (int r = threadIdx.y; r < kT; r += blockDim.y) {
    const int p = p0 + r, c = c0 + threadIdx.x;
    if (c < channels && p < plane) tile[r][threadIdx.x] = __half2float(y16[img + size_t(p) * channels + c]);
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kT; r += blockDim.y) {
    const int c = c0 + r, p = p0 + threadIdx.x;
    if (c < channels && p < plane) {
      const float v = tile[threadIdx.x][r] + (b ? b[c] : 0.f);
      y[img + size_t(c) * plane + p] = relu ? fmaxf(v, 0.f) : v;
    }
  }
}

size_t align64(size_t floats) { return (floats + 63) / 64 * 64; }

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

int conv_band_rows(const ConvShape& c, size_t ws_elems) {
  const size_t per_row = size_t(c.cin) * c.k * c.k * c.wo;
  return int(std::max<size_t>(1, std::min<size_t>(size_t(c.ho), ws_elems / per_row)));
}

ConvWorkspace conv_workspace(const ConvShape& c, size_t bound_floats, bool fp16) {
  ConvWorkspace l;
  if (c.k == 1 && c.pad == 0) return l;  // one GEMM on the input itself
  const size_t row = size_t(c.cin) * c.k * c.k * c.wo;
  l.scratch = align64(std::max(size_t(conv_band_rows(c, bound_floats)) * row,
                               2 * size_t(conv_band_rows(c, bound_floats / 2)) * row));
  if (fp16) {
    l.w16 = align64((size_t(c.cout) * c.cin * c.k * c.k + 1) / 2);
    l.x16 = align64((size_t(c.n) * c.cin * c.h * c.w + 1) / 2);
    l.y16 = align64((size_t(c.n) * c.cout * c.ho * c.wo + 1) / 2);
  }
  return l;
}

void to_half(const float* x, void* x16, size_t n, cudaStream_t s) {
  if (!n) return;
  to_half_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(x, static_cast<__half*>(x16), n);
  SL_CUDA_CHECK(cudaGetLastError(), "fp16 conversion kernel");
}

void to_half_nhwc(const float* x, void* x16, int batch, int channels, size_t plane,
                  cudaStream_t s) {
  if (!batch || !channels || !plane) return;
  const dim3 grid(unsigned((plane + kT - 1) / kT), unsigned((channels + kT - 1) / kT), unsigned(batch));
  nchw_to_nhwc_half_kernel<<<grid, dim3(kT, 8), 0, s>>>(x, static_cast<__half*>(x16), channels,
                                                       int(plane));
  SL_CUDA_CHECK(cudaGetLastError(), "NCHW -> NHWC fp16 kernel");
}

void half_nhwc_bias_act(const void* y16, const float* b, float* y, int batch, int channels,
                        size_t plane, bool relu, cudaStream_t s) {
  if (!batch || !channels || !plane) return;
  const dim3 grid(unsigned((plane + kT - 1) / kT), unsigned((channels + kT - 1) / kT), unsigned(batch));
  nhwc_half_to_nchw_kernel<<<grid, dim3(kT, 8), 0, s>>>(static_cast<const __half*>(y16), b, y,
                                                       channels, int(plane), relu);
  SL_CUDA_CHECK(cudaGetLastError(), "NHWC fp16 -> NCHW bias/ReLU epilogue");
}

namespace {

// One band's GEMM: row-major Y (cout x cols, ld plane) = W (cout x K) X (K x cols), as
// column-major Y^T = X^T W^T; fp16: half operands, fp32 accumulation and output.
void band_gemm(cublasHandle_t h, int cols, int cout, int K, const void* X, const void* W,
               float* Y, size_t plane, bool fp16, const char* what) {
  const float one = 1.f, zero = 0.f;
  if (fp16)
    SL_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, cols, cout, K, &one, X, CUDA_R_16F,
                                 cols, W, CUDA_R_16F, K, &zero, Y, CUDA_R_32F, int(plane),
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    what);
  else
    SL_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, cols, cout, K, &one,
                                static_cast<const float*>(X), cols, static_cast<const float*>(W),
                                K, &zero, Y, int(plane)),
                    what);
}

// Band rows and the element size of the im2col buffers: fp16 bands hold twice the rows.
int band_rows(const ConvShape& c, size_t bound_floats, bool fp16) {
  const int r = conv_band_rows(c, bound_floats);
  return fp16 ? std::min(c.ho, 2 * r) : r;
}

void launch_band_im2col(const float* xn, const ConvShape& c, int y0, int r, void* buf, bool fp16,
                        cudaStream_t s) {
  if (fp16)
    launch_im2col(xn, c.cin, c.h, c.w, c.k, c.pad, y0, r, c.wo, static_cast<__half*>(buf), s);
  else
    launch_im2col(xn, c.cin, c.h, c.w, c.k, c.pad, y0, r, c.wo, static_cast<float*>(buf), s);
}

}  // namespace

void conv2d_gemm(const ConvShape& c, const float* x, const float* w, const float* b, float* y,
                 bool relu, float* ws, size_t bound_floats, bool fp16, cublasHandle_t h,
                 cudaStream_t s) {
  const float one = 1.f, zero = 0.f;
  const size_t plane_in = size_t(c.h) * c.w, plane = size_t(c.ho) * c.wo;
  const int K = c.cin * c.k * c.k;
  if (c.k == 1 && c.pad == 0) {  // pixel-wise fully connected: X is the input
    for (int n = 0; n < c.n; ++n) {
      const float* xn = x + size_t(n) * c.cin * plane_in;
      float* yn = y + size_t(n) * c.cout * plane;
      SL_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, int(plane), c.cout, K, &one, xn,
                                  int(plane_in), w, K, &zero, yn, int(plane)),
                      "conv2d 1x1 GEMM");
      bias_act(yn, b, c.cout, plane, plane, relu, s);
    }
    return;
  }
  const ConvWorkspace l = conv_workspace(c, bound_floats, fp16);
  const void* W = w;
  if (fp16) {
    to_half(w, ws, size_t(c.cout) * K, s);
    W = ws;
  }
  void* X = ws + l.w16 + l.x16 + l.y16;
  const int rows = band_rows(c, bound_floats, fp16);
  for (int n = 0; n < c.n; ++n) {
    const float* xn = x + size_t(n) * c.cin * plane_in;
    float* yn = y + size_t(n) * c.cout * plane;
    for (int y0 = 0; y0 < c.ho; y0 += rows) {
      const int r = std::min(rows, c.ho - y0);
      const int cols = r * c.wo;
      launch_band_im2col(xn, c, y0, r, X, fp16, s);
      band_gemm(h, cols, c.cout, K, X, W, yn + size_t(y0) * c.wo, plane, fp16, "conv2d GEMM");
      bias_act(yn + size_t(y0) * c.wo, b, c.cout, size_t(cols), plane, relu, s);
    }
  }
}

void conv2d_gemm2s(const ConvShape& c, const float* x, const float* w, const float* b, float* y,
                   bool relu, float* ws, size_t bound_floats, bool fp16, cublasHandle_t h,
                   cudaStream_t main, cudaStream_t side, const cudaEvent_t* ev) {
  if (c.k == 1 && c.pad == 0) {  // no im2col to hide
    conv2d_gemm(c, x, w, b, y, relu, ws, bound_floats, fp16, h, main);
    return;
  }
  const size_t plane_in = size_t(c.h) * c.w, plane = size_t(c.ho) * c.wo;
  const int K = c.cin * c.k * c.k;
  const ConvWorkspace l = conv_workspace(c, bound_floats, fp16);
  const void* W = w;
  if (fp16) {
    to_half(w, ws, size_t(c.cout) * K, main);
    W = ws;
  }
  // Two band buffers, each sized for half the workspace bound (at least one output row).
  const int rows = band_rows(c, bound_floats / 2, fp16);
  const size_t elem = fp16 ? sizeof(__half) : sizeof(float);
  char* base = reinterpret_cast<char*>(ws + l.w16 + l.x16 + l.y16);
  void* buf[2] = {base, base + size_t(rows) * c.wo * K * elem};
  // The side stream starts after everything queued on the main stream (the input, weights).
  SL_CUDA_CHECK(cudaEventRecord(ev[0], main), "conv2d gemm2s");
  SL_CUDA_CHECK(cudaStreamWaitEvent(side, ev[0], 0), "conv2d gemm2s");
  int band = 0;
  for (int n = 0; n < c.n; ++n) {
    const float* xn = x + size_t(n) * c.cin * plane_in;
    float* yn = y + size_t(n) * c.cout * plane;
    for (int y0 = 0; y0 < c.ho; y0 += rows, ++band) {
      const int j = band % 2;
      const int r = std::min(rows, c.ho - y0);
      const int cols = r * c.wo;
      if (band >= 2)  // buffer j is free once the GEMM two bands back has read it
        SL_CUDA_CHECK(cudaStreamWaitEvent(side, ev[3 + j], 0), "conv2d gemm2s");
      launch_band_im2col(xn, c, y0, r, buf[j], fp16, side);
      SL_CUDA_CHECK(cudaEventRecord(ev[1 + j], side), "conv2d gemm2s");
      SL_CUDA_CHECK(cudaStreamWaitEvent(main, ev[1 + j], 0), "conv2d gemm2s");
      band_gemm(h, cols, c.cout, K, buf[j], W, yn + size_t(y0) * c.wo, plane, fp16,
                "conv2d gemm2s GEMM");
      bias_act(yn + size_t(y0) * c.wo, b, c.cout, size_t(cols), plane, relu, main);
      SL_CUDA_CHECK(cudaEventRecord(ev[3 + j], main), "conv2d gemm2s");
    }
  }
  // The side stream's last work (an im2col) is joined into the main stream by its event.
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
