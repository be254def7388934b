// Resize input 0 to the spatial size of input 1 (whose values are not read), or, given `scale=S`
// and one input, by S (S < 1 shrinks) to round(S h) x round(S w) (at least 1 x 1), sampled as
// align=size (a pass of test-time scaling starts from upsample(image) scale=S, job/combine.h).
// With `size=AH,DH,MH,OH,AW,DW,MW,OW` (align=size), input 1's size through that arithmetic:
// height ((h + AH) / DH) * MH + OH, width likewise, / the floor division (the ONNX importer's
// Resize whose sizes torch.export computed from another map's, such as (h - 1) // 8 + 1).
//   mode=nearest|bilinear
//   align=size      PyTorch's F.interpolate(size=..., align_corners=False) sampling: source
//                   coordinate (i + 0.5) * in/out - 0.5 (bilinear), floor(i * in/out) (nearest).
//   align=geometry  sample where the two maps' pixel centres lie on the input image (Geometry),
//                   e.g. to bring a valid-conv score map back onto every input pixel.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#include "layers/formats.h"
#include "layers/upsample_taps.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class Upsample : public Layer {
 public:
  explicit Upsample(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"mode", "align", "scale", "size"});
    std::string mode = d.attrs.get_str("mode", "bilinear");
    std::string align = d.attrs.get_str("align", "size");
    if (d.attrs.has("size")) {
      const std::vector<int> v = d.attrs.get_ints("size");
      SL_REQUIRE(v.size() == 8 && v[1] > 0 && v[2] > 0 && v[5] > 0 && v[6] > 0, "upsample '", name_,
                 "': size=AH,DH,MH,OH,AW,DW,MW,OW (8 values, DH, MH, DW and MW positive)");
      SL_REQUIRE(align == "size" && !d.attrs.has("scale"), "upsample '", name_,
                 "': size= resizes as align=size, from a reference input");
      for (int k = 0; k < 8; ++k) size_[k] = v[size_t(k)];
      sized_ = true;
    }
    if (d.attrs.has("scale")) {
      scale_ = d.attrs.get_float("scale");
      SL_REQUIRE(std::isfinite(scale_) && scale_ >= kMinScale && scale_ <= kMaxScale, "upsample '", name_,
                 "': scale must be in [", kMinScale, ", ", kMaxScale, "], got ", d.attrs.get_str("scale", ""));
      SL_REQUIRE(align == "size", "upsample '", name_, "': scale=S resizes as align=size; align=", align,
                 " needs a reference input instead");
    }
    SL_REQUIRE(mode == "nearest" || mode == "bilinear", "upsample '", name_,
               "': mode must be nearest or bilinear");
    SL_REQUIRE(align == "size" || align == "geometry", "upsample '", name_,
               "': align must be size or geometry");
    bilinear_ = mode == "bilinear";
    geometry_ = align == "geometry";
  }
  const char* type() const override { return "upsample"; }
  Format format(const std::vector<Format>& in, const Backend& b) const override {
    return follow_on_gpu(in[0], b);
  }
  int num_inputs() const override { return scale_ > 0 ? 1 : 2; }
  bool reads_values(int input) const override { return input == 0; }  // input 1: its size only
  // Onto its own grid (a net's scores already at the input's size): every tap is the pixel itself.
  bool is_identity(const std::vector<Shape>& in, const std::vector<Geometry>& g, const Shape& out) const override {
    if (!(in[0] == out)) return false;
    auto same = [&](int size, double in_off, double in_stride, double out_off, double out_stride) {
      for (int i = 0; i < size; ++i) {
        const UpsampleTap t = upsample_tap(i, size, size, geometry_, bilinear_, in_off, in_stride, out_off, out_stride);
        if (t.i0 != i || t.w1 != 0.f) return false;
      }
      return true;
    };
    const Geometry &gi = g[0], &go = g.back();
    return same(out.h, gi.offset_y, gi.stride_y, go.offset_y, go.stride_y) &&
           same(out.w, gi.offset_x, gi.stride_x, go.offset_x, go.stride_x);
  }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    if (scale_ > 0) return Shape(in[0].n, in[0].c, scaled(in[0].h), scaled(in[0].w));
    SL_REQUIRE(in[0].n == in[1].n, "upsample '", name_, "': batch sizes differ");
    if (!sized_) return Shape(in[0].n, in[0].c, in[1].h, in[1].w);
    return Shape(in[0].n, in[0].c, sized(in[1].h, 0, "height"), sized(in[1].w, 4, "width"));
  }
  // By scale: output pixel i samples the input at (i + 0.5) r - 0.5, r = in / out per axis, so it
  // lies there on the image: the stride times r, the offset moved by half an input pixel's worth.
  // By size= likewise, r = in / out of the sizes it computes.
  Geometry infer_geometry(const std::vector<Geometry>& in, const std::vector<Shape>& shapes) const override {
    if (scale_ <= 0 && !sized_) return in[1];
    Geometry g = in[0];
    const Shape out = infer_shape(shapes);
    const double ry = double(shapes[0].h) / out.h, rx = double(shapes[0].w) / out.w;
    g.offset_y += g.stride_y * (0.5 * ry - 0.5);
    g.offset_x += g.stride_x * (0.5 * rx - 0.5);
    g.stride_y *= ry;
    g.stride_x *= rx;
    return g;
  }
  // A following argmax on the GPU: the class of each output pixel straight from the coarse map,
  // the resampled scores never written (cuda::upsample_argmax).
  bool can_fuse(const std::vector<Epilogue>& chain, const std::vector<Shape>& /*in*/,
                const std::vector<Format>& in_formats, const Backend& backend) const override {
    return chain.size() == 1 && chain[0].kind == Epilogue::Kind::Argmax &&
           follow_on_gpu(in_formats[0], backend) == in_formats[0] && backend.cuda() != nullptr;
  }

  // CPU: two source rows resampled along x at a time (each source row once for the output rows
  // that read it, where it was once per output row: 2-4x fewer gathers when enlarging), then the
  // blend along y across the row, vectorised. Per thread: two output-width rows.
  size_t workspace_floats(const std::vector<Shape>& /*in*/, const Shape& out, const Backend& b) const override {
    return b.cuda() ? 0 : size_t(b.threads()) * 2 * size_t(out.w);
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    const Geometry &gi = a.in_geometry[0], &go = a.in_geometry.back();  // by scale: align=size, unread
    auto ty = taps(x.shape.h, y.shape.h, gi.offset_y, gi.stride_y, go.offset_y, go.stride_y);
    auto tx = taps(x.shape.w, y.shape.w, gi.offset_x, gi.stride_x, go.offset_x, go.stride_x);
    const int W = y.shape.w;
    auto identity = [](const std::vector<UpsampleTap>& t) {
      for (size_t i = 0; i < t.size(); ++i)
        if (t[i].i0 != int(i) || t[i].w1 != 0.f) return false;
      return true;
    };
    if (x.shape == y.shape && identity(ty) && identity(tx)) {  // onto its own grid (a net's scores at
      std::memcpy(y.f32(), x.f32(), y.shape.numel() * sizeof(float));  // the input's size): a copy
      return;
    }
    parallel_for(int64_t(y.shape.n) * y.shape.c, a.threads, [&](int64_t p) {
      const float* src = x.f32() + size_t(p) * x.shape.plane();
      float* dst = y.f32() + size_t(p) * y.shape.plane();
      float* slot[2] = {a.workspace + size_t(parallel_thread_index()) * 2 * W, nullptr};
      slot[1] = slot[0] + W;
      int held[2] = {-1, -1};  // the source row each slot holds, resampled along x
      // Source row i along x, in a slot not holding `keep` (the other row this output row needs).
      auto row = [&](int i, int keep) -> const float* {
        for (int s = 0; s < 2; ++s)
          if (held[s] == i) return slot[s];
        const int s = held[0] == keep ? 1 : 0;
        const float* r = src + size_t(i) * x.shape.w;
        float* o = slot[s];
        for (int ox = 0; ox < W; ++ox) {
          const UpsampleTap& u = tx[size_t(ox)];
          o[ox] = r[u.i0] + u.w1 * (r[u.i1] - r[u.i0]);
        }
        held[s] = i;
        return o;
      };
      for (int oy = 0; oy < y.shape.h; ++oy) {
        const UpsampleTap& t = ty[size_t(oy)];
        const float* top = row(t.i0, t.i1);
        const float* bot = row(t.i1, t.i0);
        float* out = dst + size_t(oy) * W;
        const float w1 = t.w1;
        for (int ox = 0; ox < W; ++ox) out[ox] = top[ox] + w1 * (bot[ox] - top[ox]);
      }
    });
  }

#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    if (a.epilogue) {  // the argmax (can_fuse)
      cuda::upsample_argmax(a.in[0], a.out, geometry_, bilinear_, a.in_geometry[0], a.in_geometry.back(),
                            ctx.stream);
      return;
    }
    cuda::upsample(a.in[0], a.out, geometry_, bilinear_, a.in_geometry[0], a.in_geometry.back(), ctx.stream);
  }
#endif

 private:
  std::vector<UpsampleTap> taps(int in, int out, double in_off, double in_stride,
                                double out_off, double out_stride) const {
    std::vector<UpsampleTap> t(static_cast<size_t>(out));
    for (int i = 0; i < out; ++i)
      t[size_t(i)] = upsample_tap(i, in, out, geometry_, bilinear_, in_off, in_stride, out_off,
                                  out_stride);
    return t;
  }

  static constexpr double kMinScale = 1.0 / 64, kMaxScale = 64;
  int scaled(int n) const { return std::max(1, int(std::lround(n * scale_))); }
  // size='s arithmetic on a reference dimension (values k..k+3 of size_).
  int sized(int d, int k, const char* what) const {
    const int64_t num = int64_t(d) + size_[k];
    SL_REQUIRE(num >= 0, "upsample '", name_, "': size= divides a negative number (reference ", what, " ", d, ")");
    const int64_t v = num / size_[k + 1] * size_[k + 2] + size_[k + 3];
    SL_REQUIRE(v >= 1 && v <= (int64_t(1) << 20), "upsample '", name_, "': size= gives a ", what, " of ", v,
               " for a reference ", what, " of ", d);
    return int(v);
  }

  bool bilinear_ = true, geometry_ = false;
  double scale_ = 0;  // > 0: resize by this factor (one input)
  bool sized_ = false;  // size= given
  int size_[8] = {0, 1, 1, 0, 0, 1, 1, 0};
};

}  // namespace

std::unique_ptr<Layer> make_upsample(const NodeDesc& d) { return std::make_unique<Upsample>(d); }

}  // namespace scenelab
