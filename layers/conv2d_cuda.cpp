// The conv2d layer's GPU path (layers/conv2d.h): which algorithm runs (the fused tensor-core
// kernels, our implicit GEMM against cuDNN on half-precision NHWC, and under --conv auto every
// fp32 candidate timed once per size: direct, im2col + cuBLAS GEMM on one or two streams, cuDNN,
// the split fp32 convolution), and its label.
#ifdef SCENELAB_WITH_CUDA
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/cuda_timer.h"
#include "core/error.h"
#include "layers/conv2d.h"

namespace scenelab {

template <class Run>
ConvAlgo Conv2d::choose_auto(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c,
                             const ChoiceKey& key, Run&& run) const {
  const size_t bound = ctx.conv_workspace_bytes / sizeof(float);
  const bool fp16 = ctx.precision == Precision::FP16;
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
  // their first runs took 650 of the 1058 ms of a cold fp32 plan (docs/BENCHMARKS.md at fb0dc9a).
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
  return pick;
}

template <class CudnnPath>
bool Conv2d::run_mma(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c, const float* b,
                     bool pool, CudnnPath&& cudnn) const {
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

void Conv2d::forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const {
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
    if (it == auto_choice_.end()) it = auto_choice_.emplace(key, choose_auto(a, ctx, c, key, run)).first;
    algo = it->second;
  }
  run(algo);
  last_ = algo_label(algo, key, ctx.precision);
}

std::string Conv2d::algo_label(ConvAlgo algo, const ChoiceKey& key, Precision p) const {
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

}  // namespace scenelab
#endif
