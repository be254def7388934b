#include "kernels/conv_cudnn_graph.h"

#if defined(SCENELAB_WITH_CUDA) && defined(SCENELAB_WITH_CUDNN)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "engine/cuda_backend.h"
#include "core/error.h"
#include "kernels/layers_cuda.h"

// The operation graph's and the plan's handle attributes are deprecated in cuDNN 9 (the handle
// given to cudnnBackendExecute is used), but cuDNN 9.x before 9.6 still reads them at finalise.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace scenelab::cuda {

struct CudnnGraphConv::Desc {
  cudnnBackendDescriptor_t d = nullptr;
  std::vector<std::shared_ptr<Desc>> keep;  // descriptors this one refers to
  explicit Desc(cudnnBackendDescriptorType_t t) {
    SL_CUDNN_CHECK(cudnnBackendCreateDescriptor(t, &d), "cuDNN graph: creating a descriptor");
  }
  ~Desc() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  void set(cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const void* v) {
    SL_CUDNN_CHECK(cudnnBackendSetAttribute(d, a, t, n, v), "cuDNN graph: setting an attribute");
  }
  void set(cudnnBackendAttributeName_t a, const std::shared_ptr<Desc>& v) {
    set(a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v->d);
    keep.push_back(v);
  }
  void finalize(const char* what) { SL_CUDNN_CHECK(cudnnBackendFinalize(d), what); }
};

struct CudnnGraphConv::Graph {
  std::shared_ptr<Desc> graph;
  bool fused = false;
};

namespace {

constexpr int64_t kX = 1, kW = 2, kB = 3, kY = 4, kConvOut = 5, kAddOut = 6;
constexpr int kRanked = 8, kTimed = 2;
constexpr float kFuseWorthMs = 0.02f;

cudnnDataType_t cudnn_type(DType t) {
  return t == DType::BF16 ? CUDNN_DATA_BFLOAT16 : t == DType::F32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_HALF;
}

}  // namespace

CudnnGraphConv::CudnnGraphConv(cudnnHandle_t h, const ConvShape& c, DType t, bool relu, bool bias,
                               DType y_type, bool exact)
    : h_(h), c_(c), t_(t), y_type_(y_type == DType::F32 ? DType::F32 : t), relu_(relu), bias_(bias),
      exact_(exact) {
  SL_REQUIRE(t == DType::F16 || t == DType::BF16 || t == DType::F32,
             "cuDNN graph convolution: f16, bf16 or f32 tensors");
}

CudnnGraphConv::~CudnnGraphConv() = default;

std::unique_ptr<CudnnGraphConv::Graph> CudnnGraphConv::build(bool fused) const {
  auto tensor = [&](int64_t uid, cudnnDataType_t dt, int64_t n, int64_t ch, int64_t hh, int64_t ww,
                    bool is_virtual) {
    auto d = std::make_shared<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t dims[4] = {n, ch, hh, ww};
    const int64_t strides[4] = {hh * ww * ch, 1, ww * ch, ch};  // NHWC
    const int64_t align = 16;
    d->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    d->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    d->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    d->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    d->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    if (is_virtual) {
      const bool v = true;
      d->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
    }
    d->finalize("cuDNN graph: a tensor");
    return d;
  };
  const cudnnDataType_t dt = cudnn_type(t_), f32 = CUDNN_DATA_FLOAT;
  auto x = tensor(kX, dt, c_.n, c_.cin, c_.h, c_.w, false);
  // KRSC weights of cin / groups channels (cuDNN infers the groups from x's channels and w's).
  auto w = tensor(kW, dt, c_.cout, c_.cin / c_.groups, c_.k, c_.kernel_w(), false);
  auto y = tensor(kY, y_type_ == DType::F32 ? f32 : dt, c_.n, c_.cout, c_.ho, c_.wo, false);
  const bool add = fused && bias_, act = fused && relu_;
  auto conv_out = add || act ? tensor(kConvOut, f32, c_.n, c_.cout, c_.ho, c_.wo, true) : y;

  auto conv = std::make_shared<Desc>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t dims = 2, pad[2] = {c_.pad, c_.padding_w()}, stride[2] = {c_.sh, c_.sw},
                dilation[2] = {c_.dh, c_.dw};
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  conv->set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  conv->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
  conv->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv->set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  conv->set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  conv->set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation);
  conv->set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
  conv->finalize("cuDNN graph: the convolution");

  std::vector<std::shared_ptr<Desc>> ops;
  auto op = std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.f, beta = 0.f;
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, conv_out);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  op->finalize("cuDNN graph: the convolution operation");
  ops.push_back(op);
  auto pointwise = [&](cudnnPointwiseMode_t m, const std::shared_ptr<Desc>& in,
                       const std::shared_ptr<Desc>& b, const std::shared_ptr<Desc>& out) {
    auto pw = std::make_shared<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &m);
    pw->set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    pw->finalize("cuDNN graph: a pointwise descriptor");
    auto o = std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    o->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    o->set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, in);
    if (b) o->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    o->set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, out);
    o->finalize("cuDNN graph: a pointwise operation");
    ops.push_back(o);
  };
  if (add) {
    auto bias = std::make_shared<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t bd[4] = {1, c_.cout, 1, 1}, bs[4] = {c_.cout, 1, c_.cout, c_.cout}, align = 16, uid = kB;
    bias->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    bias->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, bd);
    bias->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, bs);
    bias->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    bias->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    bias->finalize("cuDNN graph: the bias");
    auto add_out = act ? tensor(kAddOut, f32, c_.n, c_.cout, c_.ho, c_.wo, true) : y;
    pointwise(CUDNN_POINTWISE_ADD, conv_out, bias, add_out);
    if (act) pointwise(CUDNN_POINTWISE_RELU_FWD, add_out, nullptr, y);
  } else if (act) {
    pointwise(CUDNN_POINTWISE_RELU_FWD, conv_out, nullptr, y);
  }
  auto g = std::make_unique<Graph>();
  g->fused = fused;
  g->graph = std::make_shared<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const auto& o : ops) raw.push_back(o->d), g->graph->keep.push_back(o);
  g->graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(raw.size()), raw.data());
  g->graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h_);
  g->graph->finalize("cuDNN graph: the operation graph");
  return g;
}

std::vector<std::shared_ptr<CudnnGraphConv::Desc>> CudnnGraphConv::configs(const Graph& g, int max) const {
  auto heur = std::make_shared<Desc>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur->set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g.graph);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur->set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  heur->finalize("cuDNN graph: the heuristics");
  std::vector<std::shared_ptr<Desc>> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < max; ++i) {
    cfgs.push_back(std::make_shared<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(cfgs.back()->d);
  }
  int64_t count = 0;
  SL_CUDNN_CHECK(cudnnBackendGetAttribute(heur->d, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, max, &count, raw.data()),
                 "cuDNN graph: the heuristics' results");
  cfgs.resize(size_t(std::min<int64_t>(count, max)));
  for (auto& c : cfgs) c->keep.push_back(heur);
  return cfgs;
}

std::shared_ptr<CudnnGraphConv::Desc> CudnnGraphConv::finalize_plan(
    const Graph& g, const std::shared_ptr<Desc>& config) const {
  auto plan = std::make_shared<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
  plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h_);
  plan->keep.push_back(g.graph);
  // A configuration the ranking lists may still not build for this shape.
  return cudnnBackendFinalize(plan->d) == CUDNN_STATUS_SUCCESS ? plan : nullptr;
}

CudnnGraphConv::Engine CudnnGraphConv::engine_of(const Desc& config) const {
  Engine e;
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t n = 0;
  SL_CUDNN_CHECK(cudnnBackendGetAttribute(config.d, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                          1, &n, &engine.d),
                 "cuDNN graph: a configuration's engine");
  SL_CUDNN_CHECK(cudnnBackendGetAttribute(engine.d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                          &e.index),
                 "cuDNN graph: an engine's index");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  SL_CUDNN_CHECK(cudnnBackendGetAttribute(engine.d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                          CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes),
                 "cuDNN graph: an engine's numerical notes");
  for (int64_t i = 0; i < n; ++i) {
    const char* name = "";
    bool inexact = false;
    switch (notes[i]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE: name = "tc"; break;
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS: name = "down-convert"; break;
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: name = "reduced-reduction", inexact = true; break;
      case CUDNN_NUMERICAL_NOTE_FFT: name = "fft", inexact = true; break;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC: name = "nondeterministic"; break;
      case CUDNN_NUMERICAL_NOTE_WINOGRAD:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13: name = "winograd", inexact = true; break;
      default: continue;
    }
    e.notes += str_cat(e.notes.empty() ? "" : ",", name);
    e.excluded = e.excluded || (exact_ && inexact);
  }
  return e;
}

int64_t CudnnGraphConv::workspace_of(const Desc& plan) const {
  int64_t bytes = 0, n = 0;
  SL_CUDNN_CHECK(cudnnBackendGetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                          CUDNN_TYPE_INT64, 1, &n, &bytes),
                 "cuDNN graph: a plan's workspace");
  return bytes;
}

void CudnnGraphConv::execute(const Desc& plan, bool fused, const void* x, const void* w,
                             const float* b, void* y, void* ws, cudaStream_t s) {
  const bool with_bias = fused && bias_;
  std::vector<const void*> ptrs{x, w, y, ws, with_bias ? b : nullptr, &plan};
  if (!pack_ || ptrs != pack_ptrs_) {  // remade only when the pointers or the plan change
    std::vector<int64_t> uids{kX, kW, kY};
    std::vector<void*> data{const_cast<void*>(x), const_cast<void*>(w), y};
    if (with_bias) uids.push_back(kB), data.push_back(const_cast<float*>(b));
    auto pack = std::make_shared<Desc>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack->set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data());
    pack->set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(data.size()), data.data());
    pack->set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    pack->finalize("cuDNN graph: the variant pack");
    pack_ = pack;
    pack_ptrs_ = ptrs;
  }
  SL_CUDNN_CHECK(cudnnBackendExecute(h_, plan.d, pack_->d), "cuDNN graph: executing the convolution");
  if (!fused && (bias_ || relu_) && y_type_ != DType::F32)
    bias_act_nhwc(TensorView{y, Shape(c_.n, c_.cout, c_.ho, c_.wo), Format{t_, Layout::NHWC}},
                  bias_ ? b : nullptr, relu_, s);
}

void CudnnGraphConv::choose(const void* x, const void* w, const float* b, void* y, void* ws,
                            size_t scratch_bytes, bool runtime_fusion, cudaStream_t s) {
  static const bool trace = std::getenv("SCENELAB_TRACE_TUNING") != nullptr;
  const auto t_start = std::chrono::steady_clock::now();
  CudaEvent e0, e1;
  float best = 1e30f;
  std::string report;
  for (bool fused : {false, true}) {
    if (fused && !bias_ && !relu_) continue;  // nothing to fuse
    // Fused graphs run on runtime-fusion engines, compiled when finalised, again in every
    // process (a plan cache's choice too): on an H100 0.5-0.7 s for each kernel variant cuDNN
    // compiles, 65-75 ms for a shape that reuses one compiled before in the process (the
    // multiscale net at 320x240 compiled two variants for its three 64 -> 256 layers), up to
    // 1.7 s on a fresh machine.
    // So they are tried only where runtime fusion is on (CudaOptions: the library's default;
    // label_image turns it on for long runs, videos and 1000 images or more) and the plain
    // convolution takes 0.02 ms or more. Measured there (64 -> 256, fp16): 0.47-0.49 -> 0.27 ms
    // at 1920x1080, 0.034 -> 0.020 at 320x240 (plus the bias/ReLU pass it saves), 0.11-0.13 ->
    // 0.06 at 640x480 (the multiscale net's full scale); below 0.02 ms the gains are a few us.
    // (The bar was 0.3 ms while compiling was thought to cost 1.15 s a shape.) Where no plain
    // engine runs the shape the fused graph is tried as well (the quarter scale, 64 -> 256 on
    // 120x67: 0.03-0.04 ms fused against the legacy API's TF32 kernel and conversions, 0.15 ms);
    // with runtime fusion off the legacy API runs it (the caller's fallback) in a few ms of
    // planning.
    if (fused && (!runtime_fusion || (plan_ && best < kFuseWorthMs))) continue;
    std::unique_ptr<Graph> g;
    try {
      g = build(fused);
    } catch (const Error&) {
      continue;  // no engine supports this graph here (e.g. the fused one)
    }
    const auto cfgs = configs(*g, kRanked);
    int timed = 0;
    for (size_t i = 0; i < cfgs.size() && timed < kTimed; ++i) {
      const Engine e = engine_of(*cfgs[i]);
      if (e.excluded) {
        if (trace) report += str_cat(" ", fused ? "fused" : "plain", "#", i, " (engine ", e.index, " ", e.notes, ") left out;");
        continue;
      }
      const auto p = finalize_plan(*g, cfgs[i]);
      if (!p || workspace_of(*p) > int64_t(scratch_bytes)) {
        if (trace)
          report += str_cat(" ", fused ? "fused" : "plain", "#", i, " (engine ", e.index, ") ",
                            p ? str_cat("needs ", workspace_of(*p) >> 20, " MiB") : std::string("does not build"), ";");
        continue;
      }
      float ms = 1e30f;
      try {
        for (int k = 0; k < 3; ++k) {  // a warm-up, then the better of two runs
          SL_CUDA_CHECK(cudaEventRecord(e0.get(), s), "cuDNN graph timing");
          execute(*p, fused, x, w, b, y, ws, s);
          SL_CUDA_CHECK(cudaEventRecord(e1.get(), s), "cuDNN graph timing");
          SL_CUDA_CHECK(cudaEventSynchronize(e1.get()), "cuDNN graph timing");
          float t = 0;
          SL_CUDA_CHECK(cudaEventElapsedTime(&t, e0.get(), e1.get()), "cuDNN graph timing");
          if (k > 0) ms = std::min(ms, t);
        }
      } catch (const Error&) {
        continue;  // listed, built, but does not run: the next one
      }
      ++timed;
      if (trace)
        report += str_cat(" ", fused ? "fused" : "plain", "#", i, " (engine ", e.index, " ", e.notes, ", ",
                          workspace_of(*p) >> 20, " MiB) ", ms, " ms;");
      if (ms < best) {
        best = ms;
        plan_ = p;
        fused_ = fused;
        index_ = int(i);
        ws_bytes_ = workspace_of(*p);
        engine_ = str_cat("engine ", e.index, e.notes.empty() ? "" : " ", e.notes);
      }
    }
  }
  pack_.reset();
  if (trace)
    std::fprintf(stderr, "  cudnn graph %dx%d/%d %d->%d on %dx%d:%s picked %s; %.1f ms\n", c_.k, c_.kernel_w(),
                 c_.sh, c_.cin, c_.cout, c_.w, c_.h, report.c_str(), chosen() ? name().c_str() : "none",
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count());
  if (!plan_)
    throw_error("cuDNN graph: no engine runs this ", c_.k, "x", c_.kernel_w(), " stride ", c_.sh, " convolution ", c_.cin, "->",
                c_.cout, " on ", c_.w, "x", c_.h, " within ", scratch_bytes >> 20, " MiB");
}

bool CudnnGraphConv::preset(const std::string& choice, size_t scratch_bytes) {
  int fused = -1, index = -1;
  char tail = 0;
  if (std::sscanf(choice.c_str(), "%d %d%c", &fused, &index, &tail) != 2 || fused < 0 || fused > 1 ||
      index < 0 || index >= kRanked)
    return false;
  try {
    const auto g = build(fused == 1);
    const auto cfgs = configs(*g, index + 1);
    if (size_t(index) >= cfgs.size()) return false;
    const Engine e = engine_of(*cfgs[size_t(index)]);
    if (e.excluded) return false;
    engine_ = str_cat("engine ", e.index, e.notes.empty() ? "" : " ", e.notes);
    const auto p = finalize_plan(*g, cfgs[size_t(index)]);
    if (!p || workspace_of(*p) > int64_t(scratch_bytes)) return false;
    plan_ = p;
    fused_ = fused == 1;
    index_ = index;
    ws_bytes_ = workspace_of(*p);
  } catch (const Error&) {
    return false;
  }
  pack_.reset();
  return true;
}

bool CudnnGraphConv::ready(const std::string& saved, const void* x, const void* w, const float* b, void* y, void* ws,
                           size_t scratch_bytes, bool runtime_fusion, cudaStream_t s) {
  if (!saved.empty() && preset(saved, scratch_bytes)) return true;
  try {
    choose(x, w, b, y, ws, scratch_bytes, runtime_fusion, s);
  } catch (const Error&) {
    return false;
  }
  return true;
}

std::string CudnnGraphConv::choice() const { return str_cat(fused_ ? 1 : 0, " ", index_); }

std::string CudnnGraphConv::name() const {
  return str_cat("cudnn graph", fused_ ? " (fused bias/ReLU)" : "", " #", index_, " [", engine_, "]");
}

void CudnnGraphConv::forward(const void* x, const void* w, const float* b, void* y, void* ws,
                             cudaStream_t s) {
  SL_REQUIRE(plan_, "cuDNN graph: forward before an engine was chosen");
  execute(*plan_, fused_, x, w, b, y, ws, s);
}

}  // namespace scenelab::cuda
#endif
