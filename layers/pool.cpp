// Pooling of any window ONNX's AveragePool and MaxPool (and PyTorch's AvgPool2d, MaxPool2d)
// describe: kh x kw windows at a stride, pads on each side; mode=avg: the mean over the window's
// pixels inside the map, or over the whole window with the padding counted as zeros
// (count_pad=1); mode=max: the largest of the pixels inside (NaN wins). Windows that tile the map
// are downscale's and unpadded square max windows maxpool2d's (both with NHWC half-precision
// kernels); the ONNX importer maps the rest here. GPU: a direct kernel in its input's format, f32 NCHW
// or NHWC of any type (kernels/pool.cu).
#include <algorithm>

#include "core/error.h"
#include "core/parallel.h"
#include "engine/layer.h"
#include "layers/formats.h"
#include "layers/pool_window.h"
#include "layers/window_columns.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class Pool : public Layer {
 public:
  explicit Pool(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"mode", "kernel", "stride", "pads", "count_pad"});
    const std::string mode = d.attrs.get_str("mode", "avg");
    SL_REQUIRE(mode == "avg" || mode == "max", "pool '", name_, "': mode=", mode, " (avg or max)");
    w_.max = mode == "max";
    const std::vector<int> k = d.attrs.get_ints("kernel", kMaxWindowAttr);
    SL_REQUIRE(k.size() == 1 || k.size() == 2, "pool '", name_, "': kernel=KH[,KW]");
    w_.kh = k[0], w_.kw = k.back();
    const std::vector<int> s =
        d.attrs.has("stride") ? d.attrs.get_ints("stride", kMaxWindowAttr) : std::vector<int>{1};
    SL_REQUIRE(s.size() == 1 || s.size() == 2, "pool '", name_, "': stride=SH[,SW]");
    w_.sh = s[0], w_.sw = s.back();
    if (d.attrs.has("pads")) {
      const std::vector<int> p = d.attrs.get_ints("pads", kMaxWindowAttr);
      SL_REQUIRE(p.size() == 4, "pool '", name_, "': pads=top,left,bottom,right");
      w_.pt = p[0], w_.pl = p[1], w_.pb = p[2], w_.pr = p[3];
    }
    w_.count_pad = d.attrs.get_int("count_pad", 0) != 0;
    SL_REQUIRE(!(w_.max && w_.count_pad), "pool '", name_, "': count_pad is avg's");
    SL_REQUIRE(w_.kh > 0 && w_.kw > 0 && w_.sh > 0 && w_.sw > 0 && w_.pt >= 0 && w_.pl >= 0 && w_.pb >= 0 &&
                   w_.pr >= 0 && w_.pt < w_.kh && w_.pb < w_.kh && w_.pl < w_.kw && w_.pr < w_.kw,
               "pool '", name_, "': kernel and stride positive, pads from 0 to below the kernel");
  }
  const char* type() const override { return "pool"; }
  Format format(const std::vector<Format>& in, const Backend& b) const override { return follow_on_gpu(in[0], b); }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    const Shape& x = in[0];
    SL_REQUIRE(x.h + w_.pt + w_.pb >= w_.kh && x.w + w_.pl + w_.pr >= w_.kw, "pool '", name_, "': input ",
               x.str(), " is smaller than its window");
    return Shape(x.n, x.c, (x.h + w_.pt + w_.pb - w_.kh) / w_.sh + 1, (x.w + w_.pl + w_.pr - w_.kw) / w_.sw + 1);
  }
  Geometry infer_geometry(const std::vector<Geometry>& in, const std::vector<Shape>&) const override {
    Geometry g = in[0];
    g.offset_y += g.stride_y * ((w_.kh - 1) / 2.0 - w_.pt);
    g.offset_x += g.stride_x * ((w_.kw - 1) / 2.0 - w_.pl);
    g.stride_y *= w_.sh;
    g.stride_x *= w_.sw;
    return g;
  }
  // CPU: an output row at a time, each window pixel (kernel row, then column) merged into the
  // whole row at once, so every output pixel sees its window's pixels in pool_value's order (the
  // same sum, the same largest value) with the bounds found once a kernel column.
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    const int W = y.shape.w, H = y.shape.h;
    constexpr int kKnown = 16;  // kernel columns whose bounds are kept (wider windows: found per row)
    int lo_of[kKnown], hi_of[kKnown];
    for (int j = 0; j < std::min(w_.kw, kKnown); ++j)
      inside_columns(j - w_.pl, w_.sw, x.shape.w, W, lo_of[j], hi_of[j]);
    parallel_for(int64_t(y.shape.n) * y.shape.c, a.threads, [&](int64_t p) {
      const float* s = x.f32() + size_t(p) * x.shape.plane();
      float* d = y.f32() + size_t(p) * y.shape.plane();
      for (int oy = 0; oy < H; ++oy) {
        float* r = d + size_t(oy) * W;
        std::fill(r, r + W, w_.max ? -3.402823466e38f : 0.f);
        const int y0 = oy * w_.sh - w_.pt;
        for (int i = std::max(0, y0); i < std::min(x.shape.h, y0 + w_.kh); ++i) {
          const float* row = s + size_t(i) * x.shape.w;
          for (int j = 0; j < w_.kw; ++j) {
            int lo = 0, hi = 0;
            if (j < kKnown)
              lo = lo_of[j], hi = hi_of[j];
            else
              inside_columns(j - w_.pl, w_.sw, x.shape.w, W, lo, hi);
            const int off = j - w_.pl;
            if (w_.max) {
              for (int ox = lo; ox < hi; ++ox) {
                const float v = row[ox * w_.sw + off];
                r[ox] = v > r[ox] || v != v ? v : r[ox];  // NaN wins (pool_value)
              }
            } else {
              for (int ox = lo; ox < hi; ++ox) r[ox] += row[ox * w_.sw + off];
            }
          }
        }
        if (!w_.max)
          for (int ox = 0; ox < W; ++ox) {
            const int count = pool_count(x.shape.h, x.shape.w, oy, ox, w_);
            r[ox] = count > 0 ? r[ox] / float(count) : 0.f;
          }
      }
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::pool(a.in[0], a.out, w_, ctx.stream);
  }
#endif

 private:
  PoolWindow w_;
};

}  // namespace

std::unique_ptr<Layer> make_pool(const NodeDesc& d) { return std::make_unique<Pool>(d); }

}  // namespace scenelab
