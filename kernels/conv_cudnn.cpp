#include "kernels/conv_cudnn.h"

#if defined(SCENELAB_WITH_CUDA) && defined(SCENELAB_WITH_CUDNN)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {

CudnnConv::CudnnConv(cudnnHandle_t h, const ConvShape& c, Precision p) : h_(h), c_(c), p_(p) {
  const char* what = "conv2d cudnn descriptors";
  // fp16/bf16 run on NHWC tensors (filters KRSC), the layout of cuDNN's tensor-core kernels;
  // fp32/tf32 on NCHW floats.
  const cudnnDataType_t t = p == Precision::FP16   ? CUDNN_DATA_HALF
                            : p == Precision::BF16 ? CUDNN_DATA_BFLOAT16
                                                   : CUDNN_DATA_FLOAT;
  const cudnnTensorFormat_t f = nhwc() ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  SL_CUDNN_CHECK(cudnnCreateTensorDescriptor(x_.out()), what);
  SL_CUDNN_CHECK(cudnnCreateTensorDescriptor(y_.out()), what);
  SL_CUDNN_CHECK(cudnnCreateFilterDescriptor(w_.out()), what);
  SL_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(conv_.out()), what);
  SL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_.get(), f, t, c.n, c.cin, c.h, c.w), what);
  SL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_.get(), f, t, c.n, c.cout, c.ho, c.wo), what);
  SL_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_.get(), t, f, c.cout, c.cin / c.groups, c.k, c.kernel_w()), what);
  SL_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_.get(), c.pad, c.padding_w(), c.sh, c.sw, c.dh, c.dw,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                 what);
  SL_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_.get(), c.groups), what);
  int dims[4] = {};  // cuDNN's output size must be the layer's
  SL_CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(conv_.get(), x_.get(), w_.get(), 4, dims), what);
  SL_REQUIRE(dims[0] == c.n && dims[1] == c.cout && dims[2] == c.ho && dims[3] == c.wo, "conv cudnn: output ",
             dims[2], "x", dims[3], ", the layer's ", c.ho, "x", c.wo);
  SL_CUDNN_CHECK(cudnnSetConvolutionMathType(
                     conv_.get(), p == Precision::FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
                 what);
}

const void* CudnnConv::weights(const float* w, cudaStream_t s) const {
  if (!nhwc()) return w;
  return w16_.get(w, c_, WeightLayout::KRSC, p_ == Precision::BF16 ? DType::BF16 : DType::F16, s);
}

size_t CudnnConv::scratch_bytes(size_t bound_floats) const {
  // conv2d's workspace is sized for its GEMM algorithms too; the general conv's is the bound.
  if (c_.general()) return bound_floats * sizeof(float);
  return conv_workspace(c_, bound_floats, nhwc()).scratch * sizeof(float);
}

void CudnnConv::choose(const void* x, const float* w, void* y, float* ws, size_t bound_floats,
                       cudaStream_t s) {
  static const bool trace = std::getenv("SCENELAB_TRACE_TUNING") != nullptr;
  const auto t_start = std::chrono::steady_clock::now();
  const void* wt = weights(w, s);
  const size_t scratch = scratch_bytes(bound_floats);
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  // cuDNN's heuristics rank its algorithms without running them (cudnnFind... runs every one,
  // FFTs with large workspaces included: up to half a second a layer at 1920x1080). The
  // ranking alone proved unreliable (on an H100 it put a CUDA-core fp16 kernel 20x slower than
  // the tensor-core one first), so the first kTimed usable ones are timed here: a warm-up, then
  // the better of two runs (CUDA events).
  constexpr int kTimed = 4;
  SL_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h_, x_.get(), w_.get(), conv_.get(),
                                                        y_.get(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                        &returned, perf),
                 "conv2d cudnn: ranking the algorithms");
  const float one = 1.f, zero = 0.f;
  CudaEvent e0, e1;
  float best = 1e30f;
  // Half precision on CUDA cores is what the ranking sometimes puts first (on an H100: 2-3x
  // slower than the tensor-core kernels): there, tensor-core candidates are timed, and the others
  // only where no tensor-core kernel runs the shape.
  for (int pass = 0; pass < (nhwc() ? 2 : 1) && !chosen_; ++pass)
  for (int i = 0, timed = 0; i < returned && timed < kTimed; ++i) {
    const auto& r = perf[i];
    if (r.status != CUDNN_STATUS_SUCCESS) continue;
    const bool tc = r.mathType == CUDNN_TENSOR_OP_MATH ||
                    r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (p_ == Precision::FP32 && tc) continue;  // fp32 means no tensor-core rounding
    if (nhwc() && pass == 0 && !tc) continue;
    SL_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_.get(), r.mathType), "conv2d cudnn");
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(h_, x_.get(), w_.get(), conv_.get(), y_.get(),
                                                r.algo, &bytes) != CUDNN_STATUS_SUCCESS ||
        bytes > scratch)
      continue;
    ++timed;
    float ms = 1e30f;
    for (int k = 0; k < 3; ++k) {
      SL_CUDA_CHECK(cudaEventRecord(e0.get(), s), "conv2d cudnn timing");
      const cudnnStatus_t st = cudnnConvolutionForward(h_, &one, x_.get(), x, w_.get(), wt,
                                                       conv_.get(), r.algo, ws, bytes, &zero,
                                                       y_.get(), y);
      if (st != CUDNN_STATUS_SUCCESS) {  // heuristics can list what does not run: next one
        ms = 1e30f;
        break;
      }
      SL_CUDA_CHECK(cudaEventRecord(e1.get(), s), "conv2d cudnn timing");
      SL_CUDA_CHECK(cudaEventSynchronize(e1.get()), "conv2d cudnn timing");
      float t = 0;
      SL_CUDA_CHECK(cudaEventElapsedTime(&t, e0.get(), e1.get()), "conv2d cudnn timing");
      if (k > 0) ms = std::min(ms, t);  // the first is the warm-up
    }
    if (ms < best) {
      best = ms;
      algo_ = r.algo;
      algo_bytes_ = bytes;
      math_ = r.mathType;
      chosen_ = true;
    }
  }
  if (trace)
    std::fprintf(stderr, "  cudnn %dx%d/%d %d->%d on %dx%d: %d candidates, picked %s (%.3f ms); %.1f ms\n",
                 c_.k, c_.kernel_w(), c_.sh, c_.cin, c_.cout, c_.w, c_.h, returned, algo_name().c_str(), best,
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count());
  if (chosen_) {
    SL_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_.get(), math_), "conv2d cudnn");
    return;
  }
  throw_error("conv2d cudnn: no cuDNN algorithm runs this ", c_.k, "x", c_.kernel_w(), " convolution ",
              c_.cin, "->", c_.cout, " on ", c_.w, "x", c_.h, " within the ", scratch >> 20,
              " MiB workspace (raise --conv-workspace)");
}

bool CudnnConv::preset(int algo, int math, size_t bound_floats) {
  if (algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT) return false;
  const auto m = static_cast<cudnnMathType_t>(math);
  if (m != CUDNN_DEFAULT_MATH && m != CUDNN_TENSOR_OP_MATH &&
      m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && m != CUDNN_FMA_MATH)
    return false;
  const bool tc = m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  if (p_ == Precision::FP32 && tc) return false;
  if (cudnnSetConvolutionMathType(conv_.get(), m) != CUDNN_STATUS_SUCCESS) return false;
  size_t bytes = 0;
  const auto a = static_cast<cudnnConvolutionFwdAlgo_t>(algo);
  if (cudnnGetConvolutionForwardWorkspaceSize(h_, x_.get(), w_.get(), conv_.get(), y_.get(), a,
                                              &bytes) != CUDNN_STATUS_SUCCESS ||
      bytes > scratch_bytes(bound_floats)) {
    SL_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_.get(), math_), "conv2d cudnn");
    return false;
  }
  algo_ = a;
  algo_bytes_ = bytes;
  math_ = m;
  chosen_ = true;
  return true;
}

void CudnnConv::forward(const void* x, const float* w, const float* b, void* y, bool relu,
                        float* ws, size_t /*bound_floats*/, cudaStream_t s) const {
  SL_REQUIRE(chosen_, "conv2d cudnn: forward before an algorithm was chosen");
  const float one = 1.f, zero = 0.f;
  SL_CUDNN_CHECK(cudnnConvolutionForward(h_, &one, x_.get(), x, w_.get(), weights(w, s), conv_.get(),
                                         algo_, ws, algo_bytes_, &zero, y_.get(), y),
                 "conv2d cudnn forward");
  const Shape out(c_.n, c_.cout, c_.ho, c_.wo);
  if (nhwc()) {
    bias_act_nhwc(TensorView{y, out, Format{p_ == Precision::BF16 ? DType::BF16 : DType::F16, Layout::NHWC}},
                  b, relu, s);
    return;
  }
  const size_t plane = size_t(c_.ho) * c_.wo;
  for (int n = 0; n < c_.n; ++n) {
    float* yn = static_cast<float*>(y) + size_t(n) * c_.cout * plane;
    bias_act(yn, plane, yn, plane, b, c_.cout, plane, relu, s);
  }
}

std::string CudnnConv::algo_name() const {
  switch (algo_) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "other";
  }
}

}  // namespace scenelab::cuda
#endif
