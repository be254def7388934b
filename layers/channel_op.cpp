// A per-channel operand: y = x * v[c] (op=mul), x + v[c] (op=add), or PReLU, x for x >= 0 and
// v[c] x below (op=prelu); v is the parameter GROUP/value [C]. The ONNX importer's Mul, Add and
// Sub by a constant of one value or one a channel, and PRelu (layers/eltwise_math.h).
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

class ChannelOpLayer : public Layer {
 public:
  explicit ChannelOpLayer(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"op", "params"});
    const std::string op = d.attrs.get_str("op");
    SL_REQUIRE(op == "mul" || op == "add" || op == "prelu" || op == "affine", "channel_op '", name_, "': op=", op,
               " (mul, add, prelu or affine)");
    op_ = op == "mul"   ? ChannelOp::Mul
          : op == "add" ? ChannelOp::Add
          : op == "prelu" ? ChannelOp::Prelu
                          : ChannelOp::Affine;
    group_ = d.attrs.get_str("params", d.name);
  }
  const char* type() const override { return "channel_op"; }
  std::string param_group() const override { return group_; }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    if (op_ == ChannelOp::Affine) return {{"value", {in[0].c}}, {"shift", {in[0].c}}};
    return {{"value", {in[0].c}}};
  }
  bool can_fuse(const std::vector<Epilogue>& chain, const std::vector<Shape>&, const std::vector<Format>&,
                const Backend&) const override {
    return chain.size() == 1 && chain[0].kind == Epilogue::Kind::Relu;
  }
  Format format(const std::vector<Format>& in, const Backend& b) const override { return follow_on_gpu(in[0], b); }
  Shape infer_shape(const std::vector<Shape>& in) const override { return in[0]; }
  void forward_cpu(const ForwardArgs& a) const override {
    const float* v = a.params->data("value");
    const float* u = op_ == ChannelOp::Affine ? a.params->data("shift") : nullptr;
    const TensorView &x = a.in[0], &y = a.out;
    const size_t plane = x.shape.plane();
    const bool relu = a.fused_relu;
    parallel_for(int64_t(x.shape.n) * x.shape.c, a.threads, [&](int64_t p) {
      const float vc = v[p % x.shape.c], uc = u ? u[p % x.shape.c] : 0.f;
      const float* s = x.f32() + size_t(p) * plane;
      float* d = y.f32() + size_t(p) * plane;
      for (size_t i = 0; i < plane; ++i) {
        const float r = channel_apply(op_, s[i], vc, uc);
        d[i] = relu ? std::max(r, 0.f) : r;
      }
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::channel_op(a.in[0], a.out, int(op_), a.params->data("value"),
                     op_ == ChannelOp::Affine ? a.params->data("shift") : nullptr, a.fused_relu, ctx.stream);
  }
#endif

 private:
  ChannelOp op_ = ChannelOp::Mul;
  std::string group_;
};

}  // namespace

std::unique_ptr<Layer> make_channel_op(const NodeDesc& d) { return std::make_unique<ChannelOpLayer>(d); }

}  // namespace scenelab
