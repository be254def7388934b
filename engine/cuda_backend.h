// The CUDA backend: one stream, cuBLAS and cuDNN handles owned here, device memory through
// cudaMalloc (planned once per input size by the graph). Layers receive a CudaContext.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#ifdef SCENELAB_WITH_CUDNN
#include <cudnn.h>
#endif

#include <string>

#include "engine/backend.h"
#include "core/cuda_check.h"

#define SL_CUBLAS_CHECK(call, what) \
  SL_CHECK_STATUS(call, what, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)

#ifdef SCENELAB_WITH_CUDNN
#define SL_CUDNN_CHECK(call, what) \
  SL_CHECK_STATUS(call, what, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)
#endif

namespace scenelab {

// split: fp32 on TF32 tensor cores, each float as two pieces and three products summed by one
// cuDNN convolution ("3xTF32", kernels/conv_cuda.h): fp32-accurate at any precision setting.
enum class ConvAlgo { Direct, Gemm, Gemm2s, Cudnn, Split, Auto };
// fp32: single precision, the default: within 1e-4 of the CPU path (the paper's algorithms on
//       CUDA cores; auto also times split, 3xTF32 on tensor cores, and takes it where faster);
// tf32: tensor cores on fp32 data (10-bit mantissa products, fp32 accumulation);
// fp16, bf16: activations between layers in half precision (f16 or bf16 NHWC) where the
//       convolutions run on cuDNN (--conv auto or cudnn), tensor cores with fp32 accumulation;
//       the paper's algorithms keep f32 NCHW tensors (gemm/gemm2s: half operands under fp16).
enum class Precision { FP32, TF32, FP16, BF16 };
// The format the GPU layers compute in at this precision and convolution algorithm.
Format activation_format(const CudaContext& ctx);
const char* precision_name(Precision p);

struct CudaContext {
  cudaStream_t stream = nullptr;
  // The second stream of the paper's two-stream GEMM (im2col of band i+1 beside the GEMM of
  // band i) and the events ordering the two: [0] start, [1..2] im2col done, [3..4] GEMM done.
  cudaStream_t side_stream = nullptr;
  cudaEvent_t events[5] = {};
  cublasHandle_t cublas = nullptr;
#ifdef SCENELAB_WITH_CUDNN
  cudnnHandle_t cudnn = nullptr;
#endif
  ConvAlgo conv = ConvAlgo::Auto;
  Precision precision = Precision::FP32;
  size_t conv_workspace_bytes = 0;
  bool runtime_fusion = true;  // CudaOptions::runtime_fusion
  // cuDNN's graph API for convolutions (f16/bf16 NHWC, and the split fp32 candidate of auto);
  // false: its legacy API alone. SCENELAB_CUDNN_LEGACY=1 sets it false: a diagnostic switch
  // (compute-sanitizer's racecheck never finishes in a graph engine's Hopper kernel,
  // docs/RELIABILITY.md), not a speed setting.
  bool cudnn_graph = true;
  // Every layer on the engine's own kernels: convolutions on the direct kernel (1x1 too), fp32
  // NCHW, so that no cuBLAS or cuDNN kernel runs, whatever the options say. SCENELAB_OWN_KERNELS=1
  // sets it: a diagnostic switch for compute-sanitizer over whole networks (racecheck fails
  // inside cuBLAS's Hopper GEMMs, docs/RELIABILITY.md), not a speed setting.
  bool own_kernels = false;
  // The convolution algorithms `auto` has run on this backend (bit 1 << ConvAlgo): their kernels
  // are loaded, so a warm-up's time is theirs, not a first use's (planning skips on it sooner).
  mutable unsigned conv_warmed = 0;
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
  void copy(void* dst, const void* src, size_t bytes) const override;
  void synchronize() const override;
  BackendMemory allocate_host(size_t bytes) const override;
  void upload_async(void* dst, const void* src, size_t bytes) const override;
  void download_async(void* dst, const void* src, size_t bytes) const override;
  void u8_to_float(const uint8_t* src, float* dst, int n, int c, int h, int w,
                   float divisor) const override;
  void resize_u8_to_float(const uint8_t* src, int sh, int sw, float* dst, int n, int c, int h, int w,
                          float divisor) const override;
  void convert(const TensorView& src, const TensorView& dst) const override;
  BackendMemory make_mark() const override;
  void record_mark(const BackendMemory& mark) const override;
  double mark_ms(const BackendMemory& a, const BackendMemory& b) const override;
  std::string identity() const override { return identity_; }
  size_t free_bytes() const override;
  int device() const { return device_; }
  const CudaContext* cuda() const override { return &ctx_; }
  BackendMemory capture(const std::function<void()>& body) const override;
  BackendMemory capture_branches(const std::vector<std::function<void()>>& branches,
                                 const std::vector<double>& weights,
                                 const std::function<void()>& tail) const override;
  void replay(const BackendMemory& graph) const override;

 private:
  // Points the context (and the cuBLAS / cuDNN handles) at another stream while one branch is
  // recorded.
  void use_stream(cudaStream_t s) const;
  // Makes the chosen device current before the members below (stream, events, handles) are
  // created on it.
  struct DeviceSelect {
    explicit DeviceSelect(int device);
  } select_;
  int device_ = 0;
  std::string name_, identity_;
  CudaStream stream_, side_stream_;
  CudaEvent events_[5];
  // What synchronize() and download() wait on: a blocking-sync event, so the waiting thread
  // sleeps. (A stream synchronize spins a core under CUDA's default scheduling with one context
  // per process: the pipeline's two workers per GPU took two of the cores its pool encodes on.)
  CudaEvent done_{cudaEventBlockingSync | cudaEventDisableTiming};
  // capture_branches' streams and their join events, made at its first use.
  static constexpr int kBranchStreams = 8;
  mutable std::vector<std::unique_ptr<CudaStream>> branch_streams_;
  mutable std::vector<CudaEvent> branch_events_;  // [0]: the fork, then one join a stream
  // Handle owners: members, so a constructor that throws half-way still releases them.
  struct CublasOwner {
    cublasHandle_t h = nullptr;
    ~CublasOwner() { if (h) cublasDestroy(h); }
  } cublas_;
#ifdef SCENELAB_WITH_CUDNN
  struct CudnnOwner {
    cudnnHandle_t h = nullptr;
    ~CudnnOwner() { if (h) cudnnDestroy(h); }
  } cudnn_;
#endif
  DeviceBuffer cublas_workspace_;  // given to cuBLAS so it never allocates (graph capture)
  mutable CudaContext ctx_;  // its stream moves to a branch stream while capture_branches records
};

}  // namespace scenelab
#endif
