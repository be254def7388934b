// Pyramid detectors (job/pyramid_detector.h) for the job's finishing threads: on the CPU one per
// thread (one core each, the threads run side by side); on a GPU one, taken in turn, on the
// job's device with its options (precision, convolution algorithms).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend.h"
#include "engine/image_io.h"
#include "engine/model.h"
#include "job/pyramid_detector.h"

namespace scenelab {

class PyramidPool {
 public:
  // device: as PipelineOptions::device (cpu, cuda, cuda:N, cuda:all, auto).
  PyramidPool(const Model& m, std::string overrides, const std::string& device, const CudaOptions& cuda);
  ~PyramidPool();
  std::string describe() const { return gpu_ ? "GPU" : "CPU, one core per finishing thread"; }
  std::vector<nms::Detection> detect(const Image8& img, PyramidTimes* t = nullptr);

 private:
  struct Slot {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<PyramidDetector> det;
  };
  const Model& model_;
  std::string overrides_;
  std::unique_ptr<Backend> gpu_backend_;
  std::unique_ptr<PyramidDetector> gpu_;
  std::mutex gpu_mu_, mu_;
  std::map<std::thread::id, std::unique_ptr<Slot>> slots_;
};

}  // namespace scenelab
