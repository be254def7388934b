// The sliding-window head (nms/sliding_window.h) on a planned graph's class scores where they lie:
// on a GPU the class's probability plane is computed there (kernels/layers_cuda.h
// class_probability) and slid there (nms::GpuWindowHead): only the fused boxes come back, not
// the scores; on the CPU from the scores in host memory (class_probabilities, then
// nms::detect_windows_cpu). Both compute the probabilities as class_probabilities does.
#pragma once
#include <memory>
#include <vector>

#include "engine/backend.h"
#include "engine/layer.h"
#include "engine/model.h"
#include "core/tensor.h"
#include "nms/sliding_window.h"

namespace scenelab {

// Class `cls`'s head settings: the head's defaults, then the model file's for that class
// (Model::detect, checked when the file was read; weights/FORMAT.md).
nms::WindowHeadOptions head_settings(const Model& m, int cls);

class ScoreMapHead {
 public:
  explicit ScoreMapHead(const Backend& backend);
  ~ScoreMapHead();
  ScoreMapHead(const ScoreMapHead&) = delete;
  ScoreMapHead& operator=(const ScoreMapHead&) = delete;

  // scores: a graph's view of its class scores (n x C x h x w, in the backend's memory and
  // format), g: where they lie on the image (image_w x image_h). Boxes of class `cls` in frame
  // `frame`, in NMS order. Runs on the backend's stream and waits for it (on the GPU, buffers
  // grow to the largest map seen; then nothing is allocated).
  std::vector<nms::Detection> detect(const TensorView& scores, int frame, int cls,
                                     const nms::WindowHeadOptions& o, const Geometry& g, int image_w,
                                     int image_h);

 private:
  struct Device;
  const Backend& backend_;
  std::unique_ptr<Device> dev_;
};

}  // namespace scenelab
