// Convolution, stride 1, odd square kernel, padding "valid" or "same", bias; a following ReLU can
// be fused, and on the GPU a 2x2 max-pool after it where the fused tensor-core kernel takes the
// shape (Conv2d::can_fuse). CPU paths: the paper's explicit GEMM formulation (Cavigelli et al.
// 2015, sec. 4.3): Y (Cout x Ho*Wo) = K (Cout x Cin*k*k) * X (Cin*k*k x Ho*Wo), built band by band
// of output rows so the im2col workspace is bounded and each thread works on its own band; and for
// 3x3, 5x5 and 7x7 kernels Winograd's minimal filtering (layers/conv2d_winograd.h), the default
// where the layer has enough channels for its GEMMs (--conv auto; --conv gemm or winograd to
// choose).
//
// The layer's class (this header, internal to the ops floor) is defined in three files:
// layers/conv2d.cpp (shapes, fusion, workspace, the CPU paths), layers/conv2d_cuda.cpp (which GPU
// algorithm runs) and layers/conv2d_cudnn.cpp (the cuDNN paths and the plan-cache choices). The
// GPU algorithms themselves are kernels/conv_*.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#include "layers/conv2d_winograd.h"
#include "layers/conv_phases.h"
#include "layers/cpu_gemm.h"
#include "layers/formats.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/conv_cuda.h"
#include "kernels/conv_cudnn.h"
#include "kernels/conv_cudnn_graph.h"
#include "core/cuda_timer.h"
#endif

namespace scenelab {

class Conv2d : public Layer {
#ifdef SCENELAB_WITH_CUDA
  // What a GPU choice depends on: the input's batch and size, the precision, the workspace
  // bound and the cuDNN handle.
  using ChoiceKey = std::tuple<int, int, int, int, size_t, uintptr_t>;
#endif
  // The GEMM is evaluated transposed, Y^T (pixels x Cout) = X^T (pixels x K) * K^T (K x Cout): the
  // same memory (row-major Y, X, K read as column-major), but Eigen blocks the long pixel dimension
  // as rows, which measured 3-8% faster than Cout-as-rows for these shapes.
  static constexpr size_t kBandFloats = size_t(1) << 21;  // im2col floats per thread (8 MB)
  static constexpr int kMinBands = 16;  // bands an image's rows are cut into at least (where it has them)

 public:
  explicit Conv2d(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"out", "k", "pad", "bias", "params"});
    out_ = d.attrs.get_int("out");
    k_ = d.attrs.get_int("k", 1);
    std::string pad = d.attrs.get_str("pad", "valid");
    bias_ = d.attrs.get_int("bias", 1) != 0;
    group_ = d.attrs.get_str("params", d.name);
    SL_REQUIRE(out_ > 0, "conv2d '", name_, "': out must be positive");
    SL_REQUIRE(k_ >= 1 && k_ % 2 == 1, "conv2d '", name_, "': k=", k_, " must be odd");
    SL_REQUIRE(pad == "valid" || pad == "same", "conv2d '", name_, "': pad must be valid or same");
    pad_ = pad == "same" ? k_ / 2 : 0;
  }
  const char* type() const override { return "conv2d"; }
  std::string param_group() const override { return group_; }
  // A following ReLU always (every path applies it on the way out); a max-pool after it on the
  // GPU's half-precision NHWC path: in our fused tensor-core kernels where they run this shape
  // (kernels/conv_fused_cuda.cu for 3 -> 16; kernels/conv_mma_cuda.cu, timed against cuDNN, for
  // 16 -> 64; --conv auto), else after cuDNN's convolution, which then writes
  // its raw output into the workspace and one kernel adds the bias, applies the ReLU and pools
  // (cuda::bias_relu_maxpool: the bias/ReLU pass over the full-size map and the pool's reading
  // of it become one read).
  bool can_fuse(const std::vector<Epilogue>& chain, const std::vector<Shape>& in,
                const std::vector<Format>& /*in_formats*/, const Backend& backend) const override {
    using K = Epilogue::Kind;
    if (chain.size() == 1 && chain[0].kind == K::Relu) return true;
    const Epilogue& last = chain.back();
    if (last.kind != K::MaxPool && last.kind != K::Pixelwise) return false;
#ifdef SCENELAB_WITH_CUDA
    if (last.kind == K::Pixelwise) return pixelwise_pair(chain, in[0], backend);
    if (chain.size() > 2 || (chain.size() == 2 && chain[0].kind != K::Relu)) return false;
    return mma_pool(in[0], last, backend) || pool_after_cudnn(backend);
#else
    (void)in, (void)backend;
    return false;
#endif
  }
  // A 1x1 convolution as the epilogue of another (a pixel-wise pair, e.g. a net's two
  // classifier layers): its output count, whether it has a bias; its weights come with it.
  Epilogue as_epilogue() const override {
    if (k_ != 1) return {};
    Epilogue e{Epilogue::Kind::Pixelwise, out_, 1};
    e.bias = bias_;
    return e;
  }
  // fp16/bf16 with cuDNN (--conv auto or cudnn): half-precision NHWC tensors; else f32 NCHW.
  Format format(const std::vector<Format>& /*in*/, const Backend& b) const override {
    return activation_format_of(b);
  }

  Shape infer_shape(const std::vector<Shape>& in) const override {
    const Shape& s = in[0];
    int ho = s.h + 2 * pad_ - k_ + 1, wo = s.w + 2 * pad_ - k_ + 1;
    SL_REQUIRE(ho >= 1 && wo >= 1, "conv2d '", name_, "' (", k_, "x", k_,
               ", valid) needs an input of at least ", k_, "x", k_, ", got ", s.w, "x", s.h);
    return Shape(s.n, out_, ho, wo);
  }
  Geometry infer_geometry(const std::vector<Geometry>& in,
                          const std::vector<Shape>& /*shapes*/) const override {
    return after_window(in[0], k_, 1, pad_);
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    std::vector<ParamSpec> p{{"weight", {out_, in[0].c, k_, k_}}};
    if (bias_) p.push_back({"bias", {out_}});
    return p;
  }
  double ops(const std::vector<Shape>& in, const Shape& o) const override {
    return 2.0 * o.n * o.c * in[0].c * k_ * k_ * double(o.h) * o.w;
  }
  size_t workspace_floats(const std::vector<Shape>& in, const Shape& o,
                          const Backend& backend) const override {
    if (k_ == 1) return 0;
#ifdef SCENELAB_WITH_CUDA
    if (const CudaContext* ctx = backend.cuda()) {
      // One band of gemm or the two half-size bands of gemm2s (or cuDNN's workspace), and the
      // half-precision copies under fp16; or the split convolution's tensors where it may run.
      const size_t bound = ctx->conv_workspace_bytes / sizeof(float);
      const cuda::ConvShape c = conv_shape(in[0], o);
      const size_t own = cuda::conv_workspace(c, bound,
                                              ctx->precision == Precision::FP16 || ctx->precision == Precision::BF16)
                             .total();
      return may_split(*ctx, c.cin) ? std::max(own, split_layout(c, bound).total) : own;
    }
#endif
    const int threads = backend.threads();
    if (winograd_for(in[0], backend.cpu_conv()))
      return size_t(threads) *
             WinogradConv::workspace_floats(WinogradConv::plan(in[0].c, out_, k_, in[0].h, in[0].w, pad_));
    if (phases(in[0]))
      return size_t(threads) *
             phase_conv(in[0], o, phase_split(o, threads)).workspace_floats();
    return size_t(threads) * band_rows(in[0], o) * size_t(o.w) * kdim(in[0]);
  }

  // After cuDNN with a pool fused: the convolution's raw output (in the activation type) after
  // its own workspace.
  size_t fused_workspace_floats(const std::vector<Epilogue>& chain, const std::vector<Shape>& in,
                                const Shape& o, const Backend& backend) const override {
    const size_t own = workspace_floats(in, o, backend);
#ifdef SCENELAB_WITH_CUDA
    if (!chain.empty() && chain.back().kind == Epilogue::Kind::MaxPool && !mma_pool(in[0], chain.back(), backend))
      return raw_offset(own) + (o.numel() * dtype_bytes(activation_format_of(backend).dtype) + 3) / 4;
#else
    (void)chain;
#endif
    return own;
  }

#ifdef SCENELAB_WITH_CUDA
  static size_t raw_offset(size_t own_floats) { return (own_floats + 63) / 64 * 64; }  // 256 bytes
  // The pool in the fused tensor-core kernel (conv_relu_pool_nhwc).
  bool mma_pool(const Shape& x, const Epilogue& pool, const Backend& backend) const {
    const CudaContext* ctx = backend.cuda();
    const Format f = activation_format_of(backend);
    return ctx && ctx->conv == ConvAlgo::Auto && f.layout == Layout::NHWC &&
           cuda::conv_pool_supported(conv_shape(x, infer_shape({x})), pool.k, pool.stride, f.dtype);
  }
  // This 1x1 convolution and a following one (after a ReLU or not) as one tensor-core kernel on
  // half-precision NHWC tensors (cuda::conv1x1_pair_nhwc).
  bool pixelwise_pair(const std::vector<Epilogue>& chain, const Shape& x, const Backend& backend) const {
    using K = Epilogue::Kind;
    const bool shape = k_ == 1 && (chain.size() == 1 || (chain.size() == 2 && chain[0].kind == K::Relu));
    const Format f = activation_format_of(backend);
    return shape && backend.cuda() && f.layout == Layout::NHWC &&
           cuda::conv1x1_pair_supported(x.c, out_, chain.back().k, f.dtype);
  }
  // The pool after cuDNN's NHWC convolution (cuda::bias_relu_maxpool: 2-byte types, channels a
  // multiple of 8).
  bool pool_after_cudnn(const Backend& backend) const {
#ifdef SCENELAB_WITH_CUDNN
    const Format f = activation_format_of(backend);
    return backend.cuda() && f.layout == Layout::NHWC && dtype_bytes(f.dtype) == 2 && k_ > 1 && out_ % 8 == 0;
#else
    (void)backend;
    return false;
#endif
  }
  cuda::ConvShape conv_shape(const Shape& x, const Shape& y) const {
    return {x.n, x.c, x.h, x.w, out_, k_, pad_, y.h, y.w};
  }
  // The split fp32 convolution (kernels/conv_cuda.h): asked for, or a candidate of auto in fp32
  // where the sum is at most kSplitMaxK long: the tensor cores' accumulation truncates, its error
  // grows with K (3.7e-5 of the largest output at K = 3136 on an H100, the nets' largest; the fp32
  // bound is 1e-4; tests/engine/cuda_backend_test.cpp, SplitConvolutionIsFp32Accurate).
  static constexpr int kSplitMaxK = 4096;
  bool may_split(const CudaContext& ctx, int cin) const {
#ifdef SCENELAB_WITH_CUDNN
    return k_ > 1 && (ctx.conv == ConvAlgo::Split || (ctx.conv == ConvAlgo::Auto && ctx.cudnn_graph &&
                                                      ctx.precision == Precision::FP32 && cin * k_ * k_ <= kSplitMaxK));
#else
    (void)ctx, (void)cin;
    return false;
#endif
  }
  // Its workspace, in floats: the input's pieces (NHWC, split_channels(cin)), the float NHWC
  // result, cuDNN's scratch: as much as the result and 16 MiB, within the workspace bound (the
  // engine that runs these on an H100 asked for 9-12 MiB on small maps, 101 MiB for a 124 MB
  // result at 1920x1080 and 383 MiB for 514 MB at 3840x2160).
  struct SplitLayout {
    size_t pieces, result, scratch, total;
  };
  static SplitLayout split_layout(const cuda::ConvShape& c, size_t bound) {
    SplitLayout l;
    l.pieces = raw_offset(size_t(c.n) * c.h * c.w * cuda::split_channels(c.cin));
    l.result = raw_offset(size_t(c.n) * c.ho * c.wo * c.cout);
    l.scratch = std::min(bound, l.result + (size_t(16) << 20) / sizeof(float));
    l.total = l.pieces + l.result + l.scratch;
    return l;
  }
  // direct: the paper's direct kernel; gemm: im2col + cuBLAS; gemm2s: the same on two streams;
  // cudnn: cuDNN's fastest algorithm (timed once per input size); auto: every candidate timed
  // (CUDA events) the first time this layer runs at an input size and precision, the fastest
  // kept. The first run at a size is never captured into a CUDA graph (engine/graph.cpp), so
  // the timing (host-synchronising) happens outside capture.
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override;
  // --conv auto in fp32: every candidate timed once at this size (run(algo) runs one); the pick.
  template <class Run>
  ConvAlgo choose_auto(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c, const ChoiceKey& key,
                       Run&& run) const;
  // Under auto on half-precision NHWC tensors, our implicit-GEMM kernel (conv_mma_nhwc) against
  // cuDNN's path (`cudnn`: the convolution and, for a pool, the pass that pools) the first time a
  // size runs, each run once to warm up and twice timed (CUDA events); runs ours if it is the pick
  // and says so (false: cuDNN's path is the pick, not run).
  template <class CudnnPath>
  bool run_mma(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c, const float* b, bool pool,
               CudnnPath&& cudnn) const;

  // f16/bf16 NHWC through cuDNN into `out`: the graph API (its Hopper kernels, the epilogue
  // fused where it pays), the legacy API where no graph engine runs the shape. pooled: the raw
  // convolution for a fused pool (no bias, no ReLU: a graph of its own, remembered apart in
  // plan caches).
  void forward_nhwc(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c, void* out, bool relu,
                    const float* b, bool pooled) const;

  // The split fp32 convolution: the input's two pieces, one cuDNN convolution over 3 x cin
  // channels into a float NHWC result, back to NCHW with the bias and ReLU (where cuDNN's fused
  // graph did not apply them). The bias and ReLU are handed to CudnnGraphConv although its plain
  // graph leaves them to the transpose: they make the fused graph a candidate, the one engine
  // that runs these under a small workspace bound (no plain engine fits 64 KiB:
  // ReplanOntoAnotherBackend fails on the H100 without it).
  void forward_split(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c,
                     const float* b) const;

  std::string detail() const override { return last_; }

  // The algorithm auto picked (and cuDNN's own pick within it), for plan caches:
  // "gemm" | "gemm2s" | "direct" | "cudnn ALGO MATH".
  std::string tuning(const std::vector<Shape>& in, const Backend& backend) const override;
  bool restore_tuning(const std::vector<Shape>& in, const Backend& backend,
                      const std::string& text) const override;

 private:
  ChoiceKey choice_key(const Shape& x, const CudaContext& ctx) const {
#ifdef SCENELAB_WITH_CUDNN
    const uintptr_t handle = reinterpret_cast<uintptr_t>(ctx.cudnn);
#else
    const uintptr_t handle = 0;
#endif
    return ChoiceKey{x.n, x.h, x.w, int(ctx.precision), ctx.conv_workspace_bytes, handle};
  }
  std::string algo_label(ConvAlgo algo, const ChoiceKey& key, Precision p) const;
  mutable std::string last_;
  mutable cuda::HalfWeights w16_;
  mutable cuda::HalfWeights w16_next_;  // a fused following 1x1 convolution's
  mutable cuda::HalfWeights wmma_;  // in the fragment order of our mma convolution kernels
  mutable std::map<ChoiceKey, ConvAlgo> auto_choice_;
#ifdef SCENELAB_WITH_CUDNN
  mutable std::map<ChoiceKey, std::unique_ptr<cuda::CudnnConv>> cudnn_;
  mutable std::map<ChoiceKey, std::unique_ptr<cuda::CudnnGraphConv>> graph_;
  mutable std::map<ChoiceKey, std::unique_ptr<cuda::CudnnGraphConv>> split_;
  mutable cuda::SplitWeights split_w_;
  mutable std::set<ChoiceKey> graph_failed_;
  mutable std::map<ChoiceKey, std::string> preset_;  // plan-cache choices not yet built
  mutable std::set<ChoiceKey> pooled_;  // shapes whose raw convolution feeds a fused pool
  mutable std::map<ChoiceKey, bool> mma_choice_;  // our kernel (true) or cuDNN's path
#endif

 public:
#endif

  void forward_cpu(const ForwardArgs& a) const override;

 private:
  size_t kdim(const Shape& in) const { return size_t(in.c) * k_ * k_; }
  // Winograd on the CPU: where asked and the kernel allows, or under auto where the layer has the
  // input channels to keep its 64 GEMMs (tiles x cin x cout) efficient. Measured (multiscale
  // 480x360, 2 threads, AVX-512): 3 -> 16 channels 4.19 ms by Winograd against 3.12 by im2col,
  // 16 -> 64 7.10 against 9.97, 64 -> 256 20.6 against 38.9 (and 20.9 against 40.8 with the
  // phase GEMM, 2026-12-07). A 3x3 kernel gains less from its tiles: against the phase GEMM
  // (DDRNet-23-slim and BiSeNet V2 at 480x360, 2 threads, Zen 5, 2026-12-07) it wins only on large
  // maps (64 -> 64 on 240x180: 5.2-5.6 ms against 7.4) and loses from 120x90 down (64 -> 64 on
  // 120x90 2.09 against 1.90, on 60x45 0.78-0.86 against 0.55-0.60; 128 -> 1024 on 60x45 19.8-20.1
  // against 15.6-15.9; 128 -> 128 on 60x45 is level, 1.85-1.91 against 1.94-1.99): there, below 64
  // channels or 16,384 pixels, the GEMM.
  static constexpr int kWinogradMinCin = 16;
  static constexpr int kWinograd3x3MinCin = 64;
  static constexpr int kWinograd3x3MinPixels = 16384;
  bool winograd_for(const Shape& in, CpuConv how) const {
    if (!WinogradConv::supported(k_) || how == CpuConv::Gemm) return false;
    if (how == CpuConv::Winograd) return true;
    if (k_ == 3) return in.c >= kWinograd3x3MinCin && int64_t(in.h) * in.w >= kWinograd3x3MinPixels;
    return in.c >= kWinogradMinCin;
  }
  // The weights transformed once (the first forward pass; guarded: plans on several threads may
  // share this layer).
  std::shared_ptr<const WinogradConv> winograd_weights(const float* w, int cin) const {
    std::lock_guard<std::mutex> lock(winograd_mu_);
    if (winograd_of_ != w || !winograd_ || winograd_->cin() != cin) {
      winograd_ = std::make_shared<const WinogradConv>(w, out_, cin, k_);
      winograd_of_ = w;
    }
    return winograd_;
  }
  mutable std::mutex winograd_mu_;
  mutable const float* winograd_of_ = nullptr;
  mutable std::shared_ptr<const WinogradConv> winograd_;
  // Y^T (cols x out, column stride ldy) = X^T (cols x K, column stride ldx) * W^T (K x out): one
  // band, on the calling thread.
  void gemm(const float* x, size_t ldx, size_t cols, size_t K, const float* w, float* y,
            size_t ldy) const {
    sgemm_colmajor(cols, size_t(out_), K, x, ldx, w, K, y, ldy);
  }
  // Output rows per band: the im2col bound, and at least kMinBands bands so that the threads share
  // the work. Never the thread count: a band's GEMM shape decides the GEMM's blocking (Eigen's or
  // OpenBLAS's) and so the order of its sums, and results must not depend on how many threads ran
  // them.
  int band_rows(const Shape& in, const Shape& o) const {
    size_t per_row = kdim(in) * size_t(o.w);
    int rows = int(std::max<size_t>(1, kBandFloats / std::max<size_t>(1, per_row)));
    int fair = (o.h + kMinBands - 1) / kMinBands;
    return std::max(1, std::min({rows, fair, o.h}));
  }
  // The GEMM's columns read in place from the padded input band (layers/conv_phases.h) where the
  // build has the indirect GEMM: the same sums as im2col's, without writing k x k copies of the
  // input (DDRNet-23-slim's 3x3 layers at 480x360, 2 threads, AMD Zen 5: 0.55 -> 0.45 ms each).
  ConvTaps taps() const { return {k_, k_, 1, 1, 1, 1, pad_, pad_}; }
  bool phases(const Shape& in) const { return k_ > 1 && PhaseConv::supports(taps(), in.c); }
  PhaseSplit phase_split(const Shape& o, int threads) const {
    return PhaseSplit(taps(), o.h, o.w, out_, o.n, threads);
  }
  PhaseConv phase_conv(const Shape& in, const Shape& o, const PhaseSplit& s) const {
    return PhaseConv(taps(), in.c, in.h, in.w, o.w, s.rows, s.chunk);
  }
  // X[(c*k + dy)*k + dx][(yy - y0)*wo + xx] = x[c][yy + dy - pad][xx + dx - pad], zero outside.
  void im2col(const TensorView& x, int n, int y0, int y1, int wo, float* ws) const;
  void epilogue(float* out, size_t plane, size_t cols, const float* b, bool relu) const {
    for (int o = 0; o < out_; ++o) {
      float* p = out + size_t(o) * plane;
      const float bo = b ? b[o] : 0.f;
      if (relu)
        for (size_t i = 0; i < cols; ++i) p[i] = std::max(p[i] + bo, 0.f);
      else if (b)
        for (size_t i = 0; i < cols; ++i) p[i] += bo;
    }
  }

  int out_ = 0, k_ = 1, pad_ = 0;
  bool bias_ = true;
  std::string group_;
};

}  // namespace scenelab
