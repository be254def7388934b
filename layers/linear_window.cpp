// A linear classifier over every kh x kw window of a feature map (stride 1, valid):
//   y[o](r, c) = bias[o] + sum over channels k and window offsets (i, j) of w[o, k, i, j] x(k, r + i, c + j)
// - a correlation with a rectangular kernel, as a HOG detector's linear SVM scores every window
// position of the block map (Dalal and Triggs; fastHOG). CPU path: for a band of rows, one GEMM
// gives every map pixel's products with every window offset, P (pixels x kh*kw) = X^T W^T, and
// each output sums its kh*kw entries of P along the window's diagonal.
#include <Eigen/Core>
#include <algorithm>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/hog_cuda.h"
#endif

namespace scenelab {
namespace {

using ColMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
constexpr int kBandRows = 16;  // output rows per GEMM band (each band also reads kh - 1 more)

class LinearWindow : public Layer {
 public:
  explicit LinearWindow(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"out", "kh", "kw", "params"});
    out_ = d.attrs.get_int("out", 1);
    kh_ = d.attrs.get_int("kh");
    kw_ = d.attrs.get_int("kw");
    group_ = d.attrs.get_str("params", d.name);
    SL_REQUIRE(out_ >= 1 && kh_ >= 1 && kw_ >= 1, "linear_window '", name_,
               "': out, kh and kw must be positive");
  }
  const char* type() const override { return "linear_window"; }
  std::string param_group() const override { return group_; }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    const Shape& s = in[0];
    SL_REQUIRE(s.h >= kh_ && s.w >= kw_, "linear_window '", name_, "' (", kw_, "x", kh_,
               " windows) needs an input of at least ", kw_, "x", kh_, ", got ", s.w, "x", s.h);
    return Shape(s.n, out_, s.h - kh_ + 1, s.w - kw_ + 1);
  }
  Geometry infer_geometry(const std::vector<Geometry>& in,
                          const std::vector<Shape>& /*shapes*/) const override {
    Geometry g = in[0];
    g.offset_y += g.stride_y * (kh_ - 1) / 2.0;
    g.offset_x += g.stride_x * (kw_ - 1) / 2.0;
    return g;
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    return {{"weight", {out_, in[0].c, kh_, kw_}}, {"bias", {out_}}};
  }
  size_t workspace_floats(const std::vector<Shape>& in, const Shape& /*o*/,
                          const Backend& backend) const override {
    if (backend.cuda()) return 0;
    return size_t(backend.threads()) * size_t(kBandRows + kh_ - 1) * size_t(in[0].w) * size_t(kh_) * kw_;
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    const int C = x.shape.c, W = x.shape.w, T = kh_ * kw_, Ho = y.shape.h, Wo = y.shape.w;
    const float* wt = a.params->data("weight");
    const float* bias = a.params->data("bias");
    const int bands = (Ho + kBandRows - 1) / kBandRows;
    const size_t per_thread = size_t(kBandRows + kh_ - 1) * size_t(W) * T;
    for (int n = 0; n < x.shape.n; ++n)
      for (int o = 0; o < out_; ++o) {
        // W[o] is C x T row-major: as a column-major T x C matrix.
        Eigen::Map<const ColMat> w(wt + size_t(o) * C * T, T, C);
        Eigen::Map<const ColMat, 0, Eigen::OuterStride<>> xm(x.channel(n, 0), int64_t(x.shape.plane()), C,
                                                             Eigen::OuterStride<>(int64_t(x.shape.plane())));
        parallel_for(bands, a.threads, [&](int64_t band) {
          const int y0 = int(band) * kBandRows, y1 = std::min(Ho, y0 + kBandRows);
          const int rows = y1 - y0 + kh_ - 1;
          float* pbuf = a.workspace + size_t(parallel_thread_index()) * per_thread;
          Eigen::Map<ColMat> p(pbuf, int64_t(rows) * W, T);
          p.noalias() = xm.middleRows(int64_t(y0) * W, int64_t(rows) * W) * w.transpose();
          float* dst = y.channel(n, o);
          for (int r = y0; r < y1; ++r) std::fill(dst + size_t(r) * Wo, dst + size_t(r + 1) * Wo, bias[o]);
          for (int i = 0; i < kh_; ++i)
            for (int j = 0; j < kw_; ++j) {
              const float* col = pbuf + size_t(i * kw_ + j) * size_t(rows) * W;
              for (int r = y0; r < y1; ++r) {
                const float* src = col + size_t(r - y0 + i) * W + j;
                float* d = dst + size_t(r) * Wo;
                for (int c = 0; c < Wo; ++c) d[c] += src[c];
              }
            }
        });
      }
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::linear_window(a.in[0], a.params->data("weight"), a.params->data("bias"), a.out, kh_, kw_,
                        ctx.stream);
  }
#endif

 private:
  int out_ = 1, kh_ = 1, kw_ = 1;
  std::string group_;
};

}  // namespace

std::unique_ptr<Layer> make_linear_window(const NodeDesc& d) { return std::make_unique<LinearWindow>(d); }

}  // namespace scenelab
