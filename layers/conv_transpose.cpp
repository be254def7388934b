// Transposed convolution (ONNX's ConvTranspose, PyTorch's ConvTranspose2d): each input pixel
// spreads its kernel-weighted values over the output at stride s, dilation d, less the pads
// (top, left, bottom, right), plus output padding at the bottom and right; groups. Output size
// (H - 1) s - pt - pb + d (kh - 1) + output_pad + 1. Computed by gathering: output pixel (oy,
// ox) sums the input pixels iy = (oy + pt - i d) / s where that divides (layers/conv_window.h),
// the same arithmetic on the CPU and the GPU (f32 NCHW, kernels/conv_transpose.cu). A
// following ReLU is fused.
#include <algorithm>

#include "core/error.h"
#include "core/parallel.h"
#include "engine/layer.h"
#include "layers/conv_window.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

int attr_at(const Attrs& a, const std::string& key, int def, size_t index, size_t count) {
  if (!a.has(key)) return def;
  const std::vector<int> v = a.get_ints(key, kMaxWindowAttr);
  SL_REQUIRE(v.size() == 1 || v.size() == count, "attribute ", key, ": 1 or ", count, " values");
  return v[v.size() == 1 ? 0 : index];
}

class ConvTranspose : public Layer {
 public:
  explicit ConvTranspose(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"out", "kernel", "stride", "dilation", "pads", "output_pad", "groups", "bias", "params"});
    out_ = d.attrs.get_int("out");
    w_.kh = attr_at(d.attrs, "kernel", 1, 0, 2), w_.kw = attr_at(d.attrs, "kernel", 1, 1, 2);
    w_.sh = attr_at(d.attrs, "stride", 1, 0, 2), w_.sw = attr_at(d.attrs, "stride", 1, 1, 2);
    w_.dh = attr_at(d.attrs, "dilation", 1, 0, 2), w_.dw = attr_at(d.attrs, "dilation", 1, 1, 2);
    w_.pt = attr_at(d.attrs, "pads", 0, 0, 4), w_.pl = attr_at(d.attrs, "pads", 0, 1, 4);
    pb_ = attr_at(d.attrs, "pads", 0, 2, 4), pr_ = attr_at(d.attrs, "pads", 0, 3, 4);
    oph_ = attr_at(d.attrs, "output_pad", 0, 0, 2), opw_ = attr_at(d.attrs, "output_pad", 0, 1, 2);
    w_.groups = d.attrs.get_int("groups", 1);
    bias_ = d.attrs.get_int("bias", 1) != 0;
    group_ = d.attrs.get_str("params", d.name);
    SL_REQUIRE(out_ > 0 && w_.kh > 0 && w_.kw > 0 && w_.sh > 0 && w_.sw > 0 && w_.dh > 0 && w_.dw > 0 &&
                   w_.groups > 0 && out_ % w_.groups == 0,
               "conv_transpose '", name_, "': out, kernel, stride, dilation and groups positive, out a multiple of groups");
    SL_REQUIRE(w_.pt >= 0 && w_.pl >= 0 && pb_ >= 0 && pr_ >= 0 && oph_ >= 0 && opw_ >= 0 &&
                   (oph_ < w_.sh || oph_ < w_.dh) && (opw_ < w_.sw || opw_ < w_.dw),
               "conv_transpose '", name_, "': pads from 0; output padding below the stride or the dilation");
  }
  const char* type() const override { return "conv_transpose"; }
  std::string param_group() const override { return group_; }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    std::vector<ParamSpec> p = {{"weight", {in[0].c, out_ / w_.groups, w_.kh, w_.kw}}};
    if (bias_) p.push_back({"bias", {out_}});
    return p;
  }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    const Shape& x = in[0];
    SL_REQUIRE(x.c % w_.groups == 0, "conv_transpose '", name_, "': ", x.c,
               " input channels are not a multiple of groups=", w_.groups);
    const int ho = (x.h - 1) * w_.sh - w_.pt - pb_ + w_.dh * (w_.kh - 1) + oph_ + 1;
    const int wo = (x.w - 1) * w_.sw - w_.pl - pr_ + w_.dw * (w_.kw - 1) + opw_ + 1;
    SL_REQUIRE(ho > 0 && wo > 0, "conv_transpose '", name_, "': input ", x.str(), " gives no output");
    return Shape(x.n, out_, ho, wo);
  }
  Geometry infer_geometry(const std::vector<Geometry>& in, const std::vector<Shape>&) const override {
    Geometry g = in[0];  // output pixel o lies where input position (o + pt - d (k - 1) / 2) / s does
    g.offset_y += g.stride_y * (w_.pt - w_.dh * (w_.kh - 1) / 2.0) / w_.sh;
    g.offset_x += g.stride_x * (w_.pl - w_.dw * (w_.kw - 1) / 2.0) / w_.sw;
    g.stride_y /= w_.sh;
    g.stride_x /= w_.sw;
    return g;
  }
  double ops(const std::vector<Shape>& in, const Shape&) const override {
    return 2.0 * double(in[0].numel()) * double(out_ / w_.groups) * w_.kh * w_.kw;
  }
  bool can_fuse(const std::vector<Epilogue>& chain, const std::vector<Shape>&, const std::vector<Format>&,
                const Backend&) const override {
    return chain.size() == 1 && chain[0].kind == Epilogue::Kind::Relu;
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    const float* w = a.params->data("weight");
    const float* b = bias_ ? a.params->data("bias") : nullptr;
    const bool relu = a.fused_relu;
    parallel_for(int64_t(y.shape.n) * y.shape.c, a.threads, [&](int64_t p) {
      const int n = int(p / y.shape.c), o = int(p % y.shape.c);
      float* d = y.f32() + size_t(p) * y.shape.plane();
      for (int oy = 0; oy < y.shape.h; ++oy)
        for (int ox = 0; ox < y.shape.w; ++ox) {
          float v = conv_transpose_at(x.f32(), x.shape.c, x.shape.h, x.shape.w, y.shape.c, n, o, oy, ox, w, w_) +
                    (b ? b[o] : 0.f);
          d[size_t(oy) * y.shape.w + ox] = relu ? std::max(v, 0.f) : v;
        }
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::conv_transpose(a.in[0], a.out, a.params->data("weight"), bias_ ? a.params->data("bias") : nullptr, w_,
                         a.fused_relu, ctx.stream);
  }
#endif

 private:
  int out_ = 0, pb_ = 0, pr_ = 0, oph_ = 0, opw_ = 0;
  ConvTWindow w_;
  bool bias_ = true;
  std::string group_;
};

}  // namespace

std::unique_ptr<Layer> make_conv_transpose(const NodeDesc& d) { return std::make_unique<ConvTranspose>(d); }

}  // namespace scenelab
