// One checking macro for every CUDA runtime call: the error names the call, the file and line,
// and what was being done. RAII owners for device memory and streams.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.h"

// The one status check behind the CUDA, cuBLAS and cuDNN macros: `ok` is the library's success
// value, `describe` turns a status into text.
#define SL_CHECK_STATUS(call, what, ok, describe)                                          \
  do {                                                                                     \
    const auto sl_st_ = (call);                                                            \
    if (sl_st_ != (ok))                                                                    \
      ::scenelab::throw_error(what, ": ", #call, " failed: ", describe(sl_st_), " (",      \
                              __FILE__, ":", __LINE__, ")");                               \
  } while (0)

#define SL_CUDA_CHECK(call, what) SL_CHECK_STATUS(call, what, cudaSuccess, cudaGetErrorString)

namespace scenelab {

// Owner of memory from a CUDA allocator (Alloc: static allocate(void**, size_t) -> cudaError_t and
// release(void*)); move-only.
template <typename Alloc>
class CudaMemory {
 public:
  CudaMemory() = default;
  explicit CudaMemory(size_t bytes, const char* what = "CUDA memory") { resize(bytes, what); }
  CudaMemory(CudaMemory&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  CudaMemory& operator=(CudaMemory&& o) noexcept {
    release();
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = o.bytes_;
    return *this;
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  ~CudaMemory() { release(); }
  // Reallocates (contents lost) when `bytes` exceeds the current size.
  void resize(size_t bytes, const char* what = "CUDA memory") {
    if (bytes <= bytes_ && ptr_) return;
    release();
    if (bytes == 0) return;
    const cudaError_t err = Alloc::allocate(&ptr_, bytes);
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      cudaGetLastError();  // not sticky: cleared, so that later calls do not report it again
      ::scenelab::throw_error(what, ": ", Alloc::name, " of ", bytes, " bytes failed: ", cudaGetErrorString(err));
    }
    bytes_ = bytes;
  }
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (ptr_) Alloc::release(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Programmatic dependent launch (sm_90+): `kernel` may be launched while the kernel before it in
// the stream (or CUDA graph) finishes, hiding part of the gap between two short kernels; each of
// its threads calls pdl_wait() before touching global memory, which returns once that kernel has
// finished and its writes are visible (a no-op without a dependency). Measured on the H100, the
// reference net at 320x240 fp16 (bench_gops, same process): 60.5-61.2 us a pass against 62.3-62.9
// with plain launches; letting the next kernel launch as soon as this one's blocks have all
// started (griddepcontrol.launch_dependents) made it slower, 65.0-65.4 us. SCENELAB_NO_PDL=1
// launches them plainly (for such comparisons).
template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, const char* what,
                Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  static const bool off = std::getenv("SCENELAB_NO_PDL") != nullptr;  // for comparisons: plain launches
  cfg.numAttrs = off ? 0 : 1;
  SL_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), what);
}
#ifdef __CUDACC__
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
#endif

// Raises a kernel's dynamic shared memory limit on the current device to at least `bytes`, never
// lowering it: the limit belongs to the kernel (per device), not to the caller, so a lower value
// set for one launch made another's, needing more, fail (two GpuNms of different capacities;
// two threads launching one kernel with different sizes).
inline void allow_dynamic_smem(const void* kernel, size_t bytes, const char* what) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, size_t> allowed;  // (device, kernel) -> bytes
  int device = 0;
  SL_CUDA_CHECK(cudaGetDevice(&device), what);
  std::lock_guard<std::mutex> lock(mu);
  size_t& a = allowed[{device, kernel}];
  if (bytes <= a) return;
  SL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), what);
  a = bytes;
}

// An attribute of the current device, asked of the runtime once per (device, attribute): the
// launches that size their grids or shared memory by one ask on every call. false where there is
// no device (the runtime's error cleared: it is not sticky).
inline bool current_device_attribute(cudaDeviceAttr attr, int& value) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int> known;  // (device, attribute) -> value
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find({device, int(attr)});
  if (it == known.end()) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, attr, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    it = known.emplace(std::make_pair(device, int(attr)), v).first;
  }
  value = it->second;
  return true;
}

struct DeviceAlloc {
  static constexpr const char* name = "cudaMalloc";
  static cudaError_t allocate(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static void release(void* p) { cudaFree(p); }
};
struct PinnedAlloc {
  static constexpr const char* name = "cudaMallocHost";
  static cudaError_t allocate(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
  static void release(void* p) { cudaFreeHost(p); }
};
using DeviceBuffer = CudaMemory<DeviceAlloc>;  // device memory (cudaMalloc)
using PinnedBuffer = CudaMemory<PinnedAlloc>;  // page-locked host memory: asynchronous copies' host side

// A host-to-device copy that has landed when this returns (setup only, never the hot path).
// cudaMemcpy from pageable memory returns once the bytes are staged, before the DMA reaches the
// device, and it runs on the legacy default stream, which our non-blocking streams do not wait
// for: a kernel on one of them may read the buffer before the copy ends. Seen: the window head's
// GPU test lost detections while other processes kept the GPU busy (2026-11-26).
inline void upload_now(void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return;
  SL_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), what);
  SL_CUDA_CHECK(cudaStreamSynchronize(0), what);
}

// Device memory set to zero when this returns (setup only): for the same reason as upload_now,
// cudaMemset on the legacy default stream is then finished before any stream of ours runs.
inline void zero_now(void* dst, size_t bytes, const char* what) {
  if (bytes == 0) return;
  SL_CUDA_CHECK(cudaMemset(dst, 0, bytes), what);
  SL_CUDA_CHECK(cudaStreamSynchronize(0), what);
}

class CudaStream {
 public:
  CudaStream() { SL_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "CudaStream"); }
  ~CudaStream() {
    if (s_) cudaStreamDestroy(s_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() { SL_CUDA_CHECK(cudaEventCreate(&e_), "CudaEvent"); }
  explicit CudaEvent(unsigned flags) { SL_CUDA_CHECK(cudaEventCreateWithFlags(&e_, flags), "CudaEvent"); }
  ~CudaEvent() {
    if (e_) cudaEventDestroy(e_);
  }
  CudaEvent(CudaEvent&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept {
    if (this != &o) {
      if (e_) cudaEventDestroy(e_);
      e_ = std::exchange(o.e_, nullptr);
    }
    return *this;
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace scenelab
#endif  // SCENELAB_WITH_CUDA
