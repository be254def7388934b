// Two maps combined element by element: y = a + b, a - b or a * b (op=add|sub|mul); b has a's
// shape, or one value a channel (n x c x 1 x 1, e.g. a squeeze-and-excitation's weights), spread
// over the plane. The ONNX importer's Add, Sub and Mul of two computed values
// (layers/eltwise_math.h). A following ReLU is fused (a residual block's sum and its ReLU).
#include <algorithm>

#include "core/error.h"
#include "core/parallel.h"
#include "engine/layer.h"
#include "layers/eltwise_math.h"
#include "layers/formats.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class Binary : public Layer {
 public:
  explicit Binary(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"op"});
    const std::string op = d.attrs.get_str("op");
    SL_REQUIRE(op == "add" || op == "sub" || op == "mul", "binary '", name_, "': op=", op, " (add, sub or mul)");
    op_ = op == "add" ? BinaryOp::Add : op == "sub" ? BinaryOp::Sub : BinaryOp::Mul;
  }
  const char* type() const override { return "binary"; }
  int num_inputs() const override { return 2; }
  Format format(const std::vector<Format>& in, const Backend& b) const override { return follow_on_gpu(in[0], b); }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    const Shape &a = in[0], &b = in[1];
    const bool same = a == b, per_channel = b.n == a.n && b.c == a.c && b.h == 1 && b.w == 1;
    SL_REQUIRE(same || per_channel, "binary '", name_, "': input 1 is ", b.str(), "; it must be ", a.str(),
               " as input 0, or ", Shape(a.n, a.c, 1, 1).str());
    return a;
  }
  bool can_fuse(const std::vector<Epilogue>& chain, const std::vector<Shape>&, const std::vector<Format>&,
                const Backend&) const override {
    return chain.size() == 1 && chain[0].kind == Epilogue::Kind::Relu;
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &z = a.in[1], &y = a.out;
    const size_t plane = x.shape.plane();
    const bool spread = z.shape.plane() == 1 && plane != 1, relu = a.fused_relu;
    parallel_for(int64_t(x.shape.n) * x.shape.c, a.threads, [&](int64_t p) {
      const float* s = x.f32() + size_t(p) * plane;
      const float* t = z.f32() + (spread ? size_t(p) : size_t(p) * plane);
      float* d = y.f32() + size_t(p) * plane;
      for (size_t i = 0; i < plane; ++i) {
        const float v = binary_apply(op_, s[i], spread ? t[0] : t[i]);
        d[i] = relu ? std::max(v, 0.f) : v;
      }
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::binary(a.in[0], a.in[1], a.out, int(op_), a.fused_relu, ctx.stream);
  }
#endif

 private:
  BinaryOp op_ = BinaryOp::Add;
};

}  // namespace

std::unique_ptr<Layer> make_binary(const NodeDesc& d) { return std::make_unique<Binary>(d); }

}  // namespace scenelab
