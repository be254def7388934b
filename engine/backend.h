// Backends execute a planned graph: they own the memory the plan places tensors in and the
// context layers run in. The CPU backend runs each layer's forward_cpu on parallel_for's threads
// (core/parallel.h); the CUDA backend (engine/cuda_backend.h) runs forward_cuda on one stream with cuBLAS.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace scenelab {

enum class DeviceKind { CPU, CUDA };

// How the CPU backend runs convolutions: im2col + GEMM (the paper's formulation), Winograd's
// minimal filtering (3x3, 5x5, 7x7 kernels), or auto: Winograd where it is the faster.
enum class CpuConv { Auto, Gemm, Winograd };
// --conv's value on the CPU: gemm, winograd; any other (the GPU's algorithms, auto) is auto.
CpuConv cpu_conv_of(const std::string& conv);

struct CudaContext;  // engine/cuda_backend.h

// Memory owned by a backend (host or device); freed by the backend that made it.
using BackendMemory = std::shared_ptr<void>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string describe() const = 0;  // e.g. "cpu (2 threads)"
  virtual int threads() const { return 1; }
  virtual CpuConv cpu_conv() const { return CpuConv::Auto; }
  // Makes this backend current for the calling thread (thread counts, device).
  virtual void activate() const = 0;
  // Memory in the backend's address space (64-byte aligned host memory on the CPU).
  virtual BackendMemory allocate(size_t bytes) const = 0;
  // Host <-> backend copies, ordered with the backend's work; download waits for completion.
  virtual void upload(void* dst, const void* src, size_t bytes) const = 0;
  virtual void download(void* dst, const void* src, size_t bytes) const = 0;
  // A copy within the backend's memory, ordered with its work (returns at once on the GPU).
  virtual void copy(void* dst, const void* src, size_t bytes) const;
  virtual void synchronize() const {}
  // Host memory the backend copies from and to fastest: page-locked on the GPU (its copies then
  // run asynchronously, beside compute), aligned memory on the CPU.
  virtual BackendMemory allocate_host(size_t bytes) const;
  // Copies ordered with the backend's work that return at once on the GPU (host memory from
  // allocate_host); synchronize() waits for them.
  virtual void upload_async(void* dst, const void* src, size_t bytes) const { upload(dst, src, bytes); }
  virtual void download_async(void* dst, const void* src, size_t bytes) const { download(dst, src, bytes); }
  // The conversions the planner places at a graph's edges, in the backend's memory, ordered with
  // its work: interleaved 8-bit pixels (n x h x w x c) -> planar floats (n x c x h x w) divided by
  // `divisor`.
  virtual void u8_to_float(const uint8_t* src, float* dst, int n, int c, int h, int w,
                           float divisor) const = 0;
  // The same from pixels of another size (n x sh x sw x c), resized bilinearly in 8 bits as
  // OpenCV's INTER_LINEAR_EXACT does (engine/resize_linear.h): an image pyramid's levels.
  virtual void resize_u8_to_float(const uint8_t* src, int sh, int sw, float* dst, int n, int c, int h,
                                  int w, float divisor) const = 0;
  // Any format into any other, same shape (the planner's conversions; floats into u8 are rounded
  // to nearest and clamped to 0..255, NaN -> 0).
  virtual void convert(const TensorView& src, const TensorView& dst) const = 0;
  // Timing marks: record_mark() notes when the backend's work reaches this point (a CUDA event on
  // the GPU, the host clock on the CPU); mark_ms(a, b) is the time between two recorded marks,
  // read after synchronize().
  virtual BackendMemory make_mark() const;
  virtual void record_mark(const BackendMemory& mark) const;
  virtual double mark_ms(const BackendMemory& a, const BackendMemory& b) const;
  // What a choice timed on this backend depends on (device, driver and library versions): plan
  // caches key by it. Empty where nothing is timed (the CPU).
  virtual std::string identity() const { return {}; }
  // Memory this backend's allocations can take now, in bytes (0 where unknown): the device's
  // free memory on the GPU, the host memory this process may still use on the CPU. A plan that
  // needs more fails by name before anything is allocated (Graph::plan).
  virtual size_t free_bytes() const { return 0; }
  // The CUDA context layers receive (nullptr on the CPU).
  virtual const CudaContext* cuda() const { return nullptr; }
  // Records what `body` enqueues as a replayable graph (a CUDA graph); nullptr where the
  // backend cannot (the CPU). replay() launches it.
  virtual BackendMemory capture(const std::function<void()>& /*body*/) const { return nullptr; }
  // The same for independent parts: `branches` recorded side by side (on the GPU each on one of
  // several streams, the heaviest by `weights` spread first), then `tail` after all of them, as
  // one replayable graph; nullptr where the backend cannot.
  virtual BackendMemory capture_branches(const std::vector<std::function<void()>>& /*branches*/,
                                         const std::vector<double>& /*weights*/,
                                         const std::function<void()>& /*tail*/) const {
    return nullptr;
  }
  virtual void replay(const BackendMemory& /*graph*/) const {}
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads = 0, CpuConv conv = CpuConv::Auto);  // threads 0: all hardware threads
  DeviceKind kind() const override { return DeviceKind::CPU; }
  std::string describe() const override;
  int threads() const override { return threads_; }
  CpuConv cpu_conv() const override { return conv_; }
  void activate() const override;
  BackendMemory allocate(size_t bytes) const override;  // throws Error, naming the size, on failure
  void upload(void* dst, const void* src, size_t bytes) const override;
  void download(void* dst, const void* src, size_t bytes) const override;
  // Host memory the process may still take (host_memory_headroom()).
  size_t free_bytes() const override;
  void u8_to_float(const uint8_t* src, float* dst, int n, int c, int h, int w,
                   float divisor) const override;
  void resize_u8_to_float(const uint8_t* src, int sh, int sw, float* dst, int n, int c, int h, int w,
                          float divisor) const override;
  void convert(const TensorView& src, const TensorView& dst) const override;

 private:
  int threads_;
  CpuConv conv_;
};

// Options of the CUDA backend (ignored by the CPU one).
struct CudaOptions {
  int device = -1;                  // CUDA device index; -1: the calling thread's current one
  std::string conv = "auto";        // direct | gemm | gemm2s | cudnn | split | auto (the CPU: cpu_conv_of)
  std::string precision = "fp32";   // fp32 | tf32 | fp16
  // Bound on a convolution layer's GPU workspace (im2col bands, cuDNN's workspace); 0: automatic,
  // 2 GiB or a sixteenth of the GPU's memory, whichever is smaller.
  size_t conv_workspace_bytes = 0;
  // cuDNN's runtime-fusion engines (convolution + bias + ReLU in one kernel, fp16/bf16): tried
  // at planning where the plain convolution takes 0.5 ms or more. Each such graph is compiled
  // when first planned in a process on a machine (about 1.1 s for 64 -> 256 at 1920x1080 on an
  // H100; cached by the driver after), and saves 0.29 ms a frame there: worth it for long runs,
  // not for one image. label_image turns it on for 10000 images or more and for videos.
  bool runtime_fusion = true;
};

// Host memory this process may still take, in bytes (0 where unknown): the least of what the
// system has available (MemAvailable + SwapFree), what its cgroup's memory limits leave (v2, up to
// the root; v1's limit) and what its address-space and data limits (RLIMIT_AS, RLIMIT_DATA) leave.
// Read from /proc and /sys on each call (not for hot paths). Linux; 0 elsewhere.
size_t host_memory_headroom();

// "cpu", "cuda", "cuda:N" (device N) or "auto" (cuda when built with it and a GPU is present,
// else cpu).
std::unique_ptr<Backend> make_backend(const std::string& device, int threads,
                                      const CudaOptions& cuda = CudaOptions{});
bool cuda_device_available();
int cuda_device_count();  // 0 without CUDA or a GPU

}  // namespace scenelab
