#include "engine/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#ifdef SCENELAB_WITH_CUDA
#include "core/error.h"
#include "engine/convert_cuda.h"
#include "engine/resize_cuda.h"

namespace scenelab {

#ifdef SCENELAB_WITH_CUDNN
namespace {
// One query on a small half and float convolution: cuDNN's libraries are loaded after it. Its
// statuses are not errors: a query failing here only leaves the loading to the first plan.
void warm_up_cudnn(cudnnHandle_t h) {
  for (cudnnDataType_t t : {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT}) {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t c = nullptr;
    const auto f = t == CUDNN_DATA_HALF ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    bool ok = cudnnCreateTensorDescriptor(&x) == CUDNN_STATUS_SUCCESS &&
              cudnnCreateTensorDescriptor(&y) == CUDNN_STATUS_SUCCESS &&
              cudnnCreateFilterDescriptor(&w) == CUDNN_STATUS_SUCCESS &&
              cudnnCreateConvolutionDescriptor(&c) == CUDNN_STATUS_SUCCESS &&
              cudnnSetTensor4dDescriptor(x, f, t, 1, 16, 32, 32) == CUDNN_STATUS_SUCCESS &&
              cudnnSetTensor4dDescriptor(y, f, t, 1, 16, 26, 26) == CUDNN_STATUS_SUCCESS &&
              cudnnSetFilter4dDescriptor(w, t, f, 16, 16, 7, 7) == CUDNN_STATUS_SUCCESS &&
              cudnnSetConvolution2dDescriptor(c, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS;
    if (ok) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int n = 0;
      size_t bytes = 0;
      cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf);
      cudnnGetConvolutionForwardWorkspaceSize(h, x, w, c, y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                              &bytes);
    }
    if (c) cudnnDestroyConvolutionDescriptor(c);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
}
}  // namespace
#endif

// A diagnostic switch from the environment: set, non-empty and not "0".
static bool env_switch(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}

CudaBackend::DeviceSelect::DeviceSelect(int device) {
  if (device >= 0) SL_CUDA_CHECK(cudaSetDevice(device), str_cat("CUDA backend on device ", device));
}

CudaBackend::CudaBackend(const CudaOptions& o) : select_(o.device) {
  // Options first: nothing is created yet if they are wrong.
  if (o.precision == "fp32") ctx_.precision = Precision::FP32;
  else if (o.precision == "tf32") ctx_.precision = Precision::TF32;
  else if (o.precision == "fp16") ctx_.precision = Precision::FP16;
  else if (o.precision == "bf16") ctx_.precision = Precision::BF16;
  else throw_error("--precision ", o.precision, ": expected fp32, tf32, fp16 or bf16");
  if (o.conv == "direct") ctx_.conv = ConvAlgo::Direct;
  else if (o.conv == "gemm") ctx_.conv = ConvAlgo::Gemm;
  else if (o.conv == "gemm2s") ctx_.conv = ConvAlgo::Gemm2s;
  else if (o.conv == "cudnn") ctx_.conv = ConvAlgo::Cudnn;
  else if (o.conv == "split") ctx_.conv = ConvAlgo::Split;
  else if (o.conv == "auto") ctx_.conv = ConvAlgo::Auto;
  else throw_error("--conv ", o.conv, ": expected direct, gemm, gemm2s, cudnn, split or auto (winograd: the CPU's)");
#ifndef SCENELAB_WITH_CUDNN
  if (ctx_.conv == ConvAlgo::Cudnn || ctx_.conv == ConvAlgo::Split)
    throw_error("--conv ", o.conv, ": this build has no cuDNN");
  if (ctx_.precision == Precision::BF16) throw_error("--precision bf16 runs on cuDNN, which this build has not");
#endif
  if (ctx_.precision == Precision::BF16 && (ctx_.conv == ConvAlgo::Gemm || ctx_.conv == ConvAlgo::Gemm2s))
    throw_error("--precision bf16 runs its convolutions on cuDNN (--conv auto or cudnn); --conv ",
                o.conv, " has fp32 and fp16 only");
  if (env_switch("SCENELAB_OWN_KERNELS")) {
    ctx_.own_kernels = true;
    ctx_.conv = ConvAlgo::Direct;  // NCHW fp32 tensors: no half-precision NHWC path, no fusion
    ctx_.cudnn_graph = false;      // that needs cuBLAS or cuDNN
  }
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
  // Zeroed once, at creation: compute-sanitizer initcheck reported cuBLASLt's split-K reduction
  // reading parts of it that nothing had written (docs/RELIABILITY.md); zeroed, it reports none.
  SL_CUDA_CHECK(cudaMemsetAsync(cublas_workspace_.get(), 0, cublas_workspace_.bytes(), ctx_.stream),
                "cuBLAS workspace");
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
  // cuDNN loads its sub-libraries at the first convolution query: done here, once per
  // backend, where the convolution may use cuDNN, so planning a size does not pay for it.
  if (ctx_.conv != ConvAlgo::Direct && ctx_.conv != ConvAlgo::Gemm && ctx_.conv != ConvAlgo::Gemm2s)
    warm_up_cudnn(ctx_.cudnn);
#endif
  int driver = 0, runtime = 0, cublas_version = 0;
  SL_CUDA_CHECK(cudaDriverGetVersion(&driver), "CUDA backend");
  SL_CUDA_CHECK(cudaRuntimeGetVersion(&runtime), "CUDA backend");
  SL_CUBLAS_CHECK(cublasGetVersion(ctx_.cublas, &cublas_version), "CUDA backend");
  identity_ = str_cat(name_, "; sm_", prop.major, prop.minor, "; ", prop.multiProcessorCount,
                      " SMs; driver ", driver, "; runtime ", runtime, "; cuBLAS ", cublas_version);
#ifdef SCENELAB_WITH_CUDNN
  identity_ += str_cat("; cuDNN ", cudnnGetVersion());
#endif
  // What a timed choice depends on besides the device: precision, algorithm, workspace bound.
  identity_ += str_cat(" | precision=", o.precision, " | conv=", o.conv);
  // The candidates auto times (a plan cached before split existed is timed anew).
  if (ctx_.conv == ConvAlgo::Auto) identity_ += " | candidates=direct,gemm,gemm2s,cudnn,split,mma";
  // Larger bands mean fewer, larger GEMMs (measured on an H100 at 3840x2160, fp32: 35.6 ms
  // with a 1 GiB bound, 34.1 with 2 GiB); a sixteenth of the memory keeps small GPUs safe.
  ctx_.conv_workspace_bytes = o.conv_workspace_bytes
                                  ? o.conv_workspace_bytes
                                  : std::min(size_t(2) << 30, size_t(prop.totalGlobalMem) / 16);
  identity_ += str_cat(" | workspace=", ctx_.conv_workspace_bytes);
  ctx_.runtime_fusion = o.runtime_fusion;
  if (!o.runtime_fusion) identity_ += " | runtime-fusion=off";
  if (env_switch("SCENELAB_CUDNN_LEGACY")) {
    ctx_.cudnn_graph = false;
    identity_ += " | cudnn=legacy";  // its timed choices are cached apart
  }
  if (ctx_.own_kernels) identity_ += " | kernels=own";
}

CudaBackend::~CudaBackend() = default;

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
  }
  return "?";
}

Format activation_format(const CudaContext& ctx) {
#ifdef SCENELAB_WITH_CUDNN
  const bool nhwc = ctx.conv == ConvAlgo::Auto || ctx.conv == ConvAlgo::Cudnn;
  if (nhwc && ctx.precision == Precision::FP16) return Format{DType::F16, Layout::NHWC};
  if (nhwc && ctx.precision == Precision::BF16) return Format{DType::BF16, Layout::NHWC};
#else
  (void)ctx;
#endif
  return Format{};
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

void CudaBackend::copy(void* dst, const void* src, size_t bytes) const {
  if (bytes) SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_.stream), "device copy");
}

void CudaBackend::download(void* dst, const void* src, size_t bytes) const {
  if (!bytes) return;
  SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream), "download");
  synchronize();
}

namespace {

// Ends the capture on `s` and instantiates what it recorded.
BackendMemory end_capture(cudaStream_t s) {
  cudaGraph_t graph = nullptr;
  SL_CUDA_CHECK(cudaStreamEndCapture(s, &graph), "CUDA graph capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  SL_CUDA_CHECK(err, "CUDA graph instantiation");
  return BackendMemory(static_cast<void*>(exec),
                       [](void* e) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(e)); });
}

}  // namespace

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
  return end_capture(ctx_.stream);
}

void CudaBackend::use_stream(cudaStream_t s) const {
  ctx_.stream = s;
  SL_CUBLAS_CHECK(cublasSetStream(ctx_.cublas, s), "CUDA backend: branch stream");
#ifdef SCENELAB_WITH_CUDNN
  if (ctx_.cudnn) SL_CUDNN_CHECK(cudnnSetStream(ctx_.cudnn, s), "CUDA backend: branch stream");
#endif
}

BackendMemory CudaBackend::capture_branches(const std::vector<std::function<void()>>& branches,
                                            const std::vector<double>& weights,
                                            const std::function<void()>& tail) const {
  SL_REQUIRE(weights.size() == branches.size(), "capture_branches: ", weights.size(), " weights for ",
             branches.size(), " branches");
  const int k = std::max(1, std::min<int>(kBranchStreams, int(branches.size())));
  while (int(branch_streams_.size()) < k) branch_streams_.push_back(std::make_unique<CudaStream>());
  while (int(branch_events_.size()) < k + 1) branch_events_.emplace_back(cudaEventDisableTiming);
  // Heaviest first, each onto the stream with the least weight so far.
  std::vector<size_t> order(branches.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weights[a] > weights[b]; });
  std::vector<double> load(size_t(k), 0.0);
  const cudaStream_t main = stream_.get();
  cudaGraph_t graph = nullptr;
  SL_CUDA_CHECK(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal), "CUDA graph capture");
  try {
    SL_CUDA_CHECK(cudaEventRecord(branch_events_[0].get(), main), "CUDA graph capture: fork");
    for (int j = 0; j < k; ++j)
      SL_CUDA_CHECK(cudaStreamWaitEvent(branch_streams_[size_t(j)]->get(), branch_events_[0].get(), 0),
                    "CUDA graph capture: fork");
    for (size_t i : order) {
      const size_t j = size_t(std::min_element(load.begin(), load.end()) - load.begin());
      load[j] += weights[i];
      use_stream(branch_streams_[j]->get());
      branches[i]();
      use_stream(main);
    }
    for (int j = 0; j < k; ++j) {
      SL_CUDA_CHECK(cudaEventRecord(branch_events_[size_t(j) + 1].get(), branch_streams_[size_t(j)]->get()),
                    "CUDA graph capture: join");
      SL_CUDA_CHECK(cudaStreamWaitEvent(main, branch_events_[size_t(j) + 1].get(), 0), "CUDA graph capture: join");
    }
    tail();
  } catch (...) {
    ctx_.stream = main;  // restored without throwing: the capture must end
    cublasSetStream(ctx_.cublas, main);
#ifdef SCENELAB_WITH_CUDNN
    if (ctx_.cudnn) cudnnSetStream(ctx_.cudnn, main);
#endif
    cudaStreamEndCapture(main, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  return end_capture(main);
}

void CudaBackend::replay(const BackendMemory& graph) const {
  SL_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph.get()), ctx_.stream),
                "CUDA graph replay");
}

BackendMemory CudaBackend::allocate_host(size_t bytes) const {
  void* p = nullptr;
  if (bytes)
    SL_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable),
                  str_cat("allocating ", bytes, " bytes of page-locked host memory"));
  return BackendMemory(p, [](void* q) {
    if (q) cudaFreeHost(q);
  });
}

void CudaBackend::upload_async(void* dst, const void* src, size_t bytes) const {
  upload(dst, src, bytes);  // cudaMemcpyAsync: asynchronous from page-locked memory
}

void CudaBackend::download_async(void* dst, const void* src, size_t bytes) const {
  if (bytes)
    SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream), "download");
}

void CudaBackend::u8_to_float(const uint8_t* src, float* dst, int n, int c, int h, int w,
                              float divisor) const {
  cuda::u8_hwc_to_f32_nchw(src, dst, n, c, h, w, divisor, ctx_.stream);
}

void CudaBackend::resize_u8_to_float(const uint8_t* src, int sh, int sw, float* dst, int n, int c, int h,
                                     int w, float divisor) const {
  cuda::resize_u8_to_f32(src, n, c, sh, sw, dst, h, w, divisor, ctx_.stream);
}

void CudaBackend::convert(const TensorView& src, const TensorView& dst) const {
  SL_REQUIRE(src.shape == dst.shape, "convert: shapes ", src.shape.str(), " and ", dst.shape.str());
  cuda::convert(src.data, src.format, dst.data, dst.format, src.shape.n, src.shape.c,
                src.shape.plane(), ctx_.stream);
}

BackendMemory CudaBackend::make_mark() const {
  cudaEvent_t e = nullptr;
  SL_CUDA_CHECK(cudaEventCreate(&e), "timing mark");
  return BackendMemory(static_cast<void*>(e), [](void* q) { cudaEventDestroy(static_cast<cudaEvent_t>(q)); });
}

void CudaBackend::record_mark(const BackendMemory& m) const {
  SL_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(m.get()), ctx_.stream), "timing mark");
}

double CudaBackend::mark_ms(const BackendMemory& a, const BackendMemory& b) const {
  float ms = 0;
  SL_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(a.get()),
                                     static_cast<cudaEvent_t>(b.get())),
                "timing mark");
  return ms;
}

size_t CudaBackend::free_bytes() const {
  size_t free = 0, total = 0;
  SL_CUDA_CHECK(cudaMemGetInfo(&free, &total), "CUDA backend memory query");
  return free;
}

void CudaBackend::synchronize() const {
  SL_CUDA_CHECK(cudaEventRecord(done_.get(), ctx_.stream), "CUDA backend synchronize");
  SL_CUDA_CHECK(cudaEventSynchronize(done_.get()), "CUDA backend synchronize");
}

}  // namespace scenelab
#endif
