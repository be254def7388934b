#include "engine/graph.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "core/error.h"

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

struct Graph::Node {
  std::unique_ptr<Layer> layer;
  std::vector<int> inputs;  // node indices, -1 for the graph input
  LayerParams params;
  Shape shape;
  Geometry geometry;
  Format in_format;         // what it reads (inputs in another format are converted)
  Format format;            // what it writes
  double ops = 0;
  int alias_of = -2;        // >= 0: this node was fused into that one, whose memory holds its output
  bool fused_relu = false;  // this node applies a following ReLU
  std::vector<Epilogue> epilogue;  // the followers fused into this node, in order
  Shape written;            // what its memory holds: its shape, or its last fused follower's
};

// A tensor of the plan: a node's output (value id = node index), the graph input (-1), or a
// conversion the planner placed (ids after the nodes).
struct Graph::Value {
  Shape shape;
  Format format;
  int alias_of = -2;  // >= -1: the same memory as that value (a fused follower's output)
  int buffer = -1;
  int last_use = 0;   // the last step reading it
};

// One step of the pass: a node, or a conversion of value `src` into value `dst`.
struct Graph::Step {
  int node = -1;                // >= 0: this node
  int src = 0, dst = 0;         // a conversion
  std::vector<int> in_values;   // the node's inputs (after conversions)
};

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

// Where node i's output may be fused into its producer as an epilogue (Layer::as_epilogue): the
// producer (or the node it was itself fused into) applies it on the way out, so the follower
// does not run and its output is that node's memory. Only where the producer's output has no
// other reader and is not read after the pass (kept_), and where that node's layer says it can
// (Layer::can_fuse, at this plan's shapes and formats).
void Graph::try_fuse(size_t i, const std::vector<int>& readers, const Backend& backend) {
  Node& n = *nodes_[i];
  Epilogue e = n.layer->as_epilogue();
  if (e.kind == Epilogue::Kind::None || n.inputs.size() != 1 || n.inputs[0] < 0) return;
  const size_t src = size_t(n.inputs[0]);
  if (readers[src] != 1 || kept_[src]) return;
  e.params = &n.params;
  const size_t root = nodes_[src]->alias_of >= 0 ? size_t(nodes_[src]->alias_of) : src;
  Node& r = *nodes_[root];
  std::vector<Epilogue> chain = r.epilogue;
  chain.push_back(e);
  std::vector<Shape> shapes;
  std::vector<Format> formats;
  for (int k : r.inputs) {
    shapes.push_back(k < 0 ? input_shape_ : nodes_[size_t(k)]->shape);
    formats.push_back(k < 0 ? Format{} : nodes_[size_t(k)]->format);
  }
  if (!r.layer->can_fuse(chain, shapes, formats, backend)) return;
  r.epilogue = std::move(chain);
  r.fused_relu = r.fused_relu || e.kind == Epilogue::Kind::Relu;
  r.written = n.shape;
  n.alias_of = int(root);
  r.format = n.format;  // what the last follower writes (a standardisation may write half NHWC)
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

void Graph::plan(int n, int h, int w, const Backend& backend, const PlanIO& io) {
  planned_ = false;
  io_ = io;
  std::vector<int> u8_nodes, f32_nodes;
  for (const auto& name : io.u8_outputs) {
    const int k = index_of(name);
    SL_REQUIRE(k >= 0, "PlanIO: '", name, "' is the graph input, not a node");
    u8_nodes.push_back(k);
  }
  for (const auto& name : io.f32_outputs) {
    const int k = index_of(name);
    SL_REQUIRE(k >= 0, "PlanIO: '", name, "' is the graph input, not a node");
    f32_nodes.push_back(k);
  }
  SL_REQUIRE(n >= 1 && h >= 1 && w >= 1, "input size ", n, "x", h, "x", w, " is empty");
  backend_ = &backend;
  input_shape_ = Shape(n, model_.graph.input_channels, h, w);
  const size_t N = nodes_.size();
  // The nodes read after the pass (outputs, PlanIO::keep, u8_outputs, f32_outputs): their memory
  // lives to the end and no follower is fused into them.
  kept_.assign(N, false);
  for (const auto* names : {&model_.graph.outputs, &io.keep, &io.u8_outputs, &io.f32_outputs})
    for (const auto& name : *names) {
      const int k = index_of(name);
      if (k >= 0) kept_[size_t(k)] = true;  // k < 0: the graph input, kept anyway
    }
  // Fusion (try_fuse) is decided anew for every plan: it depends on the shapes, the formats and
  // the backend. Readers per node.
  std::vector<int> readers(N, 0);
  for (auto& node : nodes_) {
    node->alias_of = -2;
    node->fused_relu = false;
    node->epilogue.clear();
    for (int k : node->inputs)
      if (k >= 0) readers[size_t(k)]++;
  }
  // Shapes, geometry and the format each layer computes in on this backend.
  for (size_t i = 0; i < N; ++i) {
    auto& node = nodes_[i];
    std::vector<Shape> shapes;
    std::vector<Geometry> geos;
    std::vector<Format> formats;
    for (int k : node->inputs) {
      shapes.push_back(k < 0 ? input_shape_ : nodes_[size_t(k)]->shape);
      geos.push_back(k < 0 ? Geometry{} : nodes_[size_t(k)]->geometry);
      formats.push_back(k < 0 ? Format{} : nodes_[size_t(k)]->format);
    }
    try {
      node->shape = node->layer->infer_shape(shapes);
    } catch (const Error& e) {
      throw_error("input ", w, "x", h, " is too small or malformed for this network: ", e.what());
    }
    SL_REQUIRE(node->shape.h >= 1 && node->shape.w >= 1, "input ", w, "x", h,
               " is too small for this network: layer '", node->layer->name(), "' would output ",
               node->shape.str());
    node->geometry = node->layer->infer_geometry(geos, shapes);
    node->ops = node->layer->ops(shapes, node->shape);
    node->in_format = node->layer->format(formats, backend);
    node->format = node->layer->output_format(formats, backend);
    node->written = node->shape;
    try_fuse(i, readers, backend);
  }
  // Values and steps: a conversion is placed before the first layer that reads a tensor in
  // another format than its producer's, and shared by every later reader wanting that format.
  values_.assign(N, Value{});
  for (size_t i = 0; i < N; ++i) {
    values_[i].shape = nodes_[i]->alias_of >= -1 ? nodes_[i]->shape : nodes_[i]->written;
    values_[i].format = nodes_[i]->format;
    values_[i].alias_of = nodes_[i]->alias_of;
  }
  steps_.clear();
  std::map<std::pair<int, int>, int> converted;  // (value, format code) -> converted value
  auto format_code = [](const Format& f) { return int(f.dtype) * 2 + int(f.layout); };
  for (size_t i = 0; i < N; ++i) {
    Node& node = *nodes_[i];
    Step st;
    st.node = int(i);
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      const int k = node.inputs[j];
      const Format have = k < 0 ? Format{} : values_[size_t(k)].format;
      if (have == node.in_format || !node.layer->reads_values(int(j)) || node.alias_of >= -1) {
        st.in_values.push_back(k);
        continue;
      }
      const auto key = std::make_pair(k, format_code(node.in_format));
      auto it = converted.find(key);
      if (it == converted.end()) {
        Value v;
        v.shape = k < 0 ? input_shape_ : values_[size_t(k)].shape;
        v.format = node.in_format;
        values_.push_back(v);
        Step c;
        c.src = k;
        c.dst = int(values_.size()) - 1;
        steps_.push_back(c);
        it = converted.emplace(key, c.dst).first;
      }
      st.in_values.push_back(it->second);
    }
    steps_.push_back(std::move(st));
  }
  // Liveness: a buffer is free after its last reader ran; graph outputs live to the end.
  const int end = int(steps_.size());
  for (auto& v : values_) v.last_use = 0;
  auto use = [&](int v, int at) {
    const int o = owner(v);
    if (o >= 0) values_[size_t(o)].last_use = std::max(values_[size_t(o)].last_use, at);
  };
  for (int s = 0; s < end; ++s) {
    const Step& st = steps_[size_t(s)];
    if (st.node < 0) {
      use(st.src, s);
      use(st.dst, s);
    } else {
      use(st.node, s);
      for (int v : st.in_values) use(v, s);
    }
  }
  for (size_t k = 0; k < N; ++k)
    if (kept_[k]) use(int(k), end);
  // Greedy assignment of buffers, in bytes: reuse the free buffer that fits best, else grow one.
  std::vector<size_t> sizes;
  std::vector<int> busy_until;
  workspace_floats_ = 0;
  for (int s = 0; s < end; ++s) {
    const Step& st = steps_[size_t(s)];
    int v = st.dst;
    if (st.node >= 0) {
      const Node& node = *nodes_[size_t(st.node)];
      std::vector<Shape> shapes;
      for (int k : st.in_values) shapes.push_back(k < 0 ? input_shape_ : values_[size_t(k)].shape);
      workspace_floats_ = std::max(workspace_floats_,
                                   node.epilogue.empty()
                                       ? node.layer->workspace_floats(shapes, node.shape, backend)
                                       : node.layer->fused_workspace_floats(node.epilogue, shapes, node.shape, backend));
      if (node.alias_of >= -1) continue;
      v = st.node;
    }
    Value& val = values_[size_t(v)];
    const size_t need = val.shape.numel() * dtype_bytes(val.format.dtype);
    int best = -1;
    for (size_t b = 0; b < sizes.size(); ++b) {
      if (busy_until[b] >= s) continue;  // still read by step s or later (or written by s)
      if (best < 0 || (sizes[b] >= need) > (sizes[size_t(best)] >= need) ||
          ((sizes[b] >= need) == (sizes[size_t(best)] >= need) &&
           (sizes[b] >= need ? sizes[b] < sizes[size_t(best)] : sizes[b] > sizes[size_t(best)])))
        best = int(b);
    }
    if (best < 0) {
      best = int(sizes.size());
      sizes.push_back(0);
      busy_until.push_back(0);
    }
    sizes[size_t(best)] = std::max(sizes[size_t(best)], need);
    busy_until[size_t(best)] = val.last_use;
    val.buffer = best;
  }
  // The previous plan's memory goes first, then the whole need is checked against what the
  // backend has free, so a size that cannot fit fails by name before anything is allocated.
  buffers_.clear();
  workspace_ = input_buffer_ = input_u8_ = nullptr;
  u8_outputs_.clear();
  f32_outputs_.clear();
  replay_ = nullptr;
  const bool host = backend.kind() == DeviceKind::CPU;
  const bool new_params = !host && params_backend_ != &backend;
  if (new_params) {
    device_params_.clear();
    params_backend_ = nullptr;
  }
  size_t bytes = std::max<size_t>(workspace_floats_, 1) * sizeof(float);
  for (size_t s : sizes) bytes += s;
  const bool float_input = !host || io.u8_input;  // a planned float input buffer
  if (float_input) bytes += input_shape_.numel() * sizeof(float);
  const bool resized = io.source_h > 0 && io.source_w > 0 && (io.source_h != h || io.source_w != w);
  SL_REQUIRE(!resized || io.u8_input, "PlanIO: a source size needs u8_input");
  const size_t u8_bytes = size_t(n) * input_shape_.c * (resized ? size_t(io.source_h) * io.source_w
                                                                 : size_t(h) * w);
  const bool own_u8 = !host && io.u8_input && !io.u8_shared;
  if (own_u8) bytes += u8_bytes;
  u8_bytes_ = u8_bytes;
  for (int k : u8_nodes) bytes += nodes_[size_t(k)]->shape.numel();
  for (int k : f32_nodes)
    if (nodes_[size_t(k)]->format != Format{}) bytes += nodes_[size_t(k)]->shape.numel() * sizeof(float);
  if (new_params)
    for (const auto& [name, t] : model_.params) bytes += t.numel() * sizeof(float);
  planned_bytes_ = bytes;
  const size_t free = backend.free_bytes();
  auto mib = [](size_t b) { return (b + (size_t(1) << 20) - 1) >> 20; };
  SL_REQUIRE(free == 0 || bytes <= free, "input ", w, "x", h, " (batch ", n, ") needs ", mib(bytes),
             host ? " MiB of host memory (activations, workspace)"
                  : " MiB of device memory (activations, workspace, parameters)",
             " but ", mib(free), " MiB are free on ", backend.describe());
  try {
    buffer_bytes_ = sizes;
    for (size_t s : sizes) buffers_.push_back(backend.allocate(s));
    workspace_ = backend.allocate(std::max<size_t>(workspace_floats_, 1) * sizeof(float));
    if (float_input) input_buffer_ = backend.allocate(input_shape_.numel() * sizeof(float));
    if (own_u8) input_u8_ = backend.allocate(u8_bytes);
    for (int k : u8_nodes) u8_outputs_[k] = backend.allocate(nodes_[size_t(k)]->shape.numel());
    for (int k : f32_nodes)
      if (nodes_[size_t(k)]->format != Format{})
        f32_outputs_[k] = backend.allocate(nodes_[size_t(k)]->shape.numel() * sizeof(float));
    // Parameters live where the backend computes: uploaded once per backend.
    if (new_params) {
      for (const auto& [name, t] : model_.params) {
        BackendMemory m = backend.allocate(t.numel() * sizeof(float));
        backend.upload(m.get(), t.data(), t.numel() * sizeof(float));
        device_params_[&t] = m;
      }
      params_backend_ = &backend;
    }
  } catch (const Error& e) {
    buffers_.clear();
    workspace_ = input_buffer_ = input_u8_ = nullptr;
    u8_outputs_.clear();
    f32_outputs_.clear();
    throw_error("input ", w, "x", h, " (batch ", n, ") needs ", mib(bytes),
                " MiB of backend memory: ", e.what());
  }
  input_view_ = TensorView{input_buffer_.get(), input_shape_, Format{}};
  input_u8_src_ = static_cast<const uint8_t*>(input_u8_.get());
  for (auto& node : nodes_)
    node->params.place([&](const Tensor& t) {
      return host ? t.data() : static_cast<const float*>(device_params_.at(&t).get());
    });
  runs_since_plan_ = 0;
  has_input_ = false;
  capture_failed_ = false;
  stats_.clear();
  for (auto& node : nodes_)
    stats_.push_back({node->layer->name(), node->layer->type(), node->shape, node->ops, 0.0, {}});
  planned_ = true;
}

void Graph::run(const TensorView& input) {
  SL_REQUIRE(planned_, "Graph::run before plan()");
  SL_REQUIRE(input.shape == input_shape_, "input shape ", input.shape.str(),
             " differs from the planned ", input_shape_.str());
  SL_REQUIRE(input.format == Format{}, "Graph::run takes an f32 NCHW input, got ", input.format.str());
  backend_->activate();
  SL_REQUIRE(!io_.u8_input, "Graph::run: this plan takes 8-bit pixels (run_u8)");
  if (input_buffer_) {  // the input goes up once; everything else stays on the device
    backend_->upload(input_buffer_.get(), input.data, input.shape.numel() * sizeof(float));
    input_view_ = TensorView{input_buffer_.get(), input.shape, Format{}};
  } else {
    input_view_ = input;
  }
  has_input_ = true;
  run_resident();
}

void Graph::upload_u8(const uint8_t* pixels) {
  SL_REQUIRE(planned_, "Graph::upload_u8 before plan()");
  SL_REQUIRE(io_.u8_input, "Graph::upload_u8: the plan takes a float input (PlanIO::u8_input)");
  SL_REQUIRE(!io_.u8_shared, "Graph::upload_u8: the plan takes shared pixels (use_u8_input)");
  backend_->activate();
  if (input_u8_)
    backend_->upload_async(input_u8_.get(), pixels, u8_bytes_);
  else
    input_u8_src_ = pixels;  // the CPU converts straight from the caller's pixels
  has_input_ = true;
}

void Graph::copy_u8_input(const uint8_t* backend_pixels) {
  SL_REQUIRE(planned_, "Graph::copy_u8_input before plan()");
  SL_REQUIRE(io_.u8_input && !io_.u8_shared, "Graph::copy_u8_input: the plan has no input bytes of its own");
  backend_->activate();
  if (input_u8_)
    backend_->copy(input_u8_.get(), backend_pixels, u8_bytes_);
  else
    input_u8_src_ = backend_pixels;  // the CPU reads the caller's pixels where they are
  has_input_ = true;
}

const uint8_t* Graph::u8_output_in_backend(const std::string& node) const {
  SL_REQUIRE(planned_, "Graph::u8_output_in_backend before plan()");
  const auto it = u8_outputs_.find(index_of(node));
  SL_REQUIRE(it != u8_outputs_.end(), "Graph: node '", node, "' is not among the plan's u8_outputs");
  return static_cast<const uint8_t*>(it->second.get());
}

void Graph::use_u8_input(const uint8_t* backend_pixels) {
  SL_REQUIRE(planned_, "Graph::use_u8_input before plan()");
  SL_REQUIRE(io_.u8_input && io_.u8_shared, "Graph::use_u8_input: the plan does not take shared pixels (PlanIO::u8_shared)");
  if (backend_pixels != input_u8_src_) replay_ = nullptr;  // a recorded pass reads the old address
  input_u8_src_ = backend_pixels;
  has_input_ = true;
}

void Graph::run_u8(const uint8_t* pixels) {
  upload_u8(pixels);
  run_resident();
}

void Graph::run_resident() {
  SL_REQUIRE(planned_ && has_input_, "Graph::run_resident before a run() since plan()");
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
  SL_REQUIRE(planned_ && has_input_, "Graph::enqueue before an input since plan()");
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
