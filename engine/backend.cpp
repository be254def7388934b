#include "engine/backend.h"

#include <omp.h>

#include <Eigen/Core>
#include <cstring>
#include <thread>

#include "engine/error.h"
#include "engine/tensor.h"

#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include "engine/cuda_backend.h"
#endif

namespace scenelab {

CpuBackend::CpuBackend(int threads) {
  if (threads <= 0) threads = int(std::thread::hardware_concurrency());
  threads_ = threads > 0 ? threads : 1;
}

std::string CpuBackend::describe() const { return str_cat("cpu (", threads_, " threads)"); }

void CpuBackend::activate() const {
  omp_set_num_threads(threads_);
  Eigen::setNbThreads(threads_);
}

BackendMemory CpuBackend::allocate(size_t bytes) const {
  float* p = aligned_floats((bytes + sizeof(float) - 1) / sizeof(float)).release();
  return BackendMemory(p, [](void* q) { AlignedFree()(static_cast<float*>(q)); });
}

void CpuBackend::upload(void* dst, const void* src, size_t bytes) const {
  if (bytes) std::memcpy(dst, src, bytes);
}
void CpuBackend::download(void* dst, const void* src, size_t bytes) const {
  if (bytes) std::memcpy(dst, src, bytes);
}

bool cuda_device_available() {
#ifdef SCENELAB_WITH_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads,
                                      const CudaOptions& cuda) {
  if (device == "cpu") return std::make_unique<CpuBackend>(threads);
  if (device == "cuda" || device == "auto") {
#ifdef SCENELAB_WITH_CUDA
    if (cuda_device_available()) return std::make_unique<CudaBackend>(cuda);
    if (device == "auto") return std::make_unique<CpuBackend>(threads);
    throw_error("--device cuda: no CUDA device is available");
#else
    if (device == "auto") return std::make_unique<CpuBackend>(threads);
    (void)cuda;
    throw_error("--device cuda: this build has no CUDA support (built without a CUDA toolkit)");
#endif
  }
  throw_error("unknown device '", device, "' (expected cpu, cuda or auto)");
}

}  // namespace scenelab
