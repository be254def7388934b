// The fourth convolution algorithm: cuDNN's forward convolution, its algorithm timed once per
// layer and input size (the best of cuDNN's heuristic ranking, timed on the layer's own buffers)
// and then replayed; bias and ReLU in our epilogue. fp32 allows only CUDA-core (FMA) algorithms
// and tf32 tensor-core algorithms, on f32 NCHW tensors; fp16 and bf16 run on the layer's f16 /
// bf16 NHWC tensors as they are (weights KRSC, converted once), fp32 accumulation.
#pragma once
#if defined(SCENELAB_WITH_CUDA) && defined(SCENELAB_WITH_CUDNN)
#include <cudnn.h>

#include <string>

#include "engine/cuda_backend.h"
#include "kernels/conv_cuda.h"

namespace scenelab::cuda {

// Owner of one cuDNN descriptor (released by its destroy function); move-free, copy-free.
template <typename T, cudnnStatus_t (*Destroy)(T)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() = default;
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  ~CudnnDescriptor() {
    if (d_) Destroy(d_);
  }
  T get() const { return d_; }
  T* out() { return &d_; }

 private:
  T d_ = nullptr;
};

class CudnnConv {
 public:
  CudnnConv(cudnnHandle_t h, const ConvShape& c, Precision p);

  // Times the best-ranked of cuDNN's algorithms on these buffers and keeps the fastest whose
  // workspace fits the layer's scratch. x, y: the layer's tensors (f32 NCHW, or f16/bf16 NHWC).
  // Synchronises the host: call it outside CUDA-graph capture.
  void choose(const void* x, const float* w, void* y, float* ws, size_t bound_floats,
              cudaStream_t s);
  bool chosen() const { return chosen_; }
  // Takes a choice made earlier by choose() (a plan cache's), without timing: false when cuDNN
  // does not run that algorithm here or its workspace would not fit the bound.
  bool preset(int algo, int math, size_t bound_floats);
  int algo_id() const { return int(algo_); }
  int math_id() const { return int(math_); }
  // Stream-ordered; no allocation, no synchronisation.
  void forward(const void* x, const float* w, const float* b, void* y, bool relu, float* ws,
               size_t bound_floats, cudaStream_t s) const;
  std::string algo_name() const;

 private:
  cudnnHandle_t h_;
  ConvShape c_;
  Precision p_;
  CudnnDescriptor<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor> x_, y_;
  CudnnDescriptor<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor> w_;
  CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor> conv_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t algo_bytes_ = 0;
  cudnnMathType_t math_ = CUDNN_DEFAULT_MATH;
  bool chosen_ = false;
  // fp16/bf16: the weights in half precision, KRSC (converted once).
  mutable HalfWeights w16_;
  bool nhwc() const { return p_ == Precision::FP16 || p_ == Precision::BF16; }
  const void* weights(const float* w, cudaStream_t s) const;
  size_t scratch_bytes(size_t bound_floats) const;
};

}  // namespace scenelab::cuda
#endif
