#include <cuda_fp16.h>

#include <algorithm>

#include "engine/cuda_backend.h"
#include "kernels/conv_cuda.h"
#include "engine/convert_cuda.h"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

// X[(ci * k + dy) * k + dx][(yy - y0) * wo + xx] = x[ci][yy + dy - pad][xx + dx - pad] (0 outside),
// rows of X `cols` elements apart (the band's pixels rounded up, see kAlign).
// One thread per (ci, output row of the band, output column) writes its k x k entries: the index
// decoding is paid once per k * k elements, and each of the k * k stores is coalesced across the
// warp (consecutive output columns), so the kernel runs at memory speed.
template <typename T>
__global__ void im2col_kernel(const float* __restrict__ x, int cin, int h, int w, int k, int pad,
                              int y0, int rows, int wo, size_t cols, T* __restrict__ X) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= cin * rows * wo) return;
  const int ox = t % wo, q = t / wo, oy = q % rows, ci = q / rows;
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
                   size_t ld, T* X, cudaStream_t s) {
  const int threads = cin * rows * wo;
  im2col_kernel<<<unsigned((threads + 255) / 256), 256, 0, s>>>(x, cin, h, w, k, pad, y0, rows, wo,
                                                               ld, X);
  SL_CUDA_CHECK(cudaGetLastError(), "conv2d im2col kernel");
}

size_t align64(size_t floats) { return (floats + 63) / 64 * 64; }

// GEMM operands whose leading dimension is a multiple of 8 elements (16 bytes in half
// precision, 32 in single) let cuBLAS pick its vectorised kernels: with the odd pixel counts of
// real images it fell back to "align1" kernels (measured on an H100: a Turing-era 256x128 fp16
// kernel at 200 us where the aligned path takes a fraction; SIMT SGEMM align1 for fp32).
constexpr size_t kAlign = 8;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

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

// One band buffer pair of the GEMM algorithms: X (K x ld elements, fp16 or fp32) and the GEMM's
// output C (cout x ld floats), ld = the band's pixels rounded up to kAlign; rows chosen so that
// the pair fits `budget` floats (at least one output row).
struct BandPlan {
  int rows = 1;
  size_t ld = 0, x_floats = 0, c_floats = 0;
};

BandPlan band_plan(const ConvShape& c, size_t budget, bool fp16) {
  const size_t K = size_t(c.cin) * c.k * c.k, x_row = fp16 ? (K + 1) / 2 : K;  // floats a pixel
  const size_t per_row = (x_row + c.cout) * c.wo, slack = (x_row + c.cout) * kAlign + 128;
  BandPlan p;
  p.rows = int(std::max<size_t>(
      1, std::min<size_t>(size_t(c.ho), budget > slack ? (budget - slack) / per_row : 0)));
  p.ld = align_up(size_t(p.rows) * c.wo);
  p.x_floats = align64(fp16 ? (K * p.ld + 1) / 2 : K * p.ld);
  p.c_floats = align64(size_t(c.cout) * p.ld);
  return p;
}

}  // namespace

int conv_bands(const ConvShape& c, size_t bound_floats, bool fp16, bool two_streams) {
  if (c.k == 1 && c.pad == 0) return c.n;
  const BandPlan p = band_plan(c, two_streams ? bound_floats / 2 : bound_floats, fp16);
  return c.n * ((c.ho + p.rows - 1) / p.rows);
}

ConvWorkspace conv_workspace(const ConvShape& c, size_t bound_floats, bool fp16) {
  ConvWorkspace l;
  if (c.k == 1 && c.pad == 0) return l;  // one GEMM on the input itself
  const BandPlan one = band_plan(c, bound_floats, fp16);
  const BandPlan two = band_plan(c, bound_floats / 2, fp16);  // gemm2s: two X buffers, one C
  l.scratch = std::max(one.x_floats + one.c_floats, 2 * two.x_floats + two.c_floats);
  return l;
}

const void* HalfWeights::get(const float* w, const ConvShape& c, WeightLayout layout, DType t, cudaStream_t s) {
  if (w != of_ || t != type_ || layout != layout_) {
    switch (layout) {
      case WeightLayout::MmaConvPool:
        buf_.resize(conv_pool_weights_bytes(c), "conv2d half weights");
        conv_pool_weights(w, c, t, buf_.get(), s);
        break;
      case WeightLayout::MmaImplicitGemm:
        buf_.resize(conv_mma_weights_bytes(c), "conv2d half weights");
        conv_mma_weights(w, c, t, buf_.get(), s);
        break;
      default:  // OIHW float -> the same, or KRSC
        // [cout][cin / groups][kh * kw] -> the same or [cout][kh * kw][cin / groups]
        buf_.resize(size_t(c.cout) * (c.cin / c.groups) * c.k * c.kernel_w() * dtype_bytes(t), "conv half weights");
        convert(w, Format{}, buf_.get(), Format{t, layout == WeightLayout::KRSC ? Layout::NHWC : Layout::NCHW},
                c.cout, c.cin / c.groups, size_t(c.k) * c.kernel_w(), s);
    }
    of_ = w;
    type_ = t;
    layout_ = layout;
  }
  return buf_.get();
}

namespace {

// One band's GEMM into the aligned buffer C: row-major C (cout x ld) = W (cout x K) X (K x ld),
// as column-major C^T = X^T W^T; fp16: half operands, fp32 accumulation and output. The GEMM
// spans the whole aligned width (cuBLAS picks its vectorised kernels only when the contiguous
// extent is a multiple of 8 too); the padding columns of X are zero and C's are never read.
void band_gemm(cublasHandle_t h, size_t m, int cout, int K, const void* X, size_t ld,
               const void* W, float* C, bool fp16, const char* what) {
  const float one = 1.f, zero = 0.f;
  const int cols = int(m);
  if (fp16)
    SL_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, cols, cout, K, &one, X, CUDA_R_16F,
                                 int(ld), W, CUDA_R_16F, K, &zero, C, CUDA_R_32F, int(ld),
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                    what);
  else
    SL_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, cols, cout, K, &one,
                                static_cast<const float*>(X), int(ld),
                                static_cast<const float*>(W), K, &zero, C, int(ld)),
                    what);
}

}  // namespace

void conv1x1_nhwc(const ConvShape& c, const void* x, const void* w16, const float* b, void* y,
                  bool relu, DType t, cublasHandle_t h, cudaStream_t s) {
  SL_REQUIRE(c.k == 1 && c.pad == 0 && (t == DType::F16 || t == DType::BF16),
             "conv1x1_nhwc: a 1x1 convolution on f16 or bf16 tensors");
  const float one = 1.f, zero = 0.f;
  const int pixels = c.n * c.ho * c.wo;
  const cudaDataType_t dt = t == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
  // Column-major: Y^T (cout x pixels, ld cout) = W (cout x cin: W^T's buffer, ld cin, transposed)
  // times X^T (cin x pixels, ld cin).
  SL_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, c.cout, pixels, c.cin, &one, w16, dt,
                               c.cin, x, dt, c.cin, &zero, y, dt, c.cout, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT),
                  "conv2d 1x1 NHWC GEMM");
  bias_act_nhwc(TensorView{y, Shape(c.n, c.cout, c.ho, c.wo), Format{t, Layout::NHWC}}, b, relu, s);
}

namespace {

void launch_band_im2col(const float* xn, const ConvShape& c, int y0, int r, size_t ld, void* buf,
                        bool fp16, cudaStream_t s) {
  const size_t cols = size_t(r) * c.wo, elem = fp16 ? 2 : 4;
  if (ld > cols)  // zero padding columns: the GEMM runs over them
    SL_CUDA_CHECK(cudaMemset2DAsync(static_cast<char*>(buf) + cols * elem, ld * elem, 0,
                                    (ld - cols) * elem, size_t(c.cin) * c.k * c.k, s),
                  "conv2d im2col padding");
  if (fp16)
    launch_im2col(xn, c.cin, c.h, c.w, c.k, c.pad, y0, r, c.wo, ld, static_cast<__half*>(buf), s);
  else
    launch_im2col(xn, c.cin, c.h, c.w, c.k, c.pad, y0, r, c.wo, ld, static_cast<float*>(buf), s);
}

}  // namespace

void conv2d_gemm(const ConvShape& c, const float* x, const void* w, const float* b, float* y,
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
                                  int(plane_in), static_cast<const float*>(w), K, &zero, yn,
                                  int(plane)),
                      "conv2d 1x1 GEMM");
      bias_act(yn, plane, yn, plane, b, c.cout, plane, relu, s);
    }
    return;
  }
  const ConvWorkspace l = conv_workspace(c, bound_floats, fp16);
  const BandPlan p = band_plan(c, bound_floats, fp16);
  float* X = ws;
  float* C = X + p.x_floats;
  for (int n = 0; n < c.n; ++n) {
    const float* xn = x + size_t(n) * c.cin * plane_in;
    float* yn = y + size_t(n) * c.cout * plane;
    for (int y0 = 0; y0 < c.ho; y0 += p.rows) {
      const int r = std::min(p.rows, c.ho - y0);
      const int cols = r * c.wo;
      launch_band_im2col(xn, c, y0, r, p.ld, X, fp16, s);
      band_gemm(h, align_up(size_t(cols)), c.cout, K, X, p.ld, w, C, fp16, "conv2d GEMM");
      bias_act(C, p.ld, yn + size_t(y0) * c.wo, plane, b, c.cout, size_t(cols), relu, s);
    }
  }
}

void conv2d_gemm2s(const ConvShape& c, const float* x, const void* w, const float* b, float* y,
                   bool relu, float* ws, size_t bound_floats, bool fp16, cublasHandle_t h,
                   cudaStream_t main, cudaStream_t side, const cudaEvent_t* ev) {
  if (c.k == 1 && c.pad == 0) {  // no im2col to hide
    conv2d_gemm(c, x, w, b, y, relu, ws, bound_floats, fp16, h, main);
    return;
  }
  const size_t plane_in = size_t(c.h) * c.w, plane = size_t(c.ho) * c.wo;
  const int K = c.cin * c.k * c.k;
  const ConvWorkspace l = conv_workspace(c, bound_floats, fp16);
  // Two im2col band buffers (each planned for half the workspace bound) and one GEMM output
  // buffer: the epilogue of band i runs on the main stream before the GEMM of band i + 1.
  const BandPlan p = band_plan(c, bound_floats / 2, fp16);
  float* base = ws;
  void* buf[2] = {base, base + p.x_floats};
  float* C = base + 2 * p.x_floats;
  // The side stream starts after everything queued on the main stream (the input).
  SL_CUDA_CHECK(cudaEventRecord(ev[0], main), "conv2d gemm2s");
  SL_CUDA_CHECK(cudaStreamWaitEvent(side, ev[0], 0), "conv2d gemm2s");
  int band = 0;
  for (int n = 0; n < c.n; ++n) {
    const float* xn = x + size_t(n) * c.cin * plane_in;
    float* yn = y + size_t(n) * c.cout * plane;
    for (int y0 = 0; y0 < c.ho; y0 += p.rows, ++band) {
      const int j = band % 2;
      const int r = std::min(p.rows, c.ho - y0);
      const int cols = r * c.wo;
      if (band >= 2)  // buffer j is free once the GEMM two bands back has read it
        SL_CUDA_CHECK(cudaStreamWaitEvent(side, ev[3 + j], 0), "conv2d gemm2s");
      launch_band_im2col(xn, c, y0, r, p.ld, buf[j], fp16, side);
      SL_CUDA_CHECK(cudaEventRecord(ev[1 + j], side), "conv2d gemm2s");
      SL_CUDA_CHECK(cudaStreamWaitEvent(main, ev[1 + j], 0), "conv2d gemm2s");
      band_gemm(h, align_up(size_t(cols)), c.cout, K, buf[j], p.ld, w, C, fp16,
                "conv2d gemm2s GEMM");
      SL_CUDA_CHECK(cudaEventRecord(ev[3 + j], main), "conv2d gemm2s");
      bias_act(C, p.ld, yn + size_t(y0) * c.wo, plane, b, c.cout, size_t(cols), relu, main);
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
