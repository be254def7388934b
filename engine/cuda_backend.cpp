#include "engine/cuda_backend.h"

#include <algorithm>

#ifdef SCENELAB_WITH_CUDA
#include "engine/error.h"

namespace scenelab {

CudaBackend::CudaBackend(const CudaOptions& o) {
  // Options first: nothing is created yet if they are wrong.
  if (o.precision == "fp32") ctx_.precision = Precision::FP32;
  else if (o.precision == "tf32") ctx_.precision = Precision::TF32;
  else if (o.precision == "fp16") ctx_.precision = Precision::FP16;
  else throw_error("--precision ", o.precision, ": expected fp32, tf32 or fp16");
  if (o.conv == "direct") ctx_.conv = ConvAlgo::Direct;
  else if (o.conv == "gemm") ctx_.conv = ConvAlgo::Gemm;
  else if (o.conv == "gemm2s") ctx_.conv = ConvAlgo::Gemm2s;
  else if (o.conv == "cudnn") ctx_.conv = ConvAlgo::Cudnn;
  else if (o.conv == "auto") ctx_.conv = ConvAlgo::Auto;
  else throw_error("--conv ", o.conv, ": expected direct, gemm, gemm2s, cudnn or auto");
#ifndef SCENELAB_WITH_CUDNN
  if (ctx_.conv == ConvAlgo::Cudnn) throw_error("--conv cudnn: this build has no cuDNN");
#endif
  SL_CUDA_CHECK(cudaGetDevice(&device_), "CUDA backend");
  cudaDeviceProp prop{};
  SL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_), "CUDA backend");
  name_ = prop.name;
  ctx_.stream = stream_.get();
  ctx_.side_stream = side_stream_.get();
  for (int i = 0; i < 5; ++i) {
    events_[i] = CudaEvent(cudaEventDisableTiming);
    ctx_.events[i] = events_[i].get();
  }
  SL_CUBLAS_CHECK(cublasCreate(&cublas_.h), "CUDA backend");
  ctx_.cublas = cublas_.h;
  SL_CUBLAS_CHECK(cublasSetStream(ctx_.cublas, ctx_.stream), "CUDA backend");
  cublas_workspace_.resize(size_t(32) << 20, "cuBLAS workspace");
  SL_CUBLAS_CHECK(cublasSetWorkspace(ctx_.cublas, cublas_workspace_.get(), cublas_workspace_.bytes()),
                  "CUDA backend");
  // fp32 GEMMs (and the 1x1 layers under fp16) stay on CUDA cores unless tf32 is asked for.
  SL_CUBLAS_CHECK(cublasSetMathMode(ctx_.cublas, ctx_.precision == Precision::TF32
                                                     ? CUBLAS_TF32_TENSOR_OP_MATH
                                                     : CUBLAS_DEFAULT_MATH),
                  "CUDA backend math mode");
#ifdef SCENELAB_WITH_CUDNN
  SL_CUDNN_CHECK(cudnnCreate(&cudnn_.h), "CUDA backend");
  ctx_.cudnn = cudnn_.h;
  SL_CUDNN_CHECK(cudnnSetStream(ctx_.cudnn, ctx_.stream), "CUDA backend");
#endif
  // Larger bands mean fewer, larger GEMMs (measured on an H100 at 3840x2160, fp32: 35.6 ms
  // with a 1 GiB bound, 34.1 with 2 GiB); a sixteenth of the memory keeps small GPUs safe.
  ctx_.conv_workspace_bytes = o.conv_workspace_bytes
                                  ? o.conv_workspace_bytes
                                  : std::min(size_t(2) << 30, size_t(prop.totalGlobalMem) / 16);
}

CudaBackend::~CudaBackend() = default;

const char* precision_name(Precision p) {
  return p == Precision::FP32 ? "fp32" : p == Precision::TF32 ? "tf32" : "fp16";
}

std::string CudaBackend::describe() const {
  return str_cat("cuda (", name_, ", ", precision_name(ctx_.precision), ")");
}

void CudaBackend::activate() const { SL_CUDA_CHECK(cudaSetDevice(device_), "CUDA backend"); }

BackendMemory CudaBackend::allocate(size_t bytes) const {
  void* p = nullptr;
  if (bytes) SL_CUDA_CHECK(cudaMalloc(&p, bytes), str_cat("allocating ", bytes, " bytes on the GPU"));
  return BackendMemory(p, [](void* q) {
    if (q) cudaFree(q);
  });
}

void CudaBackend::upload(void* dst, const void* src, size_t bytes) const {
  if (bytes)
    SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_.stream), "upload");
}

void CudaBackend::download(void* dst, const void* src, size_t bytes) const {
  if (!bytes) return;
  SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream), "download");
  SL_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream), "download");
}

BackendMemory CudaBackend::capture(const std::function<void()>& body) const {
  cudaGraph_t graph = nullptr;
  SL_CUDA_CHECK(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal),
                "CUDA graph capture");
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(ctx_.stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  SL_CUDA_CHECK(cudaStreamEndCapture(ctx_.stream, &graph), "CUDA graph capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  SL_CUDA_CHECK(err, "CUDA graph instantiation");
  return BackendMemory(static_cast<void*>(exec),
                       [](void* e) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(e)); });
}

void CudaBackend::replay(const BackendMemory& graph) const {
  SL_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph.get()), ctx_.stream),
                "CUDA graph replay");
}

void CudaBackend::synchronize() const {
  SL_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream), "CUDA backend synchronize");
}

}  // namespace scenelab
#endif
