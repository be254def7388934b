// A convolution of any shape ONNX's Conv describes: kh x kw kernel, strides, dilations, padding on
// each side (top, left, bottom, right), groups (depthwise included), bias. conv2d (the paper's
// odd square kernels, stride 1: every fast path) stays the layer for what it takes; the ONNX
// importer maps the rest here. CPU: per image, group and band of output rows, the group's weights
// times the band's taps read in place from its padded stride phases (layers/conv_phases.h; an
// im2col in a thread's workspace where the build lacks AVX-512); depthwise at stride 1 directly
// on a zero-padded copy of the channel. GPU: cuDNN's convolution in
// the network's activation format (f16/bf16 NHWC under fp16/bf16, f32 NCHW otherwise), its
// algorithm timed on the first run and kept in plan caches, except depthwise ones in NHWC, which
// run on our kernel (kernels/conv_general.cu) unless cuDNN is asked for by name; where cuDNN cannot run it (padding
// that differs between the two sides, no cuDNN, the engine's own kernels forced) a direct kernel
// on f32 NCHW (kernels/conv_general.cu). Under fp16/bf16 cuDNN's graph API runs it (its engines
// timed on the first run, as conv2d's), the legacy API where no graph engine runs the shape. A
// following ReLU is fused (applied on the way out).
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "engine/layer.h"
#include "layers/conv_phases.h"
#include "layers/cpu_gemm.h"
#include "layers/formats.h"
#include "layers/window_columns.h"
#ifdef SCENELAB_WITH_CUDA
#include <cstdio>
#include <map>
#include <memory>
#include <tuple>

#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#ifdef SCENELAB_WITH_CUDNN
#include <set>

#include "kernels/conv_cudnn.h"
#include "kernels/conv_cudnn_graph.h"
#endif
#endif

namespace scenelab {
namespace {

constexpr size_t kBandPixels = 4096;  // output pixels a thread's im2col holds (at least a row)
constexpr int kMinBands = 16;         // bands an image is cut into at least, where it has the rows (as conv2d)
constexpr size_t kMinBandPixels = 256;  // but no band below this (a GEMM of a few pixels runs at a tenth of its rate)
constexpr int kMinChunk = 16;           // output channels a task computes at least, where channels are split
#ifdef SCENELAB_WITH_CUDA
constexpr size_t kCudnnWorkspaceFloats = size_t(16) << 20;  // 64 MiB: cuDNN's algorithms for these shapes
#endif

// Output rows a band holds: at most kBandPixels, and few enough that an image has kMinBands bands
// for the threads to share (a 60 x 45 map in one band kept one of two threads busy: 70 GOp/s),
// but at least kMinBandPixels (DDRNet's 8 x 6 maps in bands of one row: 0.77 ms where ONNX
// Runtime took 0.34).
int band_rows(int out_h, int out_w) {
  const size_t w = size_t(std::max(1, out_w));
  const int by_pixels = std::max(1, int(kBandPixels / w));
  const int least = int((kMinBandPixels + w - 1) / w);
  return std::max(1, std::min(out_h, std::max(least, std::min(by_pixels, (out_h + kMinBands - 1) / kMinBands))));
}

int parse_pair(const Attrs& a, const std::string& key, int def, int index) {
  if (!a.has(key)) return def;
  const std::vector<int> v = a.get_ints(key, kMaxWindowAttr);
  SL_REQUIRE(v.size() == 1 || v.size() == 2, "attribute ", key, ": one or two values");
  return v[v.size() == 1 ? 0 : size_t(index)];
}

class Conv : public Layer {
 public:
  explicit Conv(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"out", "kernel", "stride", "dilation", "pads", "groups", "bias", "params"});
    out_ = d.attrs.get_int("out");
    kh_ = parse_pair(d.attrs, "kernel", 1, 0), kw_ = parse_pair(d.attrs, "kernel", 1, 1);
    sh_ = parse_pair(d.attrs, "stride", 1, 0), sw_ = parse_pair(d.attrs, "stride", 1, 1);
    dh_ = parse_pair(d.attrs, "dilation", 1, 0), dw_ = parse_pair(d.attrs, "dilation", 1, 1);
    if (d.attrs.has("pads")) {
      const std::vector<int> p = d.attrs.get_ints("pads", kMaxWindowAttr);
      SL_REQUIRE(p.size() == 4, "conv '", name_, "': pads=top,left,bottom,right (4 values)");
      pt_ = p[0], pl_ = p[1], pb_ = p[2], pr_ = p[3];
    }
    groups_ = d.attrs.get_int("groups", 1);
    bias_ = d.attrs.get_int("bias", 1) != 0;
    group_ = d.attrs.get_str("params", d.name);
    SL_REQUIRE(out_ > 0 && kh_ > 0 && kw_ > 0 && sh_ > 0 && sw_ > 0 && dh_ > 0 && dw_ > 0 && groups_ > 0,
               "conv '", name_, "': out, kernel, stride, dilation and groups must be positive");
    SL_REQUIRE(pt_ >= 0 && pl_ >= 0 && pb_ >= 0 && pr_ >= 0, "conv '", name_, "': negative padding");
    SL_REQUIRE(out_ % groups_ == 0, "conv '", name_, "': out=", out_, " is not a multiple of groups=", groups_);
  }
  const char* type() const override { return "conv"; }
  std::string param_group() const override { return group_; }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    std::vector<ParamSpec> p = {{"weight", {out_, in[0].c / groups_, kh_, kw_}}};
    if (bias_) p.push_back({"bias", {out_}});
    return p;
  }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    const Shape& x = in[0];
    SL_REQUIRE(x.c % groups_ == 0, "conv '", name_, "': ", x.c, " input channels are not a multiple of groups=",
               groups_);
    const int ho = (x.h + pt_ + pb_ - dh_ * (kh_ - 1) - 1) / sh_ + 1;
    const int wo = (x.w + pl_ + pr_ - dw_ * (kw_ - 1) - 1) / sw_ + 1;
    SL_REQUIRE(x.h + pt_ + pb_ >= dh_ * (kh_ - 1) + 1 && x.w + pl_ + pr_ >= dw_ * (kw_ - 1) + 1, "conv '", name_,
               "': input ", x.str(), " is smaller than its (dilated) kernel");
    return Shape(x.n, out_, ho, wo);
  }
  Geometry infer_geometry(const std::vector<Geometry>& in, const std::vector<Shape>&) const override {
    Geometry g = in[0];
    g.offset_y += g.stride_y * (dh_ * (kh_ - 1) / 2.0 - pt_);
    g.offset_x += g.stride_x * (dw_ * (kw_ - 1) / 2.0 - pl_);
    g.stride_y *= sh_;
    g.stride_x *= sw_;
    return g;
  }
  double ops(const std::vector<Shape>& in, const Shape& out) const override {
    return 2.0 * double(out.numel()) * double(in[0].c / groups_) * kh_ * kw_;
  }
  bool can_fuse(const std::vector<Epilogue>& chain, const std::vector<Shape>&, const std::vector<Format>&,
                const Backend&) const override {
    return chain.size() == 1 && chain[0].kind == Epilogue::Kind::Relu;
  }
  Format format(const std::vector<Format>&, const Backend& b) const override {
    return on_cudnn(b) ? activation_format_of(b) : Format{};
  }
  size_t workspace_floats(const std::vector<Shape>& in, const Shape& out, const Backend& b) const override {
    if (b.kind() != DeviceKind::CPU) {
#ifdef SCENELAB_WITH_CUDA
      return on_cudnn(b) ? cudnn_workspace_floats(*b.cuda()) : 0;
#else
      return 0;
#endif
    }
    const size_t threads = size_t(std::max(1, b.threads()));
    if (depthwise(in[0])) {
      const Padded pd = padded(in[0], out);
      return (pd.plane + pd.run) * threads;
    }
    if (PhaseConv::supports(taps(), in[0].c / groups_))
      return threads * phase_conv(in[0], out, phase_split(out, b.threads())).workspace_floats();
    const size_t k = size_t(in[0].c / groups_) * kh_ * kw_;
    return k * size_t(band_rows(out.h, out.w)) * size_t(out.w) * threads;
  }

  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    const int cin_g = x.shape.c / groups_, cout_g = out_ / groups_;
    const size_t k = size_t(cin_g) * kh_ * kw_;
    const int rows = band_rows(y.shape.h, y.shape.w);
    const int bands = (y.shape.h + rows - 1) / rows;
    const float* w = a.params->data("weight");
    const float* bias = bias_ ? a.params->data("bias") : nullptr;
    const bool relu = a.fused_relu;
    if (depthwise(x.shape)) return forward_depthwise(x, y, w, bias, relu, a.workspace, a.threads);
    if (PhaseConv::supports(taps(), cin_g)) {  // the GEMM's columns read in place (layers/conv_phases.h)
      const PhaseSplit sp = phase_split(y.shape, a.threads);
      phase_forward(phase_conv(x.shape, y.shape, sp), sp, x, y, w, bias, relu, groups_, a.workspace, a.threads);
      return;
    }
    const size_t per_thread = k * size_t(rows) * y.shape.w;
    // Where the bands are too few for the threads (small maps), each band's output channels are
    // split into chunks, each chunk a task (its own im2col of the band: small there).
    const int64_t tasks = int64_t(y.shape.n) * groups_ * bands;
    const int chunks = int(std::max<int64_t>(
        1, std::min<int64_t>((2 * int64_t(std::max(1, a.threads)) + tasks - 1) / tasks, cout_g / kMinChunk)));
    const int chunk = (cout_g + chunks - 1) / chunks;
    parallel_for(tasks * chunks, a.threads, [&](int64_t task) {
      const int part = int(task % chunks);
      const int64_t t = task / chunks;
      const int band = int(t % bands), g = int((t / bands) % groups_), n = int(t / bands / groups_);
      const int o0 = part * chunk, o1 = std::min(cout_g, o0 + chunk);
      const int y0 = band * rows, y1 = std::min(y.shape.h, y0 + rows);
      const size_t p = size_t(y1 - y0) * y.shape.w;  // the band's output pixels
      float* col = a.workspace + size_t(parallel_thread_index()) * per_thread;  // as conv2d's bands
      // im2col: row (c, i, j), column (oy - y0, ox).
      for (int c = 0; c < cin_g; ++c) {
        const float* src = x.channel(n, g * cin_g + c);
        for (int i = 0; i < kh_; ++i)
          for (int j = 0; j < kw_; ++j) {
            float* row = col + ((size_t(c) * kh_ + i) * kw_ + j) * p;
            for (int oy = y0; oy < y1; ++oy) {
              const int iy = oy * sh_ - pt_ + i * dh_;
              float* r = row + size_t(oy - y0) * y.shape.w;
              if (iy < 0 || iy >= x.shape.h) {
                std::fill(r, r + y.shape.w, 0.f);
                continue;
              }
              // ix = ox sw - pl + j dw inside [0, w) for ox in [lo, hi); zeros outside
              const int off = j * dw_ - pl_, W = y.shape.w;
              int lo = 0, hi = 0;
              inside_columns(off, sw_, x.shape.w, W, lo, hi);
              const float* s_row = src + size_t(iy) * x.shape.w;  // read at ox sw + off >= 0 only
              std::fill(r, r + lo, 0.f);
              if (sw_ == 1) {
                if (hi > lo) std::memcpy(r + lo, s_row + (lo + off), size_t(hi - lo) * sizeof(float));
              } else {
                for (int ox = lo; ox < hi; ++ox) r[ox] = s_row[ox * sw_ + off];
              }
              std::fill(r + hi, r + W, 0.f);
            }
          }
      }
      // Y (cout_g x p) = W_g (cout_g x k) * col (k x p), as column-major Y^T = col^T W_g^T;
      // the band's rows of each output channel are contiguous in y (stride plane).
      const size_t plane = y.shape.plane();
      float* out0 = y.f32() + (size_t(n) * out_ + size_t(g) * cout_g + size_t(o0)) * plane + size_t(y0) * y.shape.w;
      sgemm_colmajor(p, size_t(o1 - o0), k, col, p, w + (size_t(g) * cout_g + size_t(o0)) * k, k, out0, plane);
      for (int o = 0; o < o1 - o0; ++o) {
        float* r = out0 + size_t(o) * plane;
        const float b = bias ? bias[g * cout_g + o0 + o] : 0.f;
        for (size_t i = 0; i < p; ++i) {
          const float v = r[i] + b;
          r[i] = relu ? std::max(v, 0.f) : v;
        }
      }
    });
  }
  // One input channel a group (depthwise, or a multiplier of it) at stride 1: an im2col would be
  // a 1-row GEMM a channel (11-28 GOp/s). Instead the channel is copied into a zero-padded plane
  // (a thread's workspace) and each tap adds its weighted plane, shifted, over the whole output
  // as one flat run of padded-width rows (vectorised; the columns past the output's are dropped
  // on the way out); the sum in (kernel row, column) order.
  bool depthwise(const Shape& x) const { return x.c == groups_ && sh_ == 1 && sw_ == 1; }
  ConvTaps taps() const { return {kh_, kw_, sh_, sw_, dh_, dw_, pt_, pl_}; }
  PhaseSplit phase_split(const Shape& y, int threads) const {
    return PhaseSplit(taps(), y.h, y.w, out_ / groups_, y.n * groups_, threads);
  }
  PhaseConv phase_conv(const Shape& x, const Shape& y, const PhaseSplit& s) const {
    return PhaseConv(taps(), x.c / groups_, x.h, x.w, y.w, s.rows, s.chunk);
  }
  struct Padded {
    size_t wp, plane, run;  // padded row width, padded plane (with the last taps' overrun), output run
  };
  Padded padded(const Shape& x, const Shape& y) const {
    const size_t wp = size_t(x.w) + pl_ + pr_, hp = size_t(x.h) + pt_ + pb_;
    return {wp, hp * wp + size_t(kw_ - 1) * dw_ + 1, size_t(y.h) * wp};
  }
  void forward_depthwise(const TensorView& x, const TensorView& y, const float* w, const float* bias, bool relu,
                         float* workspace, int threads) const {
    const int cout_g = out_ / groups_;
    const Padded pd = padded(x.shape, y.shape);
    parallel_for(int64_t(y.shape.n) * out_, threads, [&](int64_t t) {
      const int o = int(t % out_), n = int(t / out_);
      float* pad = workspace + size_t(parallel_thread_index()) * (pd.plane + pd.run);
      float* acc = pad + pd.plane;
      const float* src = x.channel(n, o / cout_g);
      std::fill(pad, pad + pd.plane, 0.f);
      for (int iy = 0; iy < x.shape.h; ++iy)
        std::memcpy(pad + (size_t(iy) + pt_) * pd.wp + pl_, src + size_t(iy) * x.shape.w, size_t(x.shape.w) * sizeof(float));
      std::fill(acc, acc + pd.run, 0.f);
      const float* wk = w + size_t(o) * kh_ * kw_;
      for (int i = 0; i < kh_; ++i)
        for (int j = 0; j < kw_; ++j) {
          const float wv = wk[i * kw_ + j];
          const float* s = pad + size_t(i) * dh_ * pd.wp + size_t(j) * dw_;
          for (size_t q = 0; q < pd.run; ++q) acc[q] += wv * s[q];
        }
      float* dst = y.f32() + (size_t(n) * out_ + size_t(o)) * y.shape.plane();
      const float b = bias ? bias[o] : 0.f;
      for (int oy = 0; oy < y.shape.h; ++oy) {
        const float* a = acc + size_t(oy) * pd.wp;
        float* r = dst + size_t(oy) * y.shape.w;
        for (int ox = 0; ox < y.shape.w; ++ox) {
          const float v = a[ox] + b;
          r[ox] = relu ? std::max(v, 0.f) : v;
        }
      }
    });
  }

#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    const float* w = a.params->data("weight");
    const float* b = bias_ ? a.params->data("bias") : nullptr;
    const cuda::ConvGeneral geometry{kh_, kw_, sh_, sw_, dh_, dw_, pt_, pl_, groups_};
    // Depthwise in NHWC: our kernel (cuDNN's implicit GEMM ran BiSeNet V2's at 30-300 GOp/s), unless
    // cuDNN is asked for by name.
    if (a.in[0].format.layout == Layout::NHWC && a.in[0].shape.c == groups_ && ctx.conv != ConvAlgo::Cudnn) {
      cuda::conv_depthwise_nhwc(a.in[0], a.out, w, b, geometry, a.fused_relu, ctx.stream);
      ran_depthwise_ = true;
      return;
    }
    ran_depthwise_ = false;
#ifdef SCENELAB_WITH_CUDNN
    ran_ = nullptr, ran_graph_ = nullptr;
    if (cudnn_usable(ctx)) {
      SL_REQUIRE(a.in[0].format == a.out.format, "conv '", name_, "': input ", a.in[0].format.str(), ", output ",
                 a.out.format.str());
      const size_t bound = cudnn_workspace_floats(ctx);
      if (forward_graph(a, ctx, w, b, bound)) return;
      auto& conv = cudnn_for(a.in[0].shape, ctx);
      if (!conv.chosen()) conv.choose(a.in[0].data, w, a.out.data, a.workspace, bound, ctx.stream);
      conv.forward(a.in[0].data, w, b, a.out.data, a.fused_relu, a.workspace, bound, ctx.stream);
      ran_ = &conv;
      return;
    }
#endif
    cuda::conv_general(a.in[0], a.out, w, b, geometry, a.fused_relu, ctx.stream);
  }
  // "cudnng FUSED INDEX": the graph API's engine; "cudnn ALGO MATH": the legacy API's algorithm;
  // both timed on the first run.
  std::string tuning(const std::vector<Shape>& in, const Backend& backend) const override {
#ifdef SCENELAB_WITH_CUDNN
    const CudaContext* ctx = backend.cuda();
    if (!ctx || !cudnn_usable(*ctx)) return {};
    const Key key = key_of(in[0], *ctx);
    auto g = graph_.find(key);
    if (g != graph_.end() && g->second && g->second->chosen()) return "cudnng " + g->second->choice();
    auto it = cudnn_.find(key);
    if (it != cudnn_.end() && it->second->chosen())
      return str_cat("cudnn ", it->second->algo_id(), " ", it->second->math_id());
#else
    (void)in, (void)backend;
#endif
    return {};
  }
  bool restore_tuning(const std::vector<Shape>& in, const Backend& backend, const std::string& text) const override {
#ifdef SCENELAB_WITH_CUDNN
    const CudaContext* ctx = backend.cuda();
    if (!ctx || !cudnn_usable(*ctx)) return false;
    const Key key = key_of(in[0], *ctx);
    if (text.rfind("cudnng ", 0) == 0) {  // checked when the layer first runs (it needs the fused ReLU)
      preset_[key] = text.substr(7);
      graph_.erase(key);
      graph_failed_.erase(key);
      return true;
    }
    int id = -1, math = -1;
    char tail = 0;
    if (std::sscanf(text.c_str(), "cudnn %d %d%c", &id, &math, &tail) != 2) return false;
    graph_failed_.insert(key);  // the legacy API was what ran this shape
    return cudnn_for(in[0], *ctx).preset(id, math, cudnn_workspace_floats(*ctx));
#else
    (void)in, (void)backend, (void)text;
    return false;
#endif
  }
  // What the last GPU pass ran (named here, not on each run: no string is built on the hot path).
  std::string detail() const override {
    if (ran_depthwise_) return "depthwise nhwc";
#ifdef SCENELAB_WITH_CUDNN
    if (ran_graph_) return ran_graph_->name();
    if (ran_) return "cudnn " + ran_->algo_name();
#endif
    return "direct";
  }
#endif

 private:
  // cuDNN runs this convolution on this backend: pads equal on both sides (cuDNN's only padding).
  bool on_cudnn(const Backend& b) const {
#ifdef SCENELAB_WITH_CUDA
    const CudaContext* ctx = b.cuda();
    return ctx && cudnn_usable(*ctx);
#else
    (void)b;
    return false;
#endif
  }
#ifdef SCENELAB_WITH_CUDA
  bool cudnn_usable(const CudaContext& ctx) const {
#ifdef SCENELAB_WITH_CUDNN
    return ctx.cudnn && !ctx.own_kernels && (ctx.conv == ConvAlgo::Auto || ctx.conv == ConvAlgo::Cudnn) &&
           pt_ == pb_ && pl_ == pr_;
#else
    (void)ctx;
    return false;
#endif
  }
  static size_t cudnn_workspace_floats(const CudaContext& ctx) {
    return std::min(kCudnnWorkspaceFloats, ctx.conv_workspace_bytes / sizeof(float));
  }
#ifdef SCENELAB_WITH_CUDNN
  using Key = std::tuple<int, int, int, int, int, uintptr_t>;
  Key key_of(const Shape& x, const CudaContext& ctx) const {
    return Key{x.n, x.c, x.h, x.w, int(ctx.precision), reinterpret_cast<uintptr_t>(ctx.cudnn)};
  }
  cuda::ConvShape conv_shape(const Shape& x) const {
    const Shape y = infer_shape({x});
    cuda::ConvShape c{x.n, x.c, x.h, x.w, out_, kh_, pt_, y.h, y.w};
    c.kw = kw_, c.pad_w = pl_, c.sh = sh_, c.sw = sw_, c.dh = dh_, c.dw = dw_, c.groups = groups_;
    return c;
  }
  cuda::CudnnConv& cudnn_for(const Shape& x, const CudaContext& ctx) const {
    auto& conv = cudnn_[key_of(x, ctx)];
    if (!conv) conv = std::make_unique<cuda::CudnnConv>(ctx.cudnn, conv_shape(x), ctx.precision);
    return *conv;
  }
  // Half-precision NHWC through cuDNN's graph API, as conv2d's layers: its Hopper engines and the
  // bias and ReLU fused where that is faster (the legacy API's implicit GEMM ran DDRNet-23-slim's
  // stride-2 layers at 730-1,100 GOp/s on an H100). False where no engine runs the shape, or the
  // legacy API is the plan cache's choice: the legacy API runs it then.
  bool forward_graph(const ForwardArgs& a, const CudaContext& ctx, const float* w, const float* b,
                     size_t bound) const {
    const DType t = a.in[0].format.dtype;
    if (!ctx.cudnn_graph || a.in[0].format.layout != Layout::NHWC || (t != DType::F16 && t != DType::BF16))
      return false;
    const Key key = key_of(a.in[0].shape, ctx);
    if (graph_failed_.count(key)) return false;
    const cuda::ConvShape c = conv_shape(a.in[0].shape);
    const void* wt = w16_.get(w, c, cuda::WeightLayout::KRSC, t, ctx.stream);
    const size_t scratch = bound * sizeof(float);
    auto& g = graph_[key];
    if (!g) {
      g = std::make_unique<cuda::CudnnGraphConv>(ctx.cudnn, c, t, a.fused_relu, b != nullptr);
      auto saved = preset_.find(key);
      if (!g->ready(saved != preset_.end() ? saved->second : std::string(), a.in[0].data, wt, b, a.out.data,
                    a.workspace, scratch, ctx.runtime_fusion, ctx.stream)) {
        g.reset();
        graph_failed_.insert(key);
        return false;
      }
    }
    g->forward(a.in[0].data, wt, b, a.out.data, a.workspace, ctx.stream);
    ran_graph_ = g.get();
    return true;
  }
  mutable std::map<Key, std::unique_ptr<cuda::CudnnConv>> cudnn_;
  mutable std::map<Key, std::unique_ptr<cuda::CudnnGraphConv>> graph_;
  mutable std::set<Key> graph_failed_;
  mutable std::map<Key, std::string> preset_;  // a plan cache's graph choice, checked when first run
  mutable cuda::HalfWeights w16_;               // KRSC, for the graph
  mutable const cuda::CudnnConv* ran_ = nullptr;  // what the last GPU pass ran; both null: the direct kernel
  mutable const cuda::CudnnGraphConv* ran_graph_ = nullptr;
#endif
  mutable bool ran_depthwise_ = false;  // the last GPU pass ran conv_depthwise_nhwc
#endif
  int out_ = 0, kh_ = 1, kw_ = 1, sh_ = 1, sw_ = 1, dh_ = 1, dw_ = 1, pt_ = 0, pl_ = 0, pb_ = 0, pr_ = 0, groups_ = 1;
  bool bias_ = true;
  std::string group_;
};

}  // namespace

std::unique_ptr<Layer> make_conv(const NodeDesc& d) { return std::make_unique<Conv>(d); }

}  // namespace scenelab
