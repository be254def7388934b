// ONNX models in: weights/onnx_model.h says what is mapped and how.
#include "weights/onnx_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/parse_number.h"

#ifdef SCENELAB_WITH_ONNX
#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include "weights/onnx_import.h"
#endif

namespace scenelab {

#ifndef SCENELAB_WITH_ONNX
bool onnx_supported() { return false; }
OnnxImport import_onnx(const std::string& path, const std::vector<Tensor>&, const OnnxLimits&) {
  throw_error(path, ": this build reads no ONNX files (built without libonnx-dev and libprotobuf-dev; "
                    "tools/setup_debian.sh installs them)");
}
Model read_onnx_model(const std::string& path, const OnnxLimits& l) { return import_onnx(path, {}, l).model; }
Tensor read_onnx_tensor(const std::string& path, std::vector<int64_t>*) {
  throw_error(path, ": this build reads no ONNX files");
}
#else
bool onnx_supported() { return true; }

namespace onnx_import {

std::string read_file_limited(const std::string& path, uint64_t max_bytes, const char* what) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  SL_REQUIRE(f, path, ": cannot open the ", what, " (", std::strerror(errno), ")");
  const std::streamoff size = f.tellg();
  SL_REQUIRE(size >= 0, path, ": cannot read the ", what);
  SL_REQUIRE(uint64_t(size) <= max_bytes, path, ": the ", what, " is ", size, " bytes, more than the limit of ",
             max_bytes);
  std::string bytes(size_t(size), '\0');
  f.seekg(0);
  SL_REQUIRE(f.read(bytes.data(), size), path, ": cannot read the ", what);
  return bytes;
}

template <class Message>
void parse(Message& m, const std::string& bytes, const std::string& path, const char* what) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), int(bytes.size()));
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  SL_REQUIRE(m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage(), path, ": not an ONNX ", what,
             " (the protobuf does not parse: truncated or another format)");
}

const char* type_name(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return "float32";
    case onnx::TensorProto::DOUBLE: return "float64";
    case onnx::TensorProto::FLOAT16: return "float16";
    case onnx::TensorProto::INT64: return "int64";
    case onnx::TensorProto::INT32: return "int32";
    case onnx::TensorProto::UINT8: return "uint8";
    case onnx::TensorProto::BOOL: return "bool";
    default: return "another type";
  }
}



std::string sanitize(const std::string& s) {
  std::string r;
  for (char ch : s) r += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  if (r.empty() || !(std::isalpha(static_cast<unsigned char>(r[0])) || r[0] == '_')) r = "v_" + r;
  return r;
}

// A TensorProto's element count, checked before anything is allocated: no negative dimension,
// and count x bytes_each within max_bytes.
uint64_t checked_count(const onnx::TensorProto& t, const std::string& where, uint64_t max_bytes, uint64_t bytes_each) {
  long double count = 1;
  for (int64_t d : t.dims()) {
    SL_REQUIRE(d >= 0, where, ": dimension ", d, " is negative");
    count *= (long double)(d);
  }
  SL_REQUIRE(count * bytes_each <= (long double)max_bytes, where, ": ", double(count),
             " elements, more than the limit of ", max_bytes, " bytes allows");
  return uint64_t(count);
}

// An initialiser whose data lies in another file (external_data: its location beside the model,
// offset, length; PyTorch's dynamo exporter writes model.onnx.data): the same TensorProto with
// those bytes as its raw data. The location must stay in the model's folder; the size is checked
// against the limit and the file before anything is read.
onnx::TensorProto with_external_data(const onnx::TensorProto& t, const std::string& where, const std::string& dir,
                                     uint64_t max_bytes) {
  std::string location;
  long offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      const auto v = parse_long(kv.value(), 0, std::numeric_limits<long>::max());
      SL_REQUIRE(v, where, ": external data ", kv.key(), " '", kv.value(), "' is not a size");
      (kv.key() == "offset" ? offset : length) = *v;
    }
  }
  SL_REQUIRE(!location.empty(), where, ": external data without a location");
  const std::filesystem::path rel(location);
  SL_REQUIRE(rel.is_relative() && std::none_of(rel.begin(), rel.end(), [](const auto& p) { return p == ".."; }),
             where, ": external data at '", location, "', outside the model's folder");
  const uint64_t elem = t.data_type() == onnx::TensorProto::FLOAT ? 4 : t.data_type() == onnx::TensorProto::INT64 ? 8 : 0;
  SL_REQUIRE(elem, where, ": ", type_name(t.data_type()), " data is not supported (float32 and int64 are)");
  const uint64_t need = checked_count(t, where, max_bytes, elem) * elem;
  SL_REQUIRE(length < 0 || uint64_t(length) == need, where, ": external data of ", length, " bytes for ", need);
  const std::string file = (std::filesystem::path(dir) / rel).string();
  std::ifstream f(file, std::ios::binary | std::ios::ate);
  SL_REQUIRE(f, where, ": cannot open its external data ", file, " (", std::strerror(errno), ")");
  const std::streamoff size = f.tellg();
  SL_REQUIRE(size >= 0 && uint64_t(offset) <= uint64_t(size) && need <= uint64_t(size) - uint64_t(offset), where,
             ": external data ", file, " holds ", int64_t(size), " bytes, fewer than offset ", offset, " + ", need);
  std::string raw(need, '\0');
  f.seekg(offset);
  SL_REQUIRE(f.read(raw.data(), std::streamsize(need)), where, ": cannot read its external data ", file);
  onnx::TensorProto r = t;
  r.clear_external_data();
  r.set_data_location(onnx::TensorProto::DEFAULT);
  r.set_raw_data(std::move(raw));
  return r;
}

// Reads a TensorProto's values, checking the element count against the data before allocating.
Const read_const(const onnx::TensorProto& t, const std::string& where, uint64_t max_bytes) {
  SL_REQUIRE(t.data_location() != onnx::TensorProto::EXTERNAL, where,
             ": data in an external file, which only a model's initialisers may have");
  Const c;
  const size_t n = size_t(checked_count(t, where, max_bytes, 4));  // the limit as float32
  c.dims.assign(t.dims().begin(), t.dims().end());
  const bool raw = t.has_raw_data();
  if (t.data_type() == onnx::TensorProto::FLOAT) {
    if (raw) {
      SL_REQUIRE(t.raw_data().size() == n * 4, where, ": raw data of ", t.raw_data().size(), " bytes for ", n,
                 " float32 elements");
      c.f.resize(n);
      if (n) std::memcpy(c.f.data(), t.raw_data().data(), n * 4);  // (an empty tensor's data may be null)
    } else {
      SL_REQUIRE(size_t(t.float_data_size()) == n, where, ": ", t.float_data_size(), " values for ", n, " elements");
      c.f.assign(t.float_data().begin(), t.float_data().end());
    }
    for (float v : c.f) SL_REQUIRE(std::isfinite(v), where, ": a value is NaN or infinite");
    return c;
  }
  if (t.data_type() == onnx::TensorProto::INT64) {
    c.is_int = true;
    if (raw) {
      SL_REQUIRE(t.raw_data().size() == n * 8, where, ": raw data of ", t.raw_data().size(), " bytes for ", n,
                 " int64 elements");
      c.i.resize(n);
      if (n) std::memcpy(c.i.data(), t.raw_data().data(), n * 8);
    } else {
      SL_REQUIRE(size_t(t.int64_data_size()) == n, where, ": ", t.int64_data_size(), " values for ", n, " elements");
      c.i.assign(t.int64_data().begin(), t.int64_data().end());
    }
    return c;
  }
  throw_error(where, ": ", type_name(t.data_type()), " data is not supported (float32 and int64 are)");
}

Tensor to_tensor(const Const& c, const std::string& where) {
  SL_REQUIRE(!c.is_int, where, ": int64 where float32 values are needed");
  SL_REQUIRE(!c.dims.empty() && c.dims.size() <= 4, where, ": rank ", c.dims.size(), " (1 to 4 are supported)");
  std::vector<int> d;
  for (int64_t x : c.dims) {
    SL_REQUIRE(x > 0 && x <= std::numeric_limits<int>::max(), where, ": dimension ", x);
    d.push_back(int(x));
  }
  Tensor t(param_shape(d));
  std::copy(c.f.begin(), c.f.end(), t.data());
  return t;
}


std::string Importer::fresh(const std::string& value) {
  auto it = name_for.find(value);
  std::string base = it != name_for.end() ? it->second : sanitize(value);
  if (it == name_for.end() && reserved.count(base)) base += "_v";
  std::string name = base;
  for (int k = 2; taken.count(name); ++k) name = base + "_" + std::to_string(k);
  taken.insert(name);
  return name;
}

void Importer::add_param(const std::string& key, Tensor t) {
  param_bytes += uint64_t(t.shape().numel()) * 4;
  SL_REQUIRE(param_bytes <= limits.max_param_bytes, path, ": the parameters pass the limit of ",
             limits.max_param_bytes, " bytes");
  model.params[key] = std::move(t);
}

void Importer::name_outputs(const std::vector<std::string>& names) {
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const auto& n : proto.graph().node())
    for (const auto& o : n.output()) producer[o] = &n;
  for (int k = 0; k < proto.graph().output_size() && size_t(k) < names.size(); ++k) {
    std::string v = proto.graph().output(k).name();
    for (auto it = producer.find(v); it != producer.end() && it->second->input_size() > 0 &&
                                     (it->second->op_type() == "Identity" || it->second->op_type() == "Dropout");
         it = producer.find(v))
      v = it->second->input(0);
    name_for[v] = names[size_t(k)];
  }
}

void Importer::alias(const onnx::NodeProto& n) {
  for (int k = 1; k < n.output_size(); ++k)
    if (!n.output(k).empty() && uses[n.output(k)]) unsupported(n, "output " + std::to_string(k));
  if (n.input_size() > 0 && constant(n.input(0))) {  // a constant's copy (torch.onnx shares weights so)
    consts[n.output(0)] = consts.at(n.input(0));
    return;
  }
  node_of[n.output(0)] = data(n, 0);
}

std::string Importer::add(const std::string& value, const std::string& type, std::vector<std::string> inputs, std::vector<std::pair<std::string, std::string>> attrs) {
  NodeDesc d;
  d.name = fresh(value);
  d.type = type;
  d.inputs = std::move(inputs);
  d.line = int(g.nodes.size()) + 1;
  std::map<std::string, std::string> kv(attrs.begin(), attrs.end());
  d.attrs = Attrs(d.name, kv);
  g.nodes.push_back(d);
  node_of[value] = d.name;
  return d.name;
}

void Importer::run(const std::vector<Tensor>& given, const std::vector<std::string>& output_names, const std::vector<float>& mean, const std::vector<float>& stdev) {
  const std::string bytes = read_file_limited(path, limits.max_file_bytes, "ONNX model");
  parse(proto, bytes, path, "model");
  SL_REQUIRE(proto.has_graph(), path, ": the ONNX model has no graph");
  for (const auto& o : proto.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < kOnnxMinOpset || opset > kOnnxMaxOpset)
    unsupported_graph(str_cat("operator set ", opset, " of the default domain (", kOnnxMinOpset, " to ",
                              kOnnxMaxOpset, " are)"));
  const auto& graph = proto.graph();
  SL_REQUIRE(size_t(graph.node_size()) <= limits.max_nodes, path, ": ", graph.node_size(),
             " nodes, more than the limit of ", limits.max_nodes);
  // External data counts against the parameters' limit as it is read (the file's limit does not bound it).
  uint64_t external_left = limits.max_param_bytes;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  for (const auto& t : graph.initializer()) {
    const std::string where = str_cat(path, ": initialiser '", t.name(), "'");
    if (t.data_location() != onnx::TensorProto::EXTERNAL) {
      consts[t.name()] = read_const(t, where, limits.max_param_bytes);
      continue;
    }
    const onnx::TensorProto in = with_external_data(t, where, dir, external_left);
    external_left -= in.raw_data().size();
    consts[t.name()] = read_const(in, where, limits.max_param_bytes);
  }
  std::string image;
  size_t next_given = 0;
  for (const auto& in : graph.input()) {
    if (consts.count(in.name())) continue;
    if (!image.empty() && next_given < given.size()) {
      const Tensor& t = given[next_given++];
      Const c;
      const Shape s = t.shape();
      c.dims = {s.n, s.c, s.h, s.w};
      c.f.assign(t.data(), t.data() + s.numel());
      consts[in.name()] = std::move(c);
      continue;
    }
    if (!image.empty())
      unsupported_graph(str_cat("inputs '", image, "' and '", in.name(),
                                "': one image input (the others must be initialisers)"));
    image = in.name();
    const auto& type = in.type();
    if (!type.has_tensor_type()) unsupported_graph(str_cat("input '", image, "' is not a tensor"));
    if (type.tensor_type().elem_type() != onnx::TensorProto::FLOAT)
      unsupported_graph(str_cat("input '", image, "' is ", type_name(type.tensor_type().elem_type()),
                                " (float32 is supported)"));
    const auto& shape = type.tensor_type().shape();
    rank = shape.dim_size();
    if (rank < 1 || rank > 4)
      unsupported_graph(str_cat("input '", image, "' has rank ", rank, " (1 to 4: N x C x H x W are)"));
    int channels = 1;
    if (rank >= 3) {
      const auto& c = shape.dim(rank - 3);
      if (!(c.has_dim_value() && c.dim_value() > 0 && c.dim_value() <= 4096))
        unsupported_graph(str_cat("input '", image, "' has no fixed channel count (1 to 4096)"));
      channels = int(c.dim_value());
    }
    g.input_name = "image";
    g.input_channels = channels;
    if (rank >= 2 && shape.dim(rank - 2).has_dim_value() && shape.dim(rank - 1).has_dim_value()) {
      input_h = shape.dim(rank - 2).dim_value();
      input_w = shape.dim(rank - 1).dim_value();
    }
  }
  SL_REQUIRE(!image.empty(), path, ": the graph has no input to feed");
  node_of[image] = "image";
  taken.insert("image");
  reserved.insert(output_names.begin(), output_names.end());
  name_outputs(output_names);
  if (!mean.empty() || !stdev.empty()) {  // the input's standardisation, a node before the net's
    const size_t c = size_t(g.input_channels);
    SL_REQUIRE(mean.size() == c && stdev.size() == c, path, ": input_mean and input_std need ", c,
               " values each (one a channel), got ", mean.size(), " and ", stdev.size());
    for (float v : stdev) SL_REQUIRE(v > 0 && std::isfinite(v), path, ": input_std values must be positive");
    const std::string nm = add(image, "standardize", {"image"}, {{"params", "input_norm"}});
    Const m, sd;
    m.dims = sd.dims = {int64_t(c)};
    m.f = mean;
    sd.f = stdev;
    add_param("input_norm/mean", to_tensor(m, path));
    add_param("input_norm/std", to_tensor(sd, path));
    node_of[image] = nm;
  }
  for (const auto& n : graph.node())
    for (const auto& i : n.input()) ++uses[i];
  for (const auto& o : graph.output()) ++uses[o.name()];
  for (const auto& n : graph.node()) map_node(n);
  for (const auto& o : graph.output()) {
    auto it = node_of.find(o.name());
    if (it == node_of.end() && (shapes.count(o.name()) || consts.count(o.name())))
      unsupported_graph(str_cat("output '", o.name(), "' is a shape or a constant, not a map"));
    SL_REQUIRE(it != node_of.end(), path, ": output '", o.name(), "' is not computed by a supported node");
    if (it->second == "image") unsupported_graph(str_cat("output '", o.name(), "' is the input itself"));
    g.outputs.push_back(it->second);
  }
  SL_REQUIRE(!g.nodes.empty(), path, ": the graph computes nothing");
  model.graph = g;
  model.name = proto.graph().name().empty() ? path : proto.graph().name();
  // The parameters against what the layers ask for (their shapes from the channel counts).
  std::vector<ParamRequirement> reqs;
  try {
    reqs = required_params(model.graph);
  } catch (const Error& e) {
    throw_error(path, ": ", e.what());
  }
  for (const auto& r : reqs) {
    auto it = model.params.find(r.dataset);
    SL_REQUIRE(it != model.params.end(), path, ": node '", r.node, "' has no parameter ", r.dataset);
    SL_REQUIRE(it->second.shape() == param_shape(r.dims), path, ": node '", r.node, "': parameter ", r.dataset,
               " is ", it->second.shape().str(), ", the layer needs ", param_shape(r.dims).str());
  }
}

}  // namespace onnx_import

namespace {
using onnx_import::Const;
using onnx_import::Importer;
using onnx_import::parse;
using onnx_import::read_const;
using onnx_import::read_file_limited;

// The metadata_props of an ONNX file, by key.
std::map<std::string, std::string> metadata(const onnx::ModelProto& m) {
  std::map<std::string, std::string> r;
  for (const auto& p : m.metadata_props()) r[p.key()] = p.value();
  return r;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> r;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep)) {
    const size_t a = cur.find_first_not_of(" \t"), b = cur.find_last_not_of(" \t");
    r.push_back(a == std::string::npos ? "" : cur.substr(a, b - a + 1));
  }
  return r;
}

std::vector<float> floats_of(const std::string& s, const std::string& path, const char* key) {
  std::vector<float> r;
  for (const auto& x : split(s, ',')) {
    char* end = nullptr;
    const float v = std::strtof(x.c_str(), &end);
    SL_REQUIRE(!x.empty() && end && *end == '\0' && std::isfinite(v), path, ": metadata '", key, "': '", x,
               "' is not a number");
    r.push_back(v);
  }
  return r;
}

OnnxImport run_import(const std::string& path, const std::vector<Tensor>& given, const OnnxLimits& limits,
                      const std::vector<std::string>& output_names, bool labelling) {
  Importer im;
  im.path = path;
  im.limits = limits;
  std::vector<float> mean, stdev;
  if (labelling) {
    // The metadata before the graph: the preprocessing it asks for is the graph's first node.
    const std::string bytes = read_file_limited(path, limits.max_file_bytes, "ONNX model");
    onnx::ModelProto head;
    parse(head, bytes, path, "model");
    const auto md = metadata(head);
    if (md.count("input_mean")) mean = floats_of(md.at("input_mean"), path, "input_mean");
    if (md.count("input_std")) stdev = floats_of(md.at("input_std"), path, "input_std");
  }
  im.run(given, output_names, mean, stdev);
  OnnxImport r;
  r.model = std::move(im.model);
  r.outputs = r.model.graph.outputs;
  for (const auto& o : im.proto.graph().output()) r.onnx_outputs.push_back(o.name());
  r.opset = im.opset;
  if (labelling) {
    const auto md = metadata(im.proto);
    auto& g = r.model.graph;
    SL_REQUIRE(g.find("scores"), path, ": the first output is not computed by a node of its own");
    g.outputs = {"scores"};
    int classes = 0;
    try {
      classes = node_channels(g, "scores");
    } catch (const Error& e) {
      throw_error(path, ": ", e.what());
    }
    NodeDesc full, labels;
    full.name = "full";
    full.type = "upsample";
    full.inputs = {"scores", "image"};
    // scores_align=geometry (tools/export_onnx.py): resampled by where the scores' pixels lie on the
    // image, as the paper's HDF5 models do; else onto the image's size (F.interpolate's convention)
    const std::string align = md.count("scores_align") ? md.at("scores_align") : "size";
    SL_REQUIRE(align == "size" || align == "geometry", path, ": metadata 'scores_align' is '", align,
               "' (size or geometry)");
    full.attrs = Attrs("full", {{"mode", "bilinear"}, {"align", align}});
    labels.name = "labels_full";
    labels.type = "argmax";
    labels.inputs = {"full"};
    labels.attrs = Attrs("labels_full", {});
    for (const auto& nm : {"full", "labels_full"})
      SL_REQUIRE(!g.find(nm), path, ": a node is named '", nm, "' (reserved for the labels)");
    g.nodes.push_back(full);
    g.nodes.push_back(labels);
    g.outputs.push_back("labels_full");
    if (md.count("class_names")) {
      r.model.class_names = split(md.at("class_names"), ',');
      SL_REQUIRE(int(r.model.class_names.size()) == classes, path, ": metadata 'class_names' names ",
                 r.model.class_names.size(), " classes, the scores have ", classes);
    } else {
      for (int c = 0; c < classes; ++c) r.model.class_names.push_back("class" + std::to_string(c));
    }
    if (md.count("palette")) {
      for (const auto& rgb : split(md.at("palette"), ';')) {
        const auto v = floats_of(rgb, path, "palette");
        SL_REQUIRE(v.size() == 3, path, ": metadata 'palette': '", rgb, "' is not R,G,B");
        std::array<uint8_t, 3> p{};
        for (int k = 0; k < 3; ++k) {
          SL_REQUIRE(v[size_t(k)] >= 0 && v[size_t(k)] <= 255 && v[size_t(k)] == std::floor(v[size_t(k)]), path,
                     ": metadata 'palette': '", rgb, "' is not three whole numbers 0-255");
          p[size_t(k)] = uint8_t(v[size_t(k)]);
        }
        r.model.palette.push_back(p);
      }
      SL_REQUIRE(int(r.model.palette.size()) == classes, path, ": metadata 'palette' has ", r.model.palette.size(),
                 " colours, the scores have ", classes, " classes");
    } else {
      for (int c = 0; c < classes; ++c)  // well-spread hues: the golden angle
        r.model.palette.push_back({uint8_t(128 + 127 * std::cos(c * 2.39996)),
                                   uint8_t(128 + 127 * std::cos(c * 2.39996 + 2.0944)),
                                   uint8_t(128 + 127 * std::cos(c * 2.39996 + 4.18879))});
    }
  }
  return r;
}

}  // namespace

OnnxImport import_onnx(const std::string& path, const std::vector<Tensor>& given, const OnnxLimits& limits) {
  return run_import(path, given, limits, {}, false);
}

Model read_onnx_model(const std::string& path, const OnnxLimits& limits) {
  return run_import(path, {}, limits, {"scores"}, true).model;
}

Tensor read_onnx_tensor(const std::string& path, std::vector<int64_t>* dims) {
  const std::string bytes = read_file_limited(path, uint64_t(1) << 31, "ONNX tensor");
  onnx::TensorProto t;
  parse(t, bytes, path, "tensor");
  Const c = read_const(t, path, uint64_t(1) << 31);
  if (dims) *dims = c.dims;
  SL_REQUIRE(c.dims.size() <= 4, path, ": rank ", c.dims.size(), " (0 to 4 are read)");
  while (c.dims.size() < 4) c.dims.insert(c.dims.begin(), 1);
  if (c.is_int) {
    c.f.assign(c.i.begin(), c.i.end());
    c.is_int = false;
  }
  Tensor r(Shape(int(c.dims[0]), int(c.dims[1]), int(c.dims[2]), int(c.dims[3])));
  std::copy(c.f.begin(), c.f.end(), r.data());
  return r;
}

#endif

}  // namespace scenelab
