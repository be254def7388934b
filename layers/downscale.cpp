// Image pyramid step: average of each f x f block (f = factor, 2 or 4 in the paper's multi-scale
// net), floor output size, as PyTorch's avg_pool2d(kernel=f, stride=f).
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

class Downscale : public Layer {
 public:
  explicit Downscale(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"factor"});
    f_ = d.attrs.get_int("factor");
    SL_REQUIRE(f_ >= 1, "downscale '", name_, "': factor must be positive");
  }
  const char* type() const override { return "downscale"; }
  Format format(const std::vector<Format>& in, const Backend& b) const override {
    return follow_on_gpu(in[0], b);
  }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    const Shape& s = in[0];
    SL_REQUIRE(s.h >= f_ && s.w >= f_, "downscale '", name_, "' by ", f_,
               " needs an input of at least ", f_, "x", f_, ", got ", s.w, "x", s.h);
    return Shape(s.n, s.c, s.h / f_, s.w / f_);
  }
  Geometry infer_geometry(const std::vector<Geometry>& in,
                          const std::vector<Shape>& /*shapes*/) const override {
    return after_window(in[0], f_, f_);
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    const float inv = 1.f / float(f_ * f_);
    parallel_for(int64_t(y.shape.n) * y.shape.c, a.threads, [&](int64_t p) {
      const float* src = x.f32() + size_t(p) * x.shape.plane();
      float* dst = y.f32() + size_t(p) * y.shape.plane();
      for (int oy = 0; oy < y.shape.h; ++oy)
        for (int ox = 0; ox < y.shape.w; ++ox) {
          float s = 0;
          for (int dy = 0; dy < f_; ++dy) {
            const float* row = src + size_t(oy * f_ + dy) * x.shape.w + size_t(ox) * f_;
            for (int dx = 0; dx < f_; ++dx) s += row[dx];
          }
          dst[size_t(oy) * y.shape.w + ox] = s * inv;
        }
    });
  }

#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::downscale(a.in[0], a.out, f_, ctx.stream);
  }
#endif

 private:
  int f_ = 2;
};

}  // namespace

std::unique_ptr<Layer> make_downscale(const NodeDesc& d) { return std::make_unique<Downscale>(d); }

}  // namespace scenelab
