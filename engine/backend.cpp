#include "engine/backend.h"

#include <omp.h>

#include <Eigen/Core>
#include <thread>

#include "engine/error.h"

#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>
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

bool cuda_device_available() {
#ifdef SCENELAB_WITH_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
  if (device == "cpu") return std::make_unique<CpuBackend>(threads);
  if (device == "cuda" || device == "auto") {
    if (device == "auto") return std::make_unique<CpuBackend>(threads);  // CUDA backend: issue 3
#ifdef SCENELAB_WITH_CUDA
    throw_error("--device cuda: the CUDA backend is not available yet in this build");
#else
    throw_error("--device cuda: this build has no CUDA support (built without a CUDA toolkit)");
#endif
  }
  throw_error("unknown device '", device, "' (expected cpu, cuda or auto)");
}

}  // namespace scenelab
