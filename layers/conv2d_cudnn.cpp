// The conv2d layer through cuDNN (layers/conv2d.h): half-precision NHWC convolutions by the
// graph API (the legacy API where no engine runs the shape), the split fp32 convolution, and
// the choices kept in plan caches (tuning, restore_tuning).
#ifdef SCENELAB_WITH_CUDA
#include <cstdio>

#include "core/error.h"
#include "layers/conv2d.h"

namespace scenelab {

void Conv2d::forward_nhwc(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c, void* out, bool relu,
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
      const bool of_kind = saved != preset_.end() && saved->second.rfind(kind, 0) == 0;
      if (!g->ready(of_kind ? saved->second.substr(kind.size()) : std::string(), a.in[0].data, wt, b, out,
                    a.workspace, scratch, ctx.runtime_fusion, ctx.stream)) {
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

void Conv2d::forward_split(const ForwardArgs& a, const CudaContext& ctx, const cuda::ConvShape& c,
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

std::string Conv2d::tuning(const std::vector<Shape>& in, const Backend& backend) const {
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

bool Conv2d::restore_tuning(const std::vector<Shape>& in, const Backend& backend,
                            const std::string& text) const {
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

}  // namespace scenelab
#endif
