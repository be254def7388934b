// Local contrast normalisation (Farabet et al.; Torch's SpatialContrastiveNormalization), applied
// to each channel on its own with a normalised Gaussian window G of size x size (sigma in pixels,
// default 0.25 * size as Torch's image.gaussian1D), zero padding with edge correction:
//   mean = (G * x) / (G * 1)                 subtractive step: c = x - mean
//   sd   = sqrt((G * c^2) / (G * 1))         divisive step:   y = c / max(sd, mean(sd), eps)
// where mean(sd) is the average of sd over the channel's image. tools/scenelab_torch.py
// implements the same function for training; a test keeps the two equal.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#include "layers/contrast_norm.h"
#endif

namespace scenelab {
namespace {

class ContrastNorm : public Layer {
 public:
  explicit ContrastNorm(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"size", "sigma", "eps"});
    size_ = d.attrs.get_int("size", 13);
    sigma_ = d.attrs.get_float("sigma", 0.25 * size_);
    eps_ = float(d.attrs.get_float("eps", 1e-4));
    SL_REQUIRE(size_ >= 1 && size_ % 2 == 1, "contrast_norm '", name_, "': size must be odd");
    SL_REQUIRE(sigma_ > 0, "contrast_norm '", name_, "': sigma must be positive");
    kernel_.resize(size_t(size_));
    double s = 0;
    for (int i = 0; i < size_; ++i) {
      double t = (i - size_ / 2) / sigma_;
      kernel_[size_t(i)] = std::exp(-0.5 * t * t);
      s += kernel_[size_t(i)];
    }
    for (auto& k : kernel_) k /= s;
    kernel_f_.assign(kernel_.begin(), kernel_.end());
  }
  const char* type() const override { return "contrast_norm"; }
  Shape infer_shape(const std::vector<Shape>& in) const override { return in[0]; }
  size_t workspace_floats(const std::vector<Shape>& in, const Shape&,
                          const Backend&) const override {
    // per plane: centred values, squared/blurred buffer, horizontal pass; plus edge
    // coefficients (CPU) or the planes' mean deviations (GPU)
    const size_t planes = size_t(in[0].n) * in[0].c;
    const size_t bands = size_t((in[0].h + band_rows(in[0].h) - 1) / band_rows(in[0].h));
    return std::max(planes * in[0].plane() * 3 + size_t(in[0].h + in[0].w) + 1 + 2 * planes * bands,
                    contrast_norm_workspace(in[0]));
  }
  // As an epilogue: the GPU's two-pass kernel run by the producer (rgb_to_yuv, converting on
  // its loads: the YUV image is never written).
  Epilogue as_epilogue() const override {
    Epilogue e{Epilogue::Kind::ContrastNorm, size_, 0};
    e.eps = eps_;
    e.taps = kernel_f_.data();
    return e;
  }
  // On the GPU a following standardisation runs in the two-pass kernel's last pass, writing the
  // network's activation format (cuda::contrast_norm_fused).
  bool can_fuse(const std::vector<Epilogue>& chain, const std::vector<Shape>& in,
                const std::vector<Format>& /*in_formats*/, const Backend& backend) const override {
#ifdef SCENELAB_WITH_CUDA
    return chain.size() == 1 && chain[0].kind == Epilogue::Kind::Standardize && chain[0].params &&
           backend.cuda() && cuda::contrast_norm_fused_supported(size_, in[0].c);
#else
    (void)chain, (void)in, (void)backend;
    return false;
#endif
  }

  // The GPU path's need (kernels/layers_cuda.h), where this build has one.
  static size_t contrast_norm_workspace(const Shape& s) {
#ifdef SCENELAB_WITH_CUDA
    return std::max(cuda::contrast_norm_workspace_floats(size_t(s.n) * s.c, s.plane()),
                    cuda::contrast_norm_fused_workspace_floats(s.n, s.c, s.h, s.w));
#else
    (void)s;
    return 0;
#endif
  }

  // In row bands of every plane (an image has few planes: 3 on 2 threads left one idle a third of
  // the time), in four steps, each over all bands: the horizontal pass of the mean's blur; its
  // vertical pass and the centred values and their squares; the horizontal pass of the variance's
  // blur; its vertical pass, the deviations and their sums by band; then the division. The band
  // size follows the image, not the thread count, and the sums add in band order: results do not
  // depend on the threads.
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    const int H = x.shape.h, W = x.shape.w;
    const size_t plane = x.shape.plane();
    float* cy = a.workspace;  // 1 / (sum of the window taps inside the image), per row / column
    float* cx = cy + H;
    edge_coef(H, cy);
    edge_coef(W, cx);
    const int64_t planes = int64_t(x.shape.n) * x.shape.c;
    const int rows = band_rows(H), bands = (H + rows - 1) / rows;
    // a sum per plane and band, 8-byte aligned after the coefficients (the workspace is 64-byte aligned)
    double* sums = reinterpret_cast<double*>(cy + (size_t(H) + W + 1) / 2 * 2);
    float* scratch = reinterpret_cast<float*>(sums + planes * bands);
    auto each_band = [&](auto&& f) {
      parallel_for(planes * bands, a.threads, [&](int64_t i) {
        const int64_t p = i / bands;
        const int y0 = int(i % bands) * rows, y1 = std::min(H, y0 + rows);
        float* tmp = scratch + size_t(p) * plane * 3;
        f(p, y0, y1, x.f32() + size_t(p) * plane, tmp, tmp + plane, tmp + 2 * plane);
      });
    };
    each_band([&](int64_t, int y0, int y1, const float* src, float* tmp, float*, float*) {
      blur_rows(src, tmp, y0, y1, W, cx);
    });
    each_band([&](int64_t, int y0, int y1, const float* src, float* tmp, float* cen, float* sq) {
      blur_columns(tmp, cen, y0, y1, H, W, cy);  // cen = local mean
      for (size_t i = size_t(y0) * W; i < size_t(y1) * W; ++i) {
        cen[i] = src[i] - cen[i];
        sq[i] = cen[i] * cen[i];
      }
    });
    each_band([&](int64_t, int y0, int y1, const float*, float* tmp, float*, float* sq) {
      blur_rows(sq, tmp, y0, y1, W, cx);
    });
    each_band([&](int64_t p, int y0, int y1, const float*, float* tmp, float*, float* sq) {
      blur_columns(tmp, sq, y0, y1, H, W, cy);  // sq = local variance
      double s = 0;
      for (size_t i = size_t(y0) * W; i < size_t(y1) * W; ++i) {
        sq[i] = std::sqrt(std::max(sq[i], 0.f));
        s += sq[i];
      }
      sums[p * bands + y0 / rows] = s;
    });
    each_band([&](int64_t p, int y0, int y1, const float*, float*, float* cen, float* sq) {
      double mean_sd = 0;
      for (int b = 0; b < bands; ++b) mean_sd += sums[p * bands + b];
      const float thr = std::max(float(mean_sd / double(plane)), eps_);
      float* dst = y.f32() + size_t(p) * plane;
      for (size_t i = size_t(y0) * W; i < size_t(y1) * W; ++i) dst[i] = cen[i] / std::max(sq[i], thr);
    });
  }

#ifdef SCENELAB_WITH_CUDA
  // Two passes over the image where the window allows (cuda::contrast_norm_fused; with the
  // fused standardisation's mean and std), else the seven-pass path.
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    const Shape& s = a.in[0].shape;
    if (cuda::contrast_norm_fused_supported(size_, s.c)) {
      contrast_norm_fused_cuda(a, ctx, as_epilogue(), a.epilogue ? &(*a.epilogue)[0] : nullptr, false);
      return;
    }
    cuda::contrast_norm(a.in[0].f32(), a.out.f32(), s.n * s.c, s.h, s.w, kernel_f_.data(), size_, eps_,
                        a.workspace, ctx.stream);
  }
#endif

 private:
  void edge_coef(int n, float* coef) const {
    const int r = size_ / 2;
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int t = -r; t <= r; ++t)
        if (i + t >= 0 && i + t < n) s += kernel_[size_t(t + r)];
      coef[i] = float(1.0 / s);
    }
  }
  static constexpr int kMinBands = 8;  // row bands a plane is cut into at least (where it has them)
  static int band_rows(int H) { return std::max(1, (H + kMinBands - 1) / kMinBands); }
  // The separable zero-padded Gaussian, divided by the window mass inside the image: rows y0..y1
  // of its horizontal pass (in -> tmp), then of its vertical pass (tmp -> out, which needs every
  // tmp row of the window: after all bands' horizontal passes). Each tap's products are added in
  // tap order, pixels side by side (the vector lanes), as the per-pixel loop did before.
  void blur_rows(const float* in, float* tmp, int y0, int y1, int W, const float* cx) const {
    const int r = size_ / 2;
    const float* g = kernel_f_.data();
    const int x0 = std::min(r, W), x1 = std::max(x0, W - r);  // pixels whose window is inside
    for (int yy = y0; yy < y1; ++yy) {
      const float* row = in + size_t(yy) * W;
      float* t = tmp + size_t(yy) * W;
      auto edge = [&](int xx) {
        const int lo = std::max(-r, -xx), hi = std::min(r, W - 1 - xx);
        float s = 0;
        for (int k = lo; k <= hi; ++k) s += g[k + r] * row[xx + k];
        t[xx] = s * cx[xx];
      };
      for (int xx = 0; xx < x0; ++xx) edge(xx);
      for (int xx = x0; xx < x1; ++xx) t[xx] = g[0] * row[xx - r];
      for (int k = 1; k <= 2 * r; ++k) {
        const float gk = g[k];
        const float* src = row + k - r;
        for (int xx = x0; xx < x1; ++xx) t[xx] += gk * src[xx];
      }
      for (int xx = x0; xx < x1; ++xx) t[xx] *= cx[xx];
      for (int xx = x1; xx < W; ++xx) edge(xx);
    }
  }
  void blur_columns(const float* tmp, float* out, int y0, int y1, int H, int W, const float* cy) const {
    const int r = size_ / 2;
    const float* g = kernel_f_.data();
    for (int yy = y0; yy < y1; ++yy) {
      const int lo = std::max(-r, -yy), hi = std::min(r, H - 1 - yy);
      float* o = out + size_t(yy) * W;
      for (int xx = 0; xx < W; ++xx) o[xx] = 0;
      for (int k = lo; k <= hi; ++k) {
        const float gk = g[k + r];
        const float* t = tmp + size_t(yy + k) * W;
        for (int xx = 0; xx < W; ++xx) o[xx] += gk * t[xx];
      }
      for (int xx = 0; xx < W; ++xx) o[xx] *= cy[yy];
    }
  }

  int size_ = 13;
  double sigma_ = 3.25;
  float eps_ = 1e-4f;
  std::vector<double> kernel_;
  std::vector<float> kernel_f_;  // the same taps in float, as the GPU kernel takes them
};

}  // namespace

#ifdef SCENELAB_WITH_CUDA
void contrast_norm_fused_cuda(const ForwardArgs& a, const CudaContext& ctx, const Epilogue& lcn,
                              const Epilogue* standardize, bool rgb_to_yuv) {
  const float *mean = nullptr, *sd = nullptr;
  if (standardize) {  // std > 0 checked on its host copy
    const LayerParams& p = *standardize->params;
    const Tensor& host_sd = p.get("std");
    for (size_t c = 0; c < host_sd.numel(); ++c)
      SL_REQUIRE(host_sd[c] > 0, "standardize after contrast normalisation: std[", c, "] = ", host_sd[c],
                 " is not positive");
    mean = p.data("mean");
    sd = p.data("std");
  }
  cuda::contrast_norm_fused(a.in[0].f32(), a.out, lcn.taps, lcn.k, lcn.eps, mean, sd, a.workspace, ctx.stream,
                            rgb_to_yuv);
}
#endif

std::unique_ptr<Layer> make_contrast_norm(const NodeDesc& d) {
  return std::make_unique<ContrastNorm>(d);
}

}  // namespace scenelab
