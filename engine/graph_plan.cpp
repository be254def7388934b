// Graph::plan (engine/graph.h), in its phases: each node's shape, geometry and format and the
// fusions (infer_nodes), the pass's steps with the format conversions it needs (place_steps),
// buffers shared by values whose lifetimes do not overlap (assign_buffers), then the memory,
// checked against what the backend has free before anything is allocated (allocate).
#include <algorithm>
#include <map>

#include "core/error.h"
#include "engine/graph.h"
#include "engine/graph_nodes.h"

namespace scenelab {

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
  // an identity's memory is its input's, which other nodes may read: nothing is fused into it
  if (readers[src] != 1 || kept_[src] || nodes_[src]->identity) return;
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

std::vector<int> Graph::node_indices(const std::vector<std::string>& names) const {
  std::vector<int> out;
  for (const auto& name : names) {
    const int k = index_of(name);
    SL_REQUIRE(k >= 0, "PlanIO: '", name, "' is the graph input, not a node");
    out.push_back(k);
  }
  return out;
}

void Graph::plan(int n, int h, int w, const Backend& backend, const PlanIO& io) {
  planned_ = false;
  io_ = io;
  const std::vector<int> u8_nodes = node_indices(io.u8_outputs), f32_nodes = node_indices(io.f32_outputs);
  SL_REQUIRE(n >= 1 && h >= 1 && w >= 1, "input size ", n, "x", h, "x", w, " is empty");
  backend_ = &backend;
  input_shape_ = Shape(n, model_.graph.input_channels, h, w);
  infer_nodes(backend);
  place_steps();
  allocate(backend, assign_buffers(backend), u8_nodes, f32_nodes);
  const bool host = backend.kind() == DeviceKind::CPU;
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

void Graph::infer_nodes(const Backend& backend) {
  const int h = input_shape_.h, w = input_shape_.w;
  const PlanIO& io = io_;
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
    node->identity = false;
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
    const int src = node->inputs.empty() ? -1 : node->inputs[0];
    if (src >= 0 && node->layer->is_identity(shapes, geos, node->shape)) {  // input 0's memory, nothing run
      const Node& s = *nodes_[size_t(src)];
      node->identity = true;
      node->alias_of = s.alias_of >= 0 ? s.alias_of : src;
      node->in_format = node->format = s.format;
      continue;
    }
    try_fuse(i, readers, backend);
  }
}

void Graph::place_steps() {
  const size_t N = nodes_.size();
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
}

std::vector<size_t> Graph::assign_buffers(const Backend& backend) {
  const size_t N = nodes_.size();
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
  return sizes;
}

void Graph::allocate(const Backend& backend, const std::vector<size_t>& sizes, const std::vector<int>& u8_nodes,
                     const std::vector<int>& f32_nodes) {
  const int n = input_shape_.n, h = input_shape_.h, w = input_shape_.w;
  const PlanIO& io = io_;
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
}

}  // namespace scenelab
