// Max pooling, k x k window, stride s (default k), no padding, floor output size (as PyTorch's
// default): Ho = (H - k) / s + 1.
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#include "layers/formats.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class MaxPool2d : public Layer {
 public:
  explicit MaxPool2d(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"k", "stride"});
    k_ = d.attrs.get_int("k", 2);
    s_ = d.attrs.get_int("stride", k_);
    SL_REQUIRE(k_ >= 1 && s_ >= 1, "maxpool2d '", name_, "': k and stride must be positive");
  }
  const char* type() const override { return "maxpool2d"; }
  Format format(const std::vector<Format>& in, const Backend& b) const override {
    return follow_on_gpu(in[0], b);
  }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    const Shape& s = in[0];
    SL_REQUIRE(s.h >= k_ && s.w >= k_, "maxpool2d '", name_, "' (", k_, "x", k_,
               ") needs an input of at least ", k_, "x", k_, ", got ", s.w, "x", s.h);
    return Shape(s.n, s.c, (s.h - k_) / s_ + 1, (s.w - k_) / s_ + 1);
  }
  Geometry infer_geometry(const std::vector<Geometry>& in,
                          const std::vector<Shape>& /*shapes*/) const override {
    return after_window(in[0], k_, s_);
  }
  Epilogue as_epilogue() const override { return {Epilogue::Kind::MaxPool, k_, s_}; }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    parallel_for(int64_t(y.shape.n) * y.shape.c, a.threads, [&](int64_t p) {
      const float* src = x.f32() + size_t(p) * x.shape.plane();
      float* dst = y.f32() + size_t(p) * y.shape.plane();
      for (int oy = 0; oy < y.shape.h; ++oy)
        for (int ox = 0; ox < y.shape.w; ++ox) {
          float m = -std::numeric_limits<float>::infinity();
          for (int dy = 0; dy < k_; ++dy) {
            const float* row = src + size_t(oy * s_ + dy) * x.shape.w + size_t(ox) * s_;
            for (int dx = 0; dx < k_; ++dx) m = std::max(m, row[dx]);
          }
          dst[size_t(oy) * y.shape.w + ox] = m;
        }
    });
  }

#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::maxpool2d(a.in[0], a.out, k_, s_, ctx.stream);
  }
#endif

 private:
  int k_ = 2, s_ = 2;
};

}  // namespace

std::unique_ptr<Layer> make_maxpool2d(const NodeDesc& d) { return std::make_unique<MaxPool2d>(d); }

}  // namespace scenelab
