// GPU convolution (stride 1, odd square kernel, zero padding `pad`), NCHW, with bias and an
// optional fused ReLU. The paper's algorithms (Cavigelli et al. 2015, sec. 4); the fourth,
// cuDNN, is in kernels/conv_cudnn.h:
//   conv2d_gemm    explicit im2col of a band of output rows + cuBLAS SGEMM (the matrix X of the
//                  paper; fp16: half operands and cublasGemmEx), band by band so the workspace
//                  stays bounded, leading dimensions rounded to 8 elements so cuBLAS runs its
//                  vectorised kernels, bias and ReLU applied while copying the GEMM's band into
//                  the output; 1x1 convolutions are a single GEMM on the input itself;
//   conv2d_gemm2s  the same with two alternating streams: the im2col of band i+1 runs on the side
//                  stream while the GEMM of band i runs on the main one, two im2col buffers of
//                  half the bound each (events order the reuse);
//   conv2d_direct  input tile and filters in shared memory, each thread computing several output
//                  pixels of several output channels, so a fetched coefficient feeds many FMAs.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "core/host_device.h"
#include "core/tensor.h"
#include "core/cuda_check.h"

namespace scenelab::cuda {

struct ConvShape {
  int n, cin, h, w, cout, k, pad, ho, wo;
  // The general convolution's further geometry (layers/conv.cpp, on cuDNN only): a kh x kw kernel
  // (kh = k), padding pad rows and pad_w columns on each side, strides, dilations, groups. The
  // defaults are conv2d's: k x k, stride 1, no dilation, one group.
  int kw = 0;      // 0: k
  int pad_w = -1;  // -1: pad
  int sh = 1, sw = 1, dh = 1, dw = 1, groups = 1;
  SL_HD int kernel_w() const { return kw > 0 ? kw : k; }
  SL_HD int padding_w() const { return pad_w >= 0 ? pad_w : pad; }
  SL_HD bool general() const {
    return kernel_w() != k || padding_w() != pad || sh != 1 || sw != 1 || dh != 1 || dw != 1 || groups != 1;
  }
};

// The workspace of a convolution layer, in floats: the bands of gemm / gemm2s (im2col and the
// GEMM's output, leading dimensions rounded up to 8 elements; at most `bound` floats, at least
// one output row), or cuDNN's own workspace.
struct ConvWorkspace {
  size_t scratch = 0;
  size_t total() const { return scratch; }
};
ConvWorkspace conv_workspace(const ConvShape& c, size_t bound_floats, bool fp16);
// Bands the GEMM algorithms split the layer into (all images): gemm2s overlaps nothing when
// its plan (half the bound a band) has a single one.
int conv_bands(const ConvShape& c, size_t bound_floats, bool fp16, bool two_streams);

// w: the float weights, or under fp16 their half copy (HalfWeights, layout as the float ones);
// fp16: the im2col bands in half precision too, cublasGemmEx on tensor cores with fp32
// accumulation and output. 1x1 convolutions stay one SGEMM on the input (w float).
void conv2d_gemm(const ConvShape& c, const float* x, const void* w, const float* b, float* y,
                 bool relu, float* ws, size_t bound_floats, bool fp16, cublasHandle_t h,
                 cudaStream_t s);
// Two band buffers (each half the bound).
// streams/events: main, side; events[0] start, [1..2] im2col done, [3..4] GEMM done per half.
void conv2d_gemm2s(const ConvShape& c, const float* x, const void* w, const float* b, float* y,
                   bool relu, float* ws, size_t bound_floats, bool fp16, cublasHandle_t h,
                   cudaStream_t main, cudaStream_t side, const cudaEvent_t* events);
// A layer's weights in half precision (f16 or bf16) in the layout the kernel that reads them
// wants, converted from the float OIHW ones when first seen (that allocates: a layer's first run
// after a plan is never captured into a CUDA graph) and again only if the weights move (a graph
// re-planned onto another backend) or the type or layout changes. Layouts: that of the float
// weights (OIHW), KRSC (O images of I channels x k*k pixels, channels innermost: cuDNN's NHWC
// kernels), or the fragment order of one of our mma kernels (conv_relu_pool_nhwc,
// conv_mma_nhwc).
enum class WeightLayout { OIHW, KRSC, MmaConvPool, MmaImplicitGemm };
class HalfWeights {
 public:
  const void* get(const float* w, const ConvShape& c, WeightLayout layout, DType t, cudaStream_t s);

 private:
  DeviceBuffer buf_;
  const float* of_ = nullptr;
  DType type_ = DType::F16;
  WeightLayout layout_ = WeightLayout::OIHW;
};
// A 1x1 convolution on NHWC half-precision tensors (f16 or bf16): one GEMM over every pixel of
// the batch, Y (pixels x cout) = X (pixels x cin) W^T, fp32 accumulation, half output; then bias
// and ReLU. w16: the weights (cout x cin) in the tensors' type.
void conv1x1_nhwc(const ConvShape& c, const void* x, const void* w16, const float* b, void* y,
                  bool relu, DType t, cublasHandle_t h, cudaStream_t s);
void conv2d_direct(const ConvShape& c, const float* x, const float* w, const float* b, float* y,
                   bool relu, cudaStream_t s);
// kernels/conv_fused_cuda.cu: convolution + bias + optional ReLU + max-pool (pool_k x pool_k,
// stride pool_stride) in one tensor-core kernel on f16/bf16 NHWC tensors, writing only the pooled
// map (n x ho/2 x wo/2 x cout). Supported: 3 -> 16 channels, 7x7, pad 0 or 3, pool 2 stride 2, on
// a device whose binary has sm_80+ code. w: the weights in the kernel's fragment order
// (HalfWeights, WeightLayout::MmaConvPool).
bool conv_pool_supported(const ConvShape& c, int pool_k, int pool_stride, DType t);
void conv_relu_pool_nhwc(const ConvShape& c, const void* x, const void* w, const float* b, void* y,
                         bool relu, DType t, cudaStream_t s);
// Two pixel-wise (1x1) layers in one tensor-core kernel on f16/bf16 NHWC tensors: y (pixels x c3)
// = w2 act(w1 x + b1) + b2, act a ReLU if asked; x pixels x c1, w1 c2 x c1, w2 c3 x c2 (the
// tensors' type), b1, b2 float (b2 may be null). The intermediate is rounded to the type, as
// between two layers, but never written. Supported: c1 a multiple of 32, c2 16, 32 or 64, c3 <=
// 16, W1 within the current device's shared memory a block (opted in past 48 KiB: c1 up to ~1700
// with c2 64 on an H100), on a device whose binary has sm_80+ code.
bool conv1x1_pair_supported(int c1, int c2, int c3, DType t);
void conv1x1_pair_nhwc(int pixels, int c1, int c2, int c3, const void* x, const void* w1, const float* b1,
                       bool relu, const void* w2, const float* b2, void* y, DType t, cudaStream_t s);

// kernels/conv_mma_cuda.cu: our implicit-GEMM convolution on tensor cores, f16/bf16 NHWC
// tensors, fp32 accumulation: 7x7, cin 16 or 32, cout a multiple of 64, any padding up to 3; bias,
// optional ReLU and, with `pool`, a 2x2 stride-2 max-pool in the epilogue (y is then the pooled
// map, n x ho/2 x wo/2 x cout). wf: the weights in fragment order (HalfWeights,
// WeightLayout::MmaImplicitGemm), on a device whose binary has sm_80+ code.
bool conv_mma_supported(const ConvShape& c, bool pool, DType t);
void conv_mma_nhwc(const ConvShape& c, const void* x, const void* wf, const float* b, void* y, bool relu,
                   bool pool, DType t, cudaStream_t s);
// The two fragment layouts (HalfWeights makes them): conv_fused_cuda.cu's and conv_mma_cuda.cu's.
size_t conv_pool_weights_bytes(const ConvShape& c);
void conv_pool_weights(const float* w, const ConvShape& c, DType t, void* out, cudaStream_t s);
size_t conv_mma_weights_bytes(const ConvShape& c);
void conv_mma_weights(const float* w, const ConvShape& c, DType t, void* out, cudaStream_t s);

// kernels/conv_split_cuda.cu: the fp32 convolution on TF32 tensor cores (--conv split; "3xTF32").
// Every float is split in two, x ~ big + small, both with TF32's 10-bit mantissa (taken exactly
// by the tensor cores: big is x rounded to it, small what is left rounded to it); the three
// products big*big, big*small and small*big are summed by ONE convolution over 3 * cin channels,
// NHWC, fp32 accumulation and output (cuDNN's graph API, engines without FFT or Winograd): what
// is dropped (small*small and the bits past small's, rounded to nearest) is ~2^-22 of a product,
// a few fp32 roundings. Channels padded with zeros to a multiple of 4.
int split_channels(int cin);
// x NCHW f32 (n, cin, h, w) -> NHWC f32 (n, h, w, split_channels(cin)): slots [big big small 0..].
void split_input(const float* x, int n, int cin, int h, int w, void* out, cudaStream_t s);
// OIHW f32 -> KRSC f32 (cout, k, k, split_channels(cin)): slots [big small big 0..]; made when
// first seen (allocates: never inside a CUDA-graph capture) and again if the weights move.
class SplitWeights {
 public:
  const void* get(const float* w, const ConvShape& c, cudaStream_t s);

 private:
  DeviceBuffer buf_;
  const float* of_ = nullptr;
};
// y NHWC f32 (n, pixels, c) -> out NCHW f32 (n, c, pixels), + b[c] (b may be null), ReLU if asked.
void nhwc_to_nchw_bias_act(const float* y, int n, int c, size_t pixels, const float* b, bool relu,
                           float* out, cudaStream_t s);

}  // namespace scenelab::cuda
#endif
