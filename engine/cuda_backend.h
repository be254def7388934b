// The CUDA backend: one stream, cuBLAS and cuDNN handles owned here, device memory through
// cudaMalloc (planned once per input size by the graph). Layers receive a CudaContext.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "engine/backend.h"
#include "kernels/cuda_check.h"

#define SL_CUBLAS_CHECK(call, what)                                                      \
  do {                                                                                   \
    cublasStatus_t sl_st_ = (call);                                                      \
    if (sl_st_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::scenelab::throw_error(what, ": ", #call, " failed: ", cublasGetStatusString(sl_st_), \
                              " (", __FILE__, ":", __LINE__, ")");                       \
  } while (0)

namespace scenelab {

enum class ConvAlgo { Direct, Gemm, Gemm2s, Auto };

struct CudaContext {
  cudaStream_t stream = nullptr;
  // The second stream of the paper's two-stream GEMM (im2col of band i+1 beside the GEMM of
  // band i) and the events ordering the two: [0] start, [1..2] im2col done, [3..4] GEMM done.
  cudaStream_t side_stream = nullptr;
  cudaEvent_t events[5] = {};
  cublasHandle_t cublas = nullptr;
  ConvAlgo conv = ConvAlgo::Auto;
  bool tf32 = false;
  size_t conv_workspace_bytes = 0;
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& o);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  DeviceKind kind() const override { return DeviceKind::CUDA; }
  std::string describe() const override;
  void activate() const override;
  BackendMemory allocate(size_t bytes) const override;
  void upload(void* dst, const void* src, size_t bytes) const override;
  void download(void* dst, const void* src, size_t bytes) const override;
  void synchronize() const override;
  const CudaContext* cuda() const override { return &ctx_; }
  BackendMemory capture(const std::function<void()>& body) const override;
  void replay(const BackendMemory& graph) const override;

 private:
  int device_ = 0;
  std::string name_;
  CudaStream stream_, side_stream_;
  CudaEvent events_[5];
  DeviceBuffer cublas_workspace_;  // given to cuBLAS so it never allocates (graph capture)
  CudaContext ctx_;
};

}  // namespace scenelab
#endif
