// Per-channel standardisation y = (x - mean[c]) / std[c], with mean and std stored in the model
// (datasets GROUP/mean and GROUP/std, computed on the training data).
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

class Standardize : public Layer {
 public:
  explicit Standardize(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"params"});
    group_ = d.attrs.get_str("params", d.name);
  }
  const char* type() const override { return "standardize"; }
  std::string param_group() const override { return group_; }
  // On the GPU it writes the network's activation format (f16/bf16 NHWC under fp16/bf16 with
  // cuDNN): the last preprocessing step hands the convolutions their format, no conversion.
  Format output_format(const std::vector<Format>& /*in*/, const Backend& b) const override {
    return activation_format_of(b);
  }
  Shape infer_shape(const std::vector<Shape>& in) const override { return in[0]; }
  Epilogue as_epilogue() const override { return {Epilogue::Kind::Standardize}; }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    return {{"mean", {in[0].c}}, {"std", {in[0].c}}};
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const float* mean = a.params->data("mean");
    const float* sd = a.params->data("std");
    const TensorView &x = a.in[0], &y = a.out;
    for (int c = 0; c < x.shape.c; ++c)
      SL_REQUIRE(sd[c] > 0, "standardize '", name_, "': std[", c, "] = ", sd[c],
                 " is not positive");
    const size_t plane = x.shape.plane();
    parallel_for(int64_t(x.shape.n) * x.shape.c, a.threads, [&](int64_t p) {
      const int c = int(p % x.shape.c);
      const float m = mean[c], inv = 1.f / sd[c];
      const float* s = x.f32() + size_t(p) * plane;
      float* d = y.f32() + size_t(p) * plane;
      for (size_t i = 0; i < plane; ++i) d[i] = (s[i] - m) * inv;
    });
  }

#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    // std > 0 is checked on the host copy of the parameter (once per run, 3 values).
    const Tensor& sd = a.params->get("std");
    for (size_t c = 0; c < sd.numel(); ++c)
      SL_REQUIRE(sd[c] > 0, "standardize '", name_, "': std[", c, "] = ", sd[c], " is not positive");
    cuda::standardize(a.in[0].f32(), a.out, a.params->data("mean"), a.params->data("std"), ctx.stream);
  }
#endif

 private:
  std::string group_;
};

}  // namespace

std::unique_ptr<Layer> make_standardize(const NodeDesc& d) {
  return std::make_unique<Standardize>(d);
}

}  // namespace scenelab
