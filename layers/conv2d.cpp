// Convolution, stride 1, odd square kernel, padding "valid" or "same", bias; a following ReLU can
// be fused, and on the GPU a 2x2 max-pool after it where the fused tensor-core kernel takes the
// shape (Conv2d::can_fuse). CPU paths: the paper's explicit GEMM formulation (Cavigelli et al.
// 2015, sec. 4.3): Y (Cout x Ho*Wo) = K (Cout x Cin*k*k) * X (Cin*k*k x Ho*Wo), built band by band
// of output rows so the im2col workspace is bounded and each thread works on its own band; and for
// 3x3, 5x5 and 7x7 kernels Winograd's minimal filtering (layers/conv2d_winograd.h), the default
// where the layer has enough channels for its GEMMs (--conv auto; --conv gemm or winograd to
// choose).
#include <omp.h>

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
namespace {

// The GEMM is evaluated transposed, Y^T (pixels x Cout) = X^T (pixels x K) * K^T (K x Cout): the
// same memory (row-major Y, X, K read as column-major), but Eigen blocks the long pixel dimension
// as rows, which measured 3-8% faster than Cout-as-rows for these shapes.
constexpr size_t kBandFloats = size_t(1) << 21;  // im2col floats per thread (8 MB)
constexpr int kMinBands = 16;  // bands an image's rows are cut into at least (where it has them)

class Conv2d : public Layer {
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
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    // The convolution's own output size (a.out is the pooled map when a pool was fused).
    const Shape& x = a.in[0].shape;
    const cuda::ConvShape c = conv_shape(x, Shape(x.n, out_, x.h + 2 * pad_ - k_ + 1, x.w + 2 * pad_ - k_ + 1));
    const float* w = a.params->data("weight");
    const float* b = bias_ ? a.params->data("bias") : nullptr;
    const size_t bound = ctx.conv_workspace_bytes / sizeof(float);
    if (a.epilogue && a.epilogue->back().kind == Epilogue::Kind::Pixelwise) {  // can_fuse said so
      const Epilogue& next = a.epilogue->back();
      const DType t = a.out.format.dtype;
      const cuda::ConvShape c2{x.n, out_, x.h, x.w, next.k, 1, 0, x.h, x.w};
      cuda::conv1x1_pair_nhwc(x.n * x.h * x.w, x.c, out_, next.k, a.in[0].data,
                              w16_.get(w, c, cuda::WeightLayout::OIHW, t, ctx.stream), b, a.fused_relu,
                              w16_next_.get(next.params->data("weight"), c2, cuda::WeightLayout::OIHW, t, ctx.stream),
                              next.bias ? next.params->data("bias") : nullptr, a.out.data, t, ctx.stream);
      last_ = "fused 1x1 pair (mma)";
      return;
    }
    if (a.epilogue && a.epilogue->back().kind == Epilogue::Kind::MaxPool) {  // can_fuse said so
      const Epilogue& pool = a.epilogue->back();
      const DType t = a.out.format.dtype;
      if (ctx.conv == ConvAlgo::Auto && cuda::conv_pool_supported(c, pool.k, pool.stride, t)) {
        cuda::conv_relu_pool_nhwc(c, a.in[0].data, wmma_.get(w, c, cuda::WeightLayout::MmaConvPool, t, ctx.stream), b,
                                  a.out.data, a.fused_relu, t, ctx.stream);
        last_ = "fused conv + bias + ReLU + 2x2 pool (mma)";
        return;
      }
      // cuDNN's raw output into the workspace, after the convolution's own (fused_workspace_floats)
      const bool half = ctx.precision == Precision::FP16 || ctx.precision == Precision::BF16;
      const TensorView raw{a.workspace + raw_offset(cuda::conv_workspace(c, bound, half).total()),
                           Shape(x.n, out_, c.ho, c.wo), a.out.format};
      auto after_cudnn = [&] {
        forward_nhwc(a, ctx, c, raw.data, /*relu=*/false, /*b=*/nullptr, /*pooled=*/true);
        cuda::bias_relu_maxpool(raw, b, a.fused_relu, a.out, pool.k, pool.stride, ctx.stream);
      };
      if (pool.k == 2 && pool.stride == 2 && run_mma(a, ctx, c, b, /*pool=*/true, after_cudnn)) return;
      after_cudnn();
      last_ += " + bias + ReLU + pool";
      return;
    }
    const bool fp16 = ctx.precision == Precision::FP16;
    // Choices are per input size, precision and backend (its workspace bound and cuDNN handle:
    // a graph re-planned onto another backend must not reuse a cuDNN plan sized for another
    // workspace, or one holding a handle that may be gone).
    const ChoiceKey key = choice_key(a.in[0].shape, ctx);
    // The GEMM algorithms under fp16 read the weights' half copy (converted once, not per run).
    auto gemm_weights = [&]() -> const void* {
      return fp16 && k_ > 1 ? w16_.get(w, c, cuda::WeightLayout::OIHW, DType::F16, ctx.stream) : w;
    };
    auto run = [&](ConvAlgo algo) {
      if (algo == ConvAlgo::Direct) {
        cuda::conv2d_direct(c, a.in[0].f32(), w, b, a.out.f32(), a.fused_relu, ctx.stream);
      } else if (algo == ConvAlgo::Gemm2s) {
        cuda::conv2d_gemm2s(c, a.in[0].f32(), gemm_weights(), b, a.out.f32(), a.fused_relu,
                            a.workspace, bound, fp16, ctx.cublas, ctx.stream, ctx.side_stream,
                            ctx.events);
      } else if (algo == ConvAlgo::Split) {
        forward_split(a, ctx, c, b);
      } else if (algo == ConvAlgo::Cudnn) {
#ifdef SCENELAB_WITH_CUDNN
        auto& conv = cudnn_[key];
        if (!conv) conv = std::make_unique<cuda::CudnnConv>(ctx.cudnn, c, ctx.precision);
        if (!conv->chosen()) conv->choose(a.in[0].data, w, a.out.data, a.workspace, bound, ctx.stream);
        conv->forward(a.in[0].data, w, b, a.out.data, a.fused_relu, a.workspace, bound, ctx.stream);
#else
        throw_error("conv2d '", name_, "': this build has no cuDNN");
#endif
      } else {
        cuda::conv2d_gemm(c, a.in[0].f32(), gemm_weights(), b, a.out.f32(), a.fused_relu,
                          a.workspace, bound, fp16, ctx.cublas, ctx.stream);
      }
    };
    // f16/bf16 NHWC tensors (--precision fp16/bf16 with auto or cudnn): cuDNN runs them as they
    // are, every kernel size, its own algorithms timed once per size.
    if (a.out.format.layout == Layout::NHWC) {
      SL_REQUIRE(a.in[0].format == a.out.format, "conv2d '", name_, "': input ", a.in[0].format.str(),
                 ", output ", a.out.format.str());
      if (k_ == 1) {  // pixel-wise fully connected: one GEMM over the batch's pixels
        const DType t = a.out.format.dtype;
        cuda::conv1x1_nhwc(c, a.in[0].data, w16_.get(w, c, cuda::WeightLayout::OIHW, t, ctx.stream), b,
                           a.out.data, a.fused_relu, t, ctx.cublas, ctx.stream);
        last_ = "gemm (1x1, NHWC)";
        return;
      }
      auto plain = [&] { forward_nhwc(a, ctx, c, a.out.data, a.fused_relu, b, /*pooled=*/false); };
      if (!run_mma(a, ctx, c, b, /*pool=*/false, plain)) plain();
      return;
    }
    ConvAlgo algo = ctx.conv;  // Direct under SCENELAB_OWN_KERNELS (the backend sets it)
    // a 1x1 convolution is a plain GEMM, except where no cuBLAS kernel may run
    if (k_ == 1 && !ctx.own_kernels) algo = ConvAlgo::Gemm;
    if (algo == ConvAlgo::Direct && k_ > 7) {  // the direct kernel's limit
      SL_REQUIRE(!ctx.own_kernels, "conv2d '", name_, "': SCENELAB_OWN_KERNELS runs convolutions on the direct "
                 "kernel, which supports kernels up to 7x7; this layer's is ", k_, "x", k_);
      algo = ConvAlgo::Gemm;
    }
    if (algo == ConvAlgo::Split && k_ == 1) algo = ConvAlgo::Gemm;
    if (algo == ConvAlgo::Auto) {
      auto it = auto_choice_.find(key);
      if (it == auto_choice_.end()) {
        // SCENELAB_TRACE_TUNING=1 prints what was timed and how long the timing took.
        static const bool trace = std::getenv("SCENELAB_TRACE_TUNING") != nullptr;
        const auto t_start = std::chrono::steady_clock::now();
        std::string report;
        StreamTimer timer;
        auto time_one = [&](ConvAlgo cand) { return timer.time(ctx.stream, [&] { run(cand); }, "conv2d auto"); };
        // Time-boxed: each candidate runs once to warm up (its modules load, cuDNN picks its
        // algorithm) and once timed; a second timed run only where it is within 25% of the
        // best. A candidate whose warm-up alone took 8x the best so far (1.5x once its kernels
        // are loaded) is not timed further, and gemm2s is left out where its plan has a single
        // band (nothing to overlap: it is gemm then).
        // In fp32 the split convolution goes first, and where it runs cuDNN's legacy FMA
        // kernels are not timed: on the H100 they were never the pick (1.2-2.5x the split's
        // time on all nine 7x7 layers of the multiscale net at 1920x1080), and loading them for
        // their first runs took 650 of the 1058 ms of a cold fp32 plan (docs/BENCHMARKS.md).
        // Where the split does not run (no cuDNN graph engine for it), they are timed.
        float best = 1e30f;
        ConvAlgo pick = ConvAlgo::Gemm;
        std::vector<ConvAlgo> cands;
        if (may_split(ctx, c.cin)) cands.push_back(ConvAlgo::Split);
        cands.push_back(ConvAlgo::Gemm);
#ifdef SCENELAB_WITH_CUDNN
        cands.push_back(ConvAlgo::Cudnn);
#endif
        if (cuda::conv_bands(c, bound, fp16, /*two_streams=*/true) > 1) cands.push_back(ConvAlgo::Gemm2s);
        if (k_ <= 7) cands.push_back(ConvAlgo::Direct);
        bool split_runs = false;
        for (ConvAlgo cand : cands) {
          if (cand == ConvAlgo::Cudnn && split_runs) {
            if (trace) report += " cudnn (legacy) not timed: the split runs;";
            continue;
          }
          float warm = 0;
          try {
            warm = time_one(cand);  // warm-up, and cuDNN's own choice
          } catch (const Error&) {
            // cuDNN may have no algorithm for a shape
            if (cand == ConvAlgo::Cudnn || cand == ConvAlgo::Split) continue;
            throw;
          }
          // cuDNN's warm-up is its own timing. A first use's warm-up includes loading the
          // kernels (cuBLAS's first call: 116 ms on the H100), so only 8x the best skips it;
          // once loaded on this backend, a warm-up 1.5x the best cannot win (its run is no faster).
          const unsigned bit = 1u << unsigned(cand);
          const float skip = ctx.conv_warmed & bit ? 1.5f : 8.f;
          ctx.conv_warmed |= bit;
          if (cand != ConvAlgo::Cudnn && cand != ConvAlgo::Split && warm > skip * best) {
            if (trace) report += str_cat(" ", algo_label(cand, key, ctx.precision), " warm-up ", warm, " ms, skipped;");
            continue;
          }
          split_runs |= cand == ConvAlgo::Split;
          float ms = time_one(cand);
          if (ms < 1.25f * best) ms = std::min(ms, time_one(cand));
          if (trace) report += str_cat(" ", algo_label(cand, key, ctx.precision), " ", ms, " ms;");
          if (ms < best) best = ms, pick = cand;
        }
        if (trace)
          std::fprintf(stderr, "tuning %s %s %s:%s picked %s; timing took %.1f ms\n", name_.c_str(),
                       a.in[0].shape.str().c_str(), precision_name(ctx.precision), report.c_str(),
                       algo_label(pick, key, ctx.precision).c_str(),
                       std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count());
        it = auto_choice_.emplace(key, pick).first;
      }
      algo = it->second;
    }
    run(algo);
    last_ = algo_label(algo, key, ctx.precision);
  }
  // Under auto on half-precision NHWC tensors, our implicit-GEMM kernel (conv_mma_nhwc) against
  // cuDNN's path (`cudnn`: the convolution and, for a pool, the pass that pools) the first time a
  // size runs, each run once to warm up and twice timed (CUDA events); runs ours if it is the pick
  // and says so (false: cuDNN's path is the pick, not run).
  template <class CudnnPath>
  bool run_mma(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c, const float* b, bool pool,
               CudnnPath&& cudnn) const {
#ifdef SCENELAB_WITH_CUDNN
    const DType t = a.out.format.dtype;
    if (ctx.conv != ConvAlgo::Auto || !cuda::conv_mma_supported(c, pool, t)) return false;
    const ChoiceKey key = choice_key(a.in[0].shape, ctx);
    auto mma = [&] {
      cuda::conv_mma_nhwc(c, a.in[0].data,
                          wmma_.get(a.params->data("weight"), c, cuda::WeightLayout::MmaImplicitGemm, t, ctx.stream), b,
                          a.out.data, a.fused_relu, pool, t, ctx.stream);
    };
    auto it = mma_choice_.find(key);
    if (it == mma_choice_.end()) {
      static const bool trace = std::getenv("SCENELAB_TRACE_TUNING") != nullptr;
      StreamTimer timer;
      auto time = [&](auto&& fn) {
        fn();  // warm-up (and cuDNN's own choice)
        float best = 1e30f;
        for (int r = 0; r < 2; ++r) best = std::min(best, timer.time(ctx.stream, fn, "conv2d auto"));
        return best;
      };
      const float theirs = time(cudnn);
      const std::string label = last_;
      const float ours = time(mma);
      if (trace)
        std::fprintf(stderr, "tuning %s %s %s%s: %s %g ms; mma %g ms; picked %s\n", name_.c_str(),
                     a.in[0].shape.str().c_str(), precision_name(ctx.precision), pool ? " (pooled)" : "",
                     label.c_str(), theirs, ours, ours < theirs ? "mma" : "cudnn");
      it = mma_choice_.emplace(key, ours < theirs).first;
    }
    if (!it->second) return false;
    mma();
    last_ = pool ? "implicit GEMM (mma) + bias + ReLU + 2x2 pool" : "implicit GEMM (mma) + bias + ReLU";
    return true;
#else
    (void)a, (void)ctx, (void)c, (void)b, (void)pool, (void)cudnn;
    return false;
#endif
  }

  // f16/bf16 NHWC through cuDNN into `out`: the graph API (its Hopper kernels, the epilogue
  // fused where it pays), the legacy API where no graph engine runs the shape. pooled: the raw
  // convolution for a fused pool (no bias, no ReLU: a graph of its own, remembered apart in
  // plan caches).
  void forward_nhwc(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c, void* out, bool relu,
                    const float* b, bool pooled) const {
    const size_t bound = ctx.conv_workspace_bytes / sizeof(float);
    const ChoiceKey key = choice_key(a.in[0].shape, ctx);
    const float* w = a.params->data("weight");
    SL_REQUIRE(a.in[0].format == a.out.format, "conv2d '", name_, "': input ", a.in[0].format.str(),
               ", output ", a.out.format.str());
#ifdef SCENELAB_WITH_CUDNN
    if (pooled) pooled_.insert(key);
    if (ctx.cudnn_graph && !graph_failed_.count(key)) {
      auto& g = graph_[key];
      const DType t = a.out.format.dtype;
      const void* wt = w16_.get(w, c, cuda::WeightLayout::KRSC, t, ctx.stream);
      const size_t scratch = cuda::conv_workspace(c, bound, true).scratch * sizeof(float);
      if (!g) {
        g = std::make_unique<cuda::CudnnGraphConv>(ctx.cudnn, c, t, relu, b != nullptr);
        auto saved = preset_.find(key);
        const std::string kind = pooled ? "cudnngp " : "cudnng ";
        const bool restored = saved != preset_.end() && saved->second.rfind(kind, 0) == 0 &&
                              g->preset(saved->second.substr(kind.size()), scratch);
        try {
          if (!restored) g->choose(a.in[0].data, wt, b, out, a.workspace, scratch, ctx.runtime_fusion, ctx.stream);
        } catch (const Error&) {
          g.reset();
          graph_failed_.insert(key);
        }
      }
      if (g) {
        g->forward(a.in[0].data, wt, b, out, a.workspace, ctx.stream);
        last_ = g->name();
        return;
      }
    }
    auto& conv = cudnn_[key];
    if (!conv) conv = std::make_unique<cuda::CudnnConv>(ctx.cudnn, c, ctx.precision);
    if (!conv->chosen()) conv->choose(a.in[0].data, w, out, a.workspace, bound, ctx.stream);
    conv->forward(a.in[0].data, w, b, out, relu, a.workspace, bound, ctx.stream);
    last_ = algo_label(ConvAlgo::Cudnn, key, ctx.precision);
#else
    (void)c, (void)bound, (void)key, (void)out, (void)relu, (void)b, (void)pooled, (void)w;
    throw_error("conv2d '", name_, "': this build has no cuDNN");
#endif
  }

  // The split fp32 convolution: the input's two pieces, one cuDNN convolution over 3 x cin
  // channels into a float NHWC result, back to NCHW with the bias and ReLU (where cuDNN's fused
  // graph did not apply them). The bias and ReLU are handed to CudnnGraphConv although its plain
  // graph leaves them to the transpose: they make the fused graph a candidate, the one engine
  // that runs these under a small workspace bound (no plain engine fits 64 KiB:
  // ReplanOntoAnotherBackend fails on the H100 without it).
  void forward_split(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c,
                     const float* b) const {
#ifdef SCENELAB_WITH_CUDNN
    const auto key = choice_key(a.in[0].shape, ctx);
    const SplitLayout l = split_layout(c, ctx.conv_workspace_bytes / sizeof(float));
    cuda::ConvShape cs = c;
    cs.cin = cuda::split_channels(c.cin);
    float* pieces = a.workspace;
    float* result = pieces + l.pieces;
    float* scratch = result + l.result;
    const void* w = split_w_.get(a.params->data("weight"), c, ctx.stream);
    cuda::split_input(a.in[0].f32(), c.n, c.cin, c.h, c.w, pieces, ctx.stream);
    auto& g = split_[key];
    if (!g) {
      g = std::make_unique<cuda::CudnnGraphConv>(ctx.cudnn, cs, DType::F32, a.fused_relu, b != nullptr,
                                                 DType::F32, /*exact=*/true);
      auto saved = preset_.find(key);
      const bool restored = saved != preset_.end() && saved->second.rfind("split ", 0) == 0 &&
                            g->preset(saved->second.substr(6), l.scratch * sizeof(float));
      try {
        if (!restored)
          g->choose(pieces, w, b, result, scratch, l.scratch * sizeof(float), ctx.runtime_fusion, ctx.stream);
      } catch (const Error&) {
        g.reset();
        throw;
      }
    }
    g->forward(pieces, w, b, result, scratch, ctx.stream);
    const bool fused = g->fused();
    cuda::nhwc_to_nchw_bias_act(result, c.n, c.cout, size_t(c.ho) * c.wo, fused ? nullptr : b,
                                !fused && a.fused_relu, a.out.f32(), ctx.stream);
#else
    (void)a, (void)ctx, (void)c, (void)b;
    throw_error("conv2d '", name_, "': --conv split runs on cuDNN, which this build has not");
#endif
  }

  std::string detail() const override { return last_; }

  // The algorithm auto picked (and cuDNN's own pick within it), for plan caches:
  // "gemm" | "gemm2s" | "direct" | "cudnn ALGO MATH".
  std::string tuning(const std::vector<Shape>& in, const Backend& backend) const override {
    const CudaContext* ctx = backend.cuda();
    if (!ctx || (ctx->conv != ConvAlgo::Auto && ctx->conv != ConvAlgo::Cudnn)) return {};
    if (k_ == 1) return {};  // a 1x1 convolution is a plain GEMM: nothing timed
    const ChoiceKey key = choice_key(in[0], *ctx);
    const bool nhwc = activation_format(*ctx).layout == Layout::NHWC;
    ConvAlgo algo = ConvAlgo::Cudnn;
    if (ctx->conv == ConvAlgo::Auto && !nhwc) {
      auto it = auto_choice_.find(key);
      if (it == auto_choice_.end()) return {};
      algo = it->second;
    }
    switch (algo) {
      case ConvAlgo::Gemm: return "gemm";
      case ConvAlgo::Gemm2s: return "gemm2s";
      case ConvAlgo::Direct: return "direct";
      default: break;
    }
#ifdef SCENELAB_WITH_CUDNN
    if (algo == ConvAlgo::Split) {
      auto g = split_.find(key);
      return g != split_.end() && g->second && g->second->chosen() ? "split " + g->second->choice()
                                                                   : std::string();
    }
    if (nhwc) {
      auto m = mma_choice_.find(key);
      if (m != mma_choice_.end() && m->second) return "mma";
      auto g = graph_.find(key);
      if (g != graph_.end() && g->second && g->second->chosen())
        return (pooled_.count(key) ? "cudnngp " : "cudnng ") + g->second->choice();
    }
    auto it = cudnn_.find(key);
    if (it != cudnn_.end() && it->second && it->second->chosen())
      return str_cat("cudnn ", it->second->algo_id(), " ", it->second->math_id());
#endif
    return {};
  }
  bool restore_tuning(const std::vector<Shape>& in, const Backend& backend,
                      const std::string& text) const override {
    const CudaContext* ctx = backend.cuda();
    if (!ctx || (ctx->conv != ConvAlgo::Auto && ctx->conv != ConvAlgo::Cudnn)) return false;
    if (k_ == 1) return false;
    const bool nhwc = activation_format(*ctx).layout == Layout::NHWC;
    const ChoiceKey key = choice_key(in[0], *ctx);
#ifdef SCENELAB_WITH_CUDNN
    if (nhwc && (text.rfind("cudnng ", 0) == 0 || text.rfind("cudnngp ", 0) == 0)) {
      // Checked when the layer first runs (the engine depends on the fused ReLU too, and a
      // pooled layer's raw convolution is a graph of its own): a choice that no longer builds,
      // or of the other kind, is timed anew there.
      preset_[key] = text;
      graph_.erase(key);
      graph_failed_.erase(key);
      mma_choice_[key] = false;  // cuDNN was the pick (over our kernel where it was a candidate)
      return true;
    }
    if (nhwc && text == "mma") {
      if (ctx->conv != ConvAlgo::Auto) return false;
      mma_choice_[key] = true;  // the kernel's support is checked when the layer runs
      return true;
    }
    if (text.rfind("split ", 0) == 0) {  // the engine is checked when the layer first runs
      if (ctx->conv != ConvAlgo::Auto || !may_split(*ctx, in[0].c)) return false;
      preset_[key] = text;
      split_.erase(key);
      auto_choice_[key] = ConvAlgo::Split;
      return true;
    }
#endif
    ConvAlgo algo;
    if (text == "gemm") algo = ConvAlgo::Gemm;
    else if (text == "gemm2s") algo = ConvAlgo::Gemm2s;
    else if (text == "direct" && k_ <= 7) algo = ConvAlgo::Direct;
    else if (text.rfind("cudnn ", 0) == 0) algo = ConvAlgo::Cudnn;
    else return false;
    if ((ctx->conv == ConvAlgo::Cudnn || nhwc) && algo != ConvAlgo::Cudnn) return false;
#ifdef SCENELAB_WITH_CUDNN
    if (nhwc) graph_failed_.insert(key);  // the legacy API was what ran this shape
#endif
    if (algo == ConvAlgo::Cudnn) {
#ifdef SCENELAB_WITH_CUDNN
      int id = -1, math = -1;
      char tail = 0;
      if (std::sscanf(text.c_str(), "cudnn %d %d%c", &id, &math, &tail) != 2) return false;
      const Shape& x = in[0];
      const cuda::ConvShape c{x.n, x.c, x.h, x.w, out_, k_, pad_, x.h + 2 * pad_ - k_ + 1,
                              x.w + 2 * pad_ - k_ + 1};
      auto conv = std::make_unique<cuda::CudnnConv>(ctx->cudnn, c, ctx->precision);
      if (!conv->preset(id, math, ctx->conv_workspace_bytes / sizeof(float))) return false;
      cudnn_[key] = std::move(conv);
#else
      return false;
#endif
    }
    if (ctx->conv == ConvAlgo::Auto && !nhwc) auto_choice_[key] = algo;
    return true;
  }

 private:
  using ChoiceKey = std::tuple<int, int, int, int, size_t, uintptr_t>;
  ChoiceKey choice_key(const Shape& x, const CudaContext& ctx) const {
#ifdef SCENELAB_WITH_CUDNN
    const uintptr_t handle = reinterpret_cast<uintptr_t>(ctx.cudnn);
#else
    const uintptr_t handle = 0;
#endif
    return ChoiceKey{x.n, x.h, x.w, int(ctx.precision), ctx.conv_workspace_bytes, handle};
  }
  std::string algo_label(ConvAlgo algo, [[maybe_unused]] const ChoiceKey& key, Precision p) const {
    const bool fp16 = p == Precision::FP16;
    switch (algo) {
      case ConvAlgo::Direct: return "direct (fp32)";
      case ConvAlgo::Split: {
#ifdef SCENELAB_WITH_CUDNN
        auto it = split_.find(key);
        if (it != split_.end() && it->second) return "split (fp32 as tf32 x 3, " + it->second->name() + ")";
#endif
        return "split";
      }
      case ConvAlgo::Gemm2s: return fp16 && k_ > 1 ? "gemm2s (fp16)" : "gemm2s";
      case ConvAlgo::Cudnn: {
#ifdef SCENELAB_WITH_CUDNN
        auto it = cudnn_.find(key);
        if (it != cudnn_.end() && it->second) return "cudnn " + it->second->algo_name();
#endif
        return "cudnn";
      }
      default: return k_ == 1 ? "gemm (1x1 SGEMM)" : fp16 ? "gemm (fp16)" : "gemm";
    }
  }
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

  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView& x = a.in[0];
    const TensorView& y = a.out;
    const size_t K = kdim(x.shape);
    const float* w = a.params->data("weight");
    const float* b = bias_ ? a.params->data("bias") : nullptr;
    if (winograd_for(x.shape, a.cpu_conv)) {
      const std::shared_ptr<const WinogradConv> wc = winograd_weights(w, x.shape.c);
      const WinogradConv::Plan p = WinogradConv::plan(x.shape.c, out_, k_, x.shape.h, x.shape.w, pad_);
      const size_t per_thread = WinogradConv::workspace_floats(p);
      for (int n = 0; n < x.shape.n; ++n)
        parallel_for(p.bands, a.threads, [&](int64_t band) {
          wc->run_band(p, int(band), x.channel(n, 0), y.channel(n, 0), b, a.fused_relu,
                       a.workspace + size_t(omp_get_thread_num()) * per_thread);
        });
      return;
    }
    const int rows = band_rows(x.shape, y.shape);
    const int bands = (y.shape.h + rows - 1) / rows;
    const size_t plane = y.shape.plane();
    for (int n = 0; n < x.shape.n; ++n) {
      parallel_for(bands, a.threads, [&](int64_t band) {
        const int y0 = int(band) * rows, y1 = std::min(y.shape.h, y0 + rows);
        const size_t cols = size_t(y1 - y0) * y.shape.w;
        float* out = y.channel(n, 0) + size_t(y0) * y.shape.w;
        if (k_ == 1) {  // pixel-wise fully connected: the input is already the matrix X
          const float* in = x.channel(n, 0) + size_t(y0) * x.shape.w;
          gemm(in, x.shape.plane(), cols, K, w, out, plane);
        } else {
          const int tid = omp_get_thread_num();
          float* ws = a.workspace + size_t(tid) * size_t(rows) * y.shape.w * K;
          im2col(x, n, y0, y1, y.shape.w, ws);
          gemm(ws, cols, cols, K, w, out, plane);
        }
        epilogue(out, plane, cols, b, a.fused_relu);
      });
    }
  }

 private:
  size_t kdim(const Shape& in) const { return size_t(in.c) * k_ * k_; }
  // Winograd on the CPU: where asked and the kernel allows, or under auto where the layer has the
  // input channels to keep its 64 GEMMs (tiles x cin x cout) efficient. Measured (multiscale
  // 480x360, 2 threads, AVX-512): 3 -> 16 channels 4.19 ms by Winograd against 3.12 by im2col,
  // 16 -> 64 7.10 against 9.97, 64 -> 256 20.6 against 38.9.
  static constexpr int kWinogradMinCin = 16;
  bool winograd_for(const Shape& in, CpuConv how) const {
    if (!WinogradConv::supported(k_) || how == CpuConv::Gemm) return false;
    return how == CpuConv::Winograd || in.c >= kWinogradMinCin;
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
  // X[(c*k + dy)*k + dx][(yy - y0)*wo + xx] = x[c][yy + dy - pad][xx + dx - pad], zero outside.
  void im2col(const TensorView& x, int n, int y0, int y1, int wo, float* ws) const {
    const int H = x.shape.h, W = x.shape.w;
    const size_t cols = size_t(y1 - y0) * wo;
    for (int c = 0; c < x.shape.c; ++c) {
      const float* src = x.channel(n, c);
      for (int dy = 0; dy < k_; ++dy)
        for (int dx = 0; dx < k_; ++dx) {
          float* row = ws + (size_t(c * k_ + dy) * k_ + dx) * cols;
          const int xs = dx - pad_;                             // input column of output col 0
          const int lo = std::max(0, -xs), hi = std::min(wo, W - xs);  // valid output columns
          for (int yy = y0; yy < y1; ++yy, row += wo) {
            const int iy = yy + dy - pad_;
            if (iy < 0 || iy >= H || hi <= lo) {
              std::memset(row, 0, sizeof(float) * wo);
              continue;
            }
            if (lo > 0) std::memset(row, 0, sizeof(float) * lo);
            std::memcpy(row + lo, src + size_t(iy) * W + lo + xs, sizeof(float) * (hi - lo));
            if (hi < wo) std::memset(row + hi, 0, sizeof(float) * (wo - hi));
          }
        }
    }
  }
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

}  // namespace

std::unique_ptr<Layer> make_conv2d(const NodeDesc& d) { return std::make_unique<Conv2d>(d); }

}  // namespace scenelab
