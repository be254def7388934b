#include "job/pyramid_pool.h"

#include "engine/backend.h"

namespace scenelab {

PyramidPool::PyramidPool(const Model& m, std::string overrides, const std::string& device, const CudaOptions& cuda)
    : model_(m), overrides_(std::move(overrides)) {
  const bool gpu = device != "cpu" && cuda_device_count() > 0;
  if (gpu) {
    const std::string d = device.rfind("cuda:", 0) == 0 && device != "cuda:all" ? device : "cuda";
    gpu_backend_ = make_backend(d, 0, cuda);
    gpu_ = std::make_unique<PyramidDetector>(model_, *gpu_backend_, overrides_);
  }
}

PyramidPool::~PyramidPool() = default;

std::vector<nms::Detection> PyramidPool::detect(const Image8& img, PyramidTimes* t) {
  if (gpu_) {
    std::lock_guard<std::mutex> lock(gpu_mu_);
    return gpu_->detect(img.pixels.data(), img.height, img.width, img.channels, t);
  }
  Slot* slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& s = slots_[std::this_thread::get_id()];
    if (!s) {  // made whole, or not at all (a failure is the frame's, and retried next time)
      auto fresh = std::make_unique<Slot>();
      fresh->backend = std::make_unique<CpuBackend>(1);
      fresh->det = std::make_unique<PyramidDetector>(model_, *fresh->backend, overrides_);
      s = std::move(fresh);
    }
    slot = s.get();
  }
  return slot->det->detect(img.pixels.data(), img.height, img.width, img.channels, t);
}

}  // namespace scenelab
