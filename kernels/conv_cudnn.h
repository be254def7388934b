// The fourth convolution algorithm: cuDNN's forward convolution, its algorithm timed once per
// layer and input size (the best of cuDNN's heuristic ranking, timed on the layer's own buffers)
// and then replayed; bias and ReLU in our epilogue. fp32 allows only CUDA-core (FMA) algorithms,
// tf32 tensor-core algorithms on float data, fp16 half operands (converted in the layer's
// workspace, see ConvWorkspace) with fp32 accumulation.
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
  // workspace fits the layer's scratch. Synchronises the host: call it outside CUDA-graph capture.
  void choose(const float* x, const float* w, float* y, float* ws, size_t bound_floats,
              cudaStream_t s);
  bool chosen() const { return chosen_; }
  // Takes a choice made earlier by choose() (a plan cache's), without timing: false when cuDNN
  // does not run that algorithm here or its workspace would not fit the bound.
  bool preset(int algo, int math, size_t bound_floats);
  int algo_id() const { return int(algo_); }
  int math_id() const { return int(math_); }
  // Stream-ordered; no allocation, no synchronisation.
  void forward(const float* x, const float* w, const float* b, float* y, bool relu, float* ws,
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
  // fp16: the weights in half precision, KRSC (converted once, at choose()).
  mutable HalfWeights w16_;
  // What cuDNN reads and writes: the layer's float tensors, or under fp16 the half NHWC copies
  // (input converted on the way, output in the workspace) and the scratch after them.
  struct Operands {
    const void* x;
    const void* w;
    void* y;
    float* scratch;
    size_t scratch_bytes;
  };
  Operands operands(const float* x, const float* w, float* y, float* ws, size_t bound_floats,
                    cudaStream_t s) const;
};

}  // namespace scenelab::cuda
#endif
