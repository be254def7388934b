// Mirror image of a map: `axis=w` (the default) reverses each row (left-right), `axis=h` the rows
// (top-bottom). Used by test-time mirroring (engine/combine.h): the net runs on the mirrored image
// and its class map is mirrored back. f32 NCHW on both backends.
#include <algorithm>

#include "engine/error.h"
#include "engine/layer.h"
#include "engine/parallel.h"
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
  Shape infer_shape(const std::vector<Shape>& in) const override { return in[0]; }
  // Geometry: the input's (Layer's default). Inside a mirrored pass every map is placed on the
  // mirrored image, so the pass's full-resolution scores flip back exactly; a coarse map flipped
  // back lies where the plain pass's does only where its pixel centres are symmetric about the
  // image's middle (engine/combine.h).
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
