#include "engine/graph.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "core/error.h"
#include "engine/graph_nodes.h"

namespace scenelab {

const float* LayerParams::data(const std::string& name) const {
  auto it = data_.find(name);
  if (it != data_.end()) return it->second;
  return get(name).data();
}

void Layer::forward_cuda(const ForwardArgs&, const CudaContext&) const {
  throw_error("layer '", name_, "' (", type(), ") has no GPU implementation");
}

const Tensor& LayerParams::get(const std::string& name) const {
  auto it = map_.find(name);
  SL_REQUIRE(it != map_.end() && it->second, "layer parameter '", name, "' was not bound");
  return *it->second;
}

Shape param_shape(const std::vector<int>& d) {
  SL_REQUIRE(!d.empty() && d.size() <= 4, "parameter rank ", d.size(), " not supported");
  int v[4] = {1, 1, 1, 1};
  for (size_t i = 0; i < d.size(); ++i) v[i] = d[i];
  return Shape(v[0], v[1], v[2], v[3]);
}

namespace {

// Channel counts do not depend on the spatial size; infer them on a nominal large input.
constexpr int kNominal = 1 << 12;

struct Instantiated {
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<std::vector<int>> inputs;  // node indices, -1 for the graph input
  std::vector<Shape> nominal;
};

Instantiated instantiate(const GraphDesc& g) {
  Instantiated r;
  std::map<std::string, int> index{{g.input_name, -1}};
  Shape in_shape(1, g.input_channels, kNominal, kNominal);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const NodeDesc& d = g.nodes[i];
    auto layer = create_layer(d);
    std::vector<int> ins;
    std::vector<Shape> shapes;
    for (const auto& in : d.inputs) {
      int k = index.at(in);
      ins.push_back(k);
      shapes.push_back(k < 0 ? in_shape : r.nominal[size_t(k)]);
    }
    int want = layer->num_inputs();
    SL_REQUIRE(want < 0 || int(ins.size()) == want, "graph line ", d.line, ": ", d.type, " '",
               d.name, "' takes ", want, " input(s), got ", ins.size());
    r.nominal.push_back(layer->infer_shape(shapes));
    r.inputs.push_back(ins);
    r.layers.push_back(std::move(layer));
    index[d.name] = int(i);
  }
  return r;
}

}  // namespace

std::vector<ParamRequirement> required_params(const GraphDesc& g) {
  Instantiated inst = instantiate(g);
  std::vector<ParamRequirement> out;
  std::map<std::string, size_t> seen;
  Shape in_shape(1, g.input_channels, kNominal, kNominal);
  for (size_t i = 0; i < inst.layers.size(); ++i) {
    std::vector<Shape> shapes;
    for (int k : inst.inputs[i]) shapes.push_back(k < 0 ? in_shape : inst.nominal[size_t(k)]);
    const Layer& L = *inst.layers[i];
    for (const auto& spec : L.param_specs(shapes)) {
      std::string ds = L.param_group() + "/" + spec.name;
      auto it = seen.find(ds);
      if (it != seen.end()) {
        SL_REQUIRE(out[it->second].dims == spec.dims, "node '", L.name(), "' shares parameter '",
                   ds, "' with node '", out[it->second].node, "' but needs another shape");
        continue;
      }
      seen[ds] = out.size();
      out.push_back({ds, spec.dims, L.name()});
    }
  }
  return out;
}

int node_channels(const GraphDesc& g, const std::string& node) {
  if (node == g.input_name) return g.input_channels;
  Instantiated inst = instantiate(g);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == node) return inst.nominal[i].c;
  throw_error("graph has no node named '", node, "'");
}

Graph::Graph(const Model& model) : model_(model) {
  Instantiated inst = instantiate(model.graph);
  for (size_t i = 0; i < inst.layers.size(); ++i) {
    auto n = std::make_unique<Node>();
    n->layer = std::move(inst.layers[i]);
    n->inputs = inst.inputs[i];
    index_[n->layer->name()] = int(nodes_.size());
    nodes_.push_back(std::move(n));
  }
  // Bind and check parameters once; shapes come from required_params().
  for (const auto& req : required_params(model.graph)) {
    auto it = model.params.find(req.dataset);
    SL_REQUIRE(it != model.params.end(), "model '", model.name, "': missing parameter '",
               req.dataset, "' (needed by node '", req.node, "')");
    SL_REQUIRE(it->second.shape() == param_shape(req.dims), "model '", model.name,
               "': parameter '", req.dataset, "' has shape ", it->second.shape().str(),
               ", expected ", param_shape(req.dims).str());
  }
  Shape in_shape(1, model.graph.input_channels, kNominal, kNominal);
  for (auto& n : nodes_) {
    std::vector<Shape> shapes;
    for (int k : n->inputs) shapes.push_back(k < 0 ? in_shape : nodes_[size_t(k)]->shape);
    n->shape = n->layer->infer_shape(shapes);
    for (const auto& spec : n->layer->param_specs(shapes))
      n->params.set(spec.name, &model.params.at(n->layer->param_group() + "/" + spec.name));
  }
}

Graph::~Graph() = default;

int Graph::index_of(const std::string& name) const {
  if (name == model_.graph.input_name) return -1;
  auto it = index_.find(name);
  if (it == index_.end()) throw_error("graph has no node named '", name, "'");
  return it->second;
}

std::vector<Shape> Graph::input_shapes(const Node& n) const {
  std::vector<Shape> shapes;
  for (int k : n.inputs) shapes.push_back(k < 0 ? input_shape_ : nodes_[size_t(k)]->shape);
  return shapes;
}

int Graph::owner(int v) const {
  while (v >= 0 && values_[size_t(v)].alias_of >= -1) v = values_[size_t(v)].alias_of;
  return v;
}

TensorView Graph::view_of(int v) const {
  if (v < 0) return input_view_;
  const Value& val = values_[size_t(owner(v))];
  return TensorView{buffers_[size_t(val.buffer)].get(), values_[size_t(v)].shape, val.format};
}

size_t Graph::conversions() const {
  size_t n = 0;
  for (const auto& s : steps_) n += s.node < 0;
  return n;
}

void Graph::feed(const TensorView& input) {
  SL_REQUIRE(planned_, "Graph::feed before plan()");
  SL_REQUIRE(input.shape == input_shape_, "input shape ", input.shape.str(),
             " differs from the planned ", input_shape_.str());
  SL_REQUIRE(input.format == Format{}, "Graph::feed takes an f32 NCHW input, got ", input.format.str());
  backend_->activate();
  SL_REQUIRE(!io_.u8_input, "Graph::feed: this plan takes 8-bit pixels (feed_u8)");
  if (input_buffer_) {  // the input goes up once; everything else stays on the device
    backend_->upload(input_buffer_.get(), input.data, input.shape.numel() * sizeof(float));
    input_view_ = TensorView{input_buffer_.get(), input.shape, Format{}};
  } else {
    input_view_ = input;
  }
  has_input_ = true;
}

void Graph::feed_u8(const uint8_t* pixels, Pixels where) {
  SL_REQUIRE(planned_, "Graph::feed_u8 before plan()");
  SL_REQUIRE(io_.u8_input, "Graph::feed_u8: the plan takes a float input (PlanIO::u8_input)");
  backend_->activate();
  if (io_.u8_shared) {
    SL_REQUIRE(where == Pixels::Backend,
               "Graph::feed_u8: the plan reads shared pixels in the backend's memory (PlanIO::u8_shared)");
    if (pixels != input_u8_src_) replay_ = nullptr;  // a recorded pass reads the old address
    input_u8_src_ = pixels;
  } else if (!input_u8_) {
    input_u8_src_ = pixels;  // the CPU converts straight from the caller's pixels
  } else if (where == Pixels::Host) {
    backend_->upload_async(input_u8_.get(), pixels, u8_bytes_);
  } else {
    backend_->copy(input_u8_.get(), pixels, u8_bytes_);
  }
  has_input_ = true;
}

const uint8_t* Graph::u8_output_in_backend(const std::string& node) const {
  SL_REQUIRE(planned_, "Graph::u8_output_in_backend before plan()");
  const auto it = u8_outputs_.find(index_of(node));
  SL_REQUIRE(it != u8_outputs_.end(), "Graph: node '", node, "' is not among the plan's u8_outputs");
  return static_cast<const uint8_t*>(it->second.get());
}

void Graph::run() {
  SL_REQUIRE(planned_ && has_input_, "Graph::run before an input was fed since plan()");
  if (replay_ && !profiling_) {
    backend_->replay(replay_);
    return;
  }
  if (runs_since_plan_ >= 1 && !profiling_ && !capture_failed_ && backend_->cuda()) {
    try {
      replay_ = backend_->capture([this] { run_layers(); });
    } catch (const Error&) {
      capture_failed_ = true;  // run uncaptured from now on
      replay_ = nullptr;
    }
    if (replay_) {
      backend_->replay(replay_);
      return;
    }
  }
  run_layers();
  ++runs_since_plan_;
}

void Graph::enqueue() {
  SL_REQUIRE(planned_ && has_input_, "Graph::enqueue before an input was fed since plan()");
  run_layers();
}

void Graph::run_layers() {
  if (io_.u8_input) {
    const Shape& s = input_shape_;
    if (io_.source_h > 0 && io_.source_w > 0 && (io_.source_h != s.h || io_.source_w != s.w))
      backend_->resize_u8_to_float(input_u8_src_, io_.source_h, io_.source_w, input_view_.f32(), s.n, s.c,
                                   s.h, s.w, 255.f);
    else
      backend_->u8_to_float(input_u8_src_, input_view_.f32(), s.n, s.c, s.h, s.w, 255.f);
  }
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    if (st.node < 0) {
      backend_->convert(view_of(st.src), view_of(st.dst));
      continue;
    }
    const size_t i = size_t(st.node);
    Node& node = *nodes_[i];
    if (node.alias_of >= -1) {
      stats_[i].time_ms = 0;
      continue;
    }
    ForwardArgs a;
    for (size_t j = 0; j < st.in_values.size(); ++j) {
      a.in.push_back(view_of(st.in_values[j]));
      const int k = node.inputs[j];
      a.in_geometry.push_back(k < 0 ? Geometry{} : nodes_[size_t(k)]->geometry);
    }
    a.out = view_of(int(i));
    a.out_geometry = node.geometry;
    a.workspace = static_cast<float*>(workspace_.get());
    a.params = &node.params;
    a.threads = backend_->threads();
    a.cpu_conv = backend_->cpu_conv();
    a.fused_relu = node.fused_relu;
    if (!node.epilogue.empty()) a.epilogue = &node.epilogue;
    auto t0 = std::chrono::steady_clock::now();
    try {
      if (const CudaContext* ctx = backend_->cuda())
        node.layer->forward_cuda(a, *ctx);
      else
        node.layer->forward_cpu(a);
      if (profiling_) backend_->synchronize();
    } catch (const Error& e) {
      throw_error("layer '", node.layer->name(), "' (", node.layer->type(), "): ", e.what());
    }
    if (profiling_) {
      stats_[i].time_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      stats_[i].detail = node.layer->detail();
    }
  }
  for (const auto& [k, bytes] : u8_outputs_) {
    const TensorView v = view_of(k);
    backend_->convert(v, TensorView{bytes.get(), v.shape, Format{DType::U8, Layout::NCHW}});
  }
  for (const auto& [k, mem] : f32_outputs_) {
    const TensorView v = view_of(k);
    backend_->convert(v, TensorView{mem.get(), v.shape, Format{}});
  }
}

int Graph::kept_index(const std::string& name, const char* what) const {
  SL_REQUIRE(planned_, "Graph::", what, " before plan()");
  const int k = index_of(name);
  SL_REQUIRE(k < 0 || kept_[size_t(k)], "Graph::", what, "('", name, "'): an inner node whose memory the "
             "pass reuses; name it in PlanIO::keep (or as a graph output) to read it");
  return k;
}

TensorView Graph::output(const std::string& name) const { return view_of(kept_index(name, "output")); }

Tensor Graph::fetch(const std::string& name) const {
  const int k = kept_index(name, "fetch");
  TensorView v = view_of(k);
  Tensor t(v.shape);
  if (v.format == Format{}) {
    backend_->download(t.data(), v.data, v.bytes());
  } else if (auto it = f32_outputs_.find(k); it != f32_outputs_.end()) {
    backend_->download(t.data(), it->second.get(), t.numel() * sizeof(float));
  } else {  // any other format: its bytes, converted here
    std::vector<uint8_t> raw(v.bytes());
    backend_->download(raw.data(), v.data, v.bytes());
    to_f32_nchw(TensorView{raw.data(), v.shape, v.format}, t.data());
  }
  return t;
}

void Graph::fetch_async(const std::string& name, float* host) const {
  const int k = kept_index(name, "fetch_async");
  const TensorView v = view_of(k);
  if (v.format == Format{}) {
    backend_->download_async(host, v.data, v.bytes());
    return;
  }
  auto it = f32_outputs_.find(k);
  SL_REQUIRE(it != f32_outputs_.end(), "node '", name, "' is ", v.format.str(),
             ": plan it as a float output (PlanIO::f32_outputs) to fetch it asynchronously");
  backend_->download_async(host, it->second.get(), v.shape.numel() * sizeof(float));
}

void Graph::fetch_u8_async(const std::string& name, uint8_t* host) const {
  SL_REQUIRE(planned_, "Graph::fetch_u8_async before plan()");
  auto it = u8_outputs_.find(index_of(name));
  SL_REQUIRE(it != u8_outputs_.end(), "node '", name, "' was not planned as an 8-bit output");
  backend_->download_async(host, it->second.get(), shape_of(name).numel());
}

Tuning Graph::tuning() const {
  SL_REQUIRE(planned_, "Graph::tuning before plan()");
  Tuning t;
  for (const auto& n : nodes_) {
    std::string text = n->layer->tuning(input_shapes(*n), *backend_);
    if (!text.empty()) t[n->layer->name()] = std::move(text);
  }
  return t;
}

std::vector<std::string> Graph::restore_tuning(const Tuning& t) {
  SL_REQUIRE(planned_, "Graph::restore_tuning before plan()");
  std::vector<std::string> rejected;
  for (const auto& n : nodes_) {
    auto it = t.find(n->layer->name());
    if (it != t.end() && !n->layer->restore_tuning(input_shapes(*n), *backend_, it->second))
      rejected.push_back(n->layer->name());
  }
  return rejected;
}

Shape Graph::shape_of(const std::string& name) const {
  int k = index_of(name);
  return k < 0 ? input_shape_ : nodes_[size_t(k)]->shape;
}

Geometry Graph::geometry_of(const std::string& name) const {
  int k = index_of(name);
  return k < 0 ? Geometry{} : nodes_[size_t(k)]->geometry;
}

Format Graph::format_of(const std::string& name) const {
  int k = index_of(name);
  return k < 0 ? Format{} : nodes_[size_t(k)]->format;
}

double Graph::total_ops() const {
  double s = 0;
  for (const auto& n : nodes_) s += n->ops;
  return s;
}

size_t Graph::activation_bytes() const {
  size_t b = 0;
  for (size_t s : buffer_bytes_) b += s;
  return b;
}

}  // namespace scenelab
