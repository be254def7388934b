#include "job/score_map_head.h"

#include "core/error.h"
#include "job/labeler.h"

#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "core/cuda_check.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {

nms::WindowHeadOptions head_settings(const Model& m, int cls) {
  SL_REQUIRE(cls >= 0 && size_t(cls) < m.class_names.size(), "head_settings: no class ", cls);
  nms::WindowHeadOptions o;
  if (auto it = m.detect.find(m.class_names[size_t(cls)]); it != m.detect.end()) nms::parse_window_spec(it->second, o);
  return o;
}

#ifdef SCENELAB_WITH_CUDA
struct ScoreMapHead::Device {
  DeviceBuffer prob;
  size_t plane = 0;
  nms::GpuWindowHead head;
};
#else
struct ScoreMapHead::Device {};
#endif

ScoreMapHead::ScoreMapHead(const Backend& backend) : backend_(backend) {}
ScoreMapHead::~ScoreMapHead() = default;

std::vector<nms::Detection> ScoreMapHead::detect(const TensorView& scores, int frame, int cls,
                                                 const nms::WindowHeadOptions& o, const Geometry& g,
                                                 int image_w, int image_h) {
  const Shape& s = scores.shape;
  SL_REQUIRE(frame >= 0 && frame < s.n, "detection head: frame ", frame, " of a batch of ", s.n);
  SL_REQUIRE(cls >= 0 && cls < s.c, "detection head: class ", cls, " out of range 0..", s.c - 1);
  const nms::MapGeometry mg{g.stride_y, g.stride_x, g.offset_y, g.offset_x};
  if (const CudaContext* ctx = backend_.cuda()) {
#ifdef SCENELAB_WITH_CUDA
    if (!dev_) dev_ = std::make_unique<Device>();
    const size_t plane = s.plane();
    if (plane > dev_->plane) {
      dev_->prob.resize(plane * sizeof(float), "detection head probabilities");
      dev_->plane = plane;
    }
    cuda::class_probability(scores, frame, cls, dev_->prob.get<float>(), ctx->stream);
    dev_->head.reserve(s.h, s.w, o);  // grows only for a larger map or more windows
    return dev_->head.detect(dev_->prob.get<float>(), s.h, s.w, cls, o, mg, image_w, image_h, ctx->stream);
#else
    (void)ctx;
#endif
  }
  SL_REQUIRE(scores.format == Format{}, "detection head: host scores must be f32 NCHW, got ", scores.format.str());
  TensorView one = scores;
  one.shape.n = 1;
  one.data = scores.channel(frame, 0);
  const auto p = class_probabilities(one, {cls});
  return nms::detect_windows_cpu(p[0].data(), s.h, s.w, cls, o, mg, image_w, image_h);
}

}  // namespace scenelab
