// Backends execute a planned graph: they own the memory the plan places tensors in and the
// context layers run in. The CPU backend runs each layer's forward_cpu with OpenMP and Eigen
// threads; the CUDA backend (engine/cuda_backend.h) runs forward_cuda on one stream with cuBLAS.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace scenelab {

enum class DeviceKind { CPU, CUDA };

struct CudaContext;  // engine/cuda_backend.h

// Memory owned by a backend (host or device); freed by the backend that made it.
using BackendMemory = std::shared_ptr<void>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string describe() const = 0;  // e.g. "cpu (2 threads)"
  virtual int threads() const { return 1; }
  // Makes this backend current for the calling thread (thread counts, device).
  virtual void activate() const = 0;
  // Memory in the backend's address space (64-byte aligned host memory on the CPU).
  virtual BackendMemory allocate(size_t bytes) const = 0;
  // Host <-> backend copies, ordered with the backend's work; download waits for completion.
  virtual void upload(void* dst, const void* src, size_t bytes) const = 0;
  virtual void download(void* dst, const void* src, size_t bytes) const = 0;
  virtual void synchronize() const {}
  // The CUDA context layers receive (nullptr on the CPU).
  virtual const CudaContext* cuda() const { return nullptr; }
  // Records what `body` enqueues as a replayable graph (a CUDA graph); nullptr where the
  // backend cannot (the CPU). replay() launches it.
  virtual BackendMemory capture(const std::function<void()>& /*body*/) const { return nullptr; }
  virtual void replay(const BackendMemory& /*graph*/) const {}
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads = 0);  // 0: all hardware threads
  DeviceKind kind() const override { return DeviceKind::CPU; }
  std::string describe() const override;
  int threads() const override { return threads_; }
  void activate() const override;
  BackendMemory allocate(size_t bytes) const override;
  void upload(void* dst, const void* src, size_t bytes) const override;
  void download(void* dst, const void* src, size_t bytes) const override;

 private:
  int threads_;
};

// Options of the CUDA backend (ignored by the CPU one).
struct CudaOptions {
  std::string conv = "auto";        // direct | gemm | gemm2s | cudnn | auto
  std::string precision = "fp32";   // fp32 | tf32 | fp16
  // Bound on a convolution layer's GPU workspace (im2col bands, cuDNN's workspace); 0: automatic,
  // 2 GiB or a sixteenth of the GPU's memory, whichever is smaller.
  size_t conv_workspace_bytes = 0;
};

// "cpu", "cuda" or "auto" (cuda when built with it and a GPU is present, else cpu).
std::unique_ptr<Backend> make_backend(const std::string& device, int threads,
                                      const CudaOptions& cuda = CudaOptions{});
bool cuda_device_available();

}  // namespace scenelab
