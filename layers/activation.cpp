// Element-wise activations: y = f(x), f one of sigmoid, tanh, leaky_relu (alpha: the slope for
// x < 0, default 0.01), clip (to [min, max]), hard_sigmoid (max(0, min(1, alpha x + beta)),
// defaults 0.2 and 0.5) and hard_swish (x hard_sigmoid(x) with alpha 1/6, beta 0.5). The ONNX
// importer's Sigmoid, Tanh, LeakyRelu, Clip, HardSigmoid and HardSwish (layers/eltwise_math.h).
#include <algorithm>
#include <limits>

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

class Activation : public Layer {
 public:
  explicit Activation(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"fn", "alpha", "beta", "min", "max"});
    const std::string fn = d.attrs.get_str("fn");
    const float inf = std::numeric_limits<float>::infinity();
    if (fn == "sigmoid") {
      fn_ = ActFn::Sigmoid;
    } else if (fn == "tanh") {
      fn_ = ActFn::Tanh;
    } else if (fn == "leaky_relu") {
      fn_ = ActFn::LeakyRelu;
      a_ = float(d.attrs.get_float("alpha", 0.01));
    } else if (fn == "clip") {
      fn_ = ActFn::Clip;
      a_ = d.attrs.has("min") ? float(d.attrs.get_float("min")) : -inf;
      b_ = d.attrs.has("max") ? float(d.attrs.get_float("max")) : inf;
      SL_REQUIRE(!(a_ > b_), "activation '", name_, "': clip's min ", a_, " is above its max ", b_);
    } else if (fn == "hard_sigmoid") {
      fn_ = ActFn::HardSigmoid;
      a_ = float(d.attrs.get_float("alpha", 0.2));
      b_ = float(d.attrs.get_float("beta", 0.5));
    } else if (fn == "hard_swish") {
      fn_ = ActFn::HardSwish;
    } else {
      throw_error("activation '", name_, "': fn=", fn,
                  " (sigmoid, tanh, leaky_relu, clip, hard_sigmoid or hard_swish)");
    }
    SL_REQUIRE(!std::isnan(a_) && !std::isnan(b_), "activation '", name_, "': a parameter is NaN");
  }
  const char* type() const override { return "activation"; }
  Format format(const std::vector<Format>& in, const Backend& b) const override { return follow_on_gpu(in[0], b); }
  Shape infer_shape(const std::vector<Shape>& in) const override { return in[0]; }
  void forward_cpu(const ForwardArgs& a) const override {
    const size_t n = a.out.shape.numel(), chunk = 1 << 16;
    const float* x = a.in[0].f32();
    float* y = a.out.f32();
    parallel_for(int64_t((n + chunk - 1) / chunk), a.threads, [&](int64_t b) {
      const size_t i0 = size_t(b) * chunk, i1 = std::min(n, i0 + chunk);
      for (size_t i = i0; i < i1; ++i) y[i] = activate(fn_, x[i], a_, b_);
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::activation(a.in[0], a.out, int(fn_), a_, b_, ctx.stream);
  }
#endif

 private:
  ActFn fn_ = ActFn::Sigmoid;
  float a_ = 0.f, b_ = 0.f;
};

}  // namespace

std::unique_ptr<Layer> make_activation(const NodeDesc& d) { return std::make_unique<Activation>(d); }

}  // namespace scenelab
