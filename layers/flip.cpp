// Mirror image of a map: `axis=w` (the default) reverses each row (left-right), `axis=h` the rows
// (top-bottom). flip(x) keeps x's geometry: the map is taken to lie where x lay (a mirrored pass
// starts from flip(image), whose pixels are that pass's image). flip(x, ref) mirrors x's geometry
// about the middle of ref's extent (ref's values are not read): a map of a pass on the mirrored
// image, flipped back, then lies where its pixels are on the image itself, which may not be where
// the plain pass's map lies (a stride-4 map of an image whose width is not a multiple of 4).
// Used by test-time mirroring (job/combine.h). f32 NCHW on both backends.
#include <algorithm>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class Flip : public Layer {
 public:
  explicit Flip(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"axis"});
    const std::string axis = d.attrs.get_str("axis", "w");
    SL_REQUIRE(axis == "w" || axis == "h", "flip '", d.name, "': axis must be w or h, got '", axis, "'");
    rows_ = axis == "h";
  }
  const char* type() const override { return "flip"; }
  int num_inputs() const override { return -1; }  // the map, and optionally a geometry reference
  Shape infer_shape(const std::vector<Shape>& in) const override {
    SL_REQUIRE(in.size() <= 2, "flip '", name(), "': one input and an optional reference, got ", in.size(), " inputs");
    return in[0];
  }
  bool reads_values(int input) const override { return input == 0; }
  // Pixel i of the flipped map is x's pixel n - 1 - i, centred at o + s (n - 1 - i); mirrored
  // about ref's middle c it lies at 2c - o - s (n - 1) + s i: that offset, the same stride.
  Geometry infer_geometry(const std::vector<Geometry>& in, const std::vector<Shape>& shapes) const override {
    Geometry g = in[0];
    if (in.size() < 2) return g;
    const Geometry& r = in[1];
    if (rows_)
      g.offset_y = 2 * r.offset_y + r.stride_y * (shapes[1].h - 1) - g.offset_y - g.stride_y * (shapes[0].h - 1);
    else
      g.offset_x = 2 * r.offset_x + r.stride_x * (shapes[1].w - 1) - g.offset_x - g.stride_x * (shapes[0].w - 1);
    return g;
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    const int h = x.shape.h, w = x.shape.w;
    parallel_for(int64_t(x.shape.n) * x.shape.c * h, a.threads, [&](int64_t r) {
      const size_t plane = size_t(r / h), row = size_t(r % h);
      const float* src = x.f32() + plane * x.shape.plane() + (rows_ ? size_t(h) - 1 - row : row) * size_t(w);
      float* dst = y.f32() + plane * y.shape.plane() + row * size_t(w);
      if (rows_)
        std::copy(src, src + w, dst);
      else
        std::reverse_copy(src, src + w, dst);
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::flip(a.in[0], a.out, rows_, ctx.stream);
  }
#endif

 private:
  bool rows_ = false;
};

}  // namespace

std::unique_ptr<Layer> make_flip(const NodeDesc& d) { return std::make_unique<Flip>(d); }

}  // namespace scenelab
