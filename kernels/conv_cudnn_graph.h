// Convolution on f16/bf16 NHWC tensors through cuDNN's graph (backend) API: the engines it offers
// there include the Hopper tensor-core kernels that the legacy cudnnConvolutionForward does not
// reach (on an H100, 64 -> 256 7x7 at 1920x1080 fp16: 0.5 ms against 1.5), and runtime fusion of
// the epilogue: the convolution, the bias and the ReLU as one operation graph. Any geometry
// ConvShape describes (conv2d's k x k at stride 1; the general conv's kernel, padding, strides,
// dilations and groups). Two graphs are offered, plain (conv, then our NHWC bias/ReLU kernel)
// and, where the plain one takes 0.02 ms or more or no plain engine runs the shape (with runtime
// fusion on), fused (conv + bias + ReLU); the engine configurations cuDNN's heuristics rank first
// for each are timed on the layer's own buffers, epilogue included, and the fastest kept.
#pragma once
#if defined(SCENELAB_WITH_CUDA) && defined(SCENELAB_WITH_CUDNN)
#include <cudnn.h>

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/conv_cuda.h"

namespace scenelab::cuda {

class CudnnGraphConv {
 public:
  // t: F16, BF16 or F32; x (n x cin x h x w) NHWC and the weights KRSC of that type, the bias
  // float; y (n x cout x ho x wo) NHWC of type y_type: t, or F32 (a float output: there the plain
  // graph leaves the bias and ReLU to the caller, see fused()).
  // exact: engines whose numerics differ from a direct sum (FFT, Winograd, reduced-precision
  // reduction; cuDNN's numerical notes) are left out.
  CudnnGraphConv(cudnnHandle_t h, const ConvShape& c, DType t, bool relu, bool bias,
                 DType y_type = DType::F16, bool exact = false);
  ~CudnnGraphConv();
  CudnnGraphConv(const CudnnGraphConv&) = delete;
  CudnnGraphConv& operator=(const CudnnGraphConv&) = delete;

  // Times the candidates on these buffers (synchronises: outside CUDA-graph capture); throws
  // when no engine runs the shape within `scratch_bytes`. runtime_fusion: whether the fused
  // graph (compiled when finalised) may be tried (CudaOptions::runtime_fusion).
  void choose(const void* x, const void* w, const float* b, void* y, void* ws, size_t scratch_bytes,
              bool runtime_fusion, cudaStream_t s);
  // A choice made earlier (choice()), without timing; false where it no longer applies.
  bool preset(const std::string& choice, size_t scratch_bytes);
  bool chosen() const { return plan_ != nullptr; }
  // A layer's first run: the choice `saved` (a plan cache's, "" none) where it still applies, else
  // choose() on these buffers; false where no engine runs the shape (the caller's legacy path).
  bool ready(const std::string& saved, const void* x, const void* w, const float* b, void* y, void* ws,
             size_t scratch_bytes, bool runtime_fusion, cudaStream_t s);
  // Whether the chosen graph applies the bias and ReLU (else, with a float output, the caller does).
  bool fused() const { return fused_; }
  std::string choice() const;  // "F I": fused graph or not, index in its heuristic ranking
  std::string name() const;    // for reports
  // Stream-ordered, no allocation once the pointers are seen (the first run is not captured).
  void forward(const void* x, const void* w, const float* b, void* y, void* ws, cudaStream_t s);

 private:
  struct Desc;  // owner of one backend descriptor
  struct Graph;
  std::unique_ptr<Graph> build(bool fused) const;
  // The heuristic ranking's engine configurations of a graph (up to `max`), and one of them
  // finalised as a plan (null where it does not build for this shape). Finalising can compile
  // kernels (runtime fusion): only the configurations timed are finalised.
  std::vector<std::shared_ptr<Desc>> configs(const Graph& g, int max) const;
  std::shared_ptr<Desc> finalize_plan(const Graph& g, const std::shared_ptr<Desc>& config) const;
  int64_t workspace_of(const Desc& plan) const;
  // The engine of a configuration: its global index and numerical notes ("tc" tensor cores,
  // "fft", "winograd", ...); excluded: whether `exact` rules it out.
  struct Engine {
    int64_t index = -1;
    std::string notes;
    bool excluded = false;
  };
  Engine engine_of(const Desc& config) const;
  void execute(const Desc& plan, bool fused, const void* x, const void* w, const float* b, void* y,
               void* ws, cudaStream_t s);

  cudnnHandle_t h_;
  ConvShape c_;
  DType t_, y_type_;
  bool relu_, bias_, exact_;
  std::string engine_;  // the chosen engine, for name()
  std::shared_ptr<Desc> plan_;
  bool fused_ = false;
  int index_ = -1;
  int64_t ws_bytes_ = 0;
  // The variant pack of the last pointers (remade if they change).
  std::shared_ptr<Desc> pack_;
  std::vector<const void*> pack_ptrs_;
};

}  // namespace scenelab::cuda
#endif
