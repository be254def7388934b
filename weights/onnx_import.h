// The ONNX importer's inside (weights/onnx_model.h is its outside), shared by its two files:
// weights/onnx_model.cpp (the file, the graph, the labelling model) and weights/onnx_ops.cpp (one
// mapping an operator onto the engine's layers). Only with libonnx (SCENELAB_WITH_ONNX).
#pragma once
#ifdef SCENELAB_WITH_ONNX
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/model.h"
#include "weights/onnx_model.h"

namespace scenelab::onnx_import {

// The domain of the paper's preprocessing layers as model-local functions (tools/export_onnx.py).
constexpr const char* kScenelabDomain = "scenelab";

// A constant's values (float32 or int64 initialisers and Constant nodes).
struct Const {
  std::vector<int64_t> dims;
  std::vector<float> f;
  std::vector<int64_t> i;
  bool is_int = false;
};

// A TensorProto's values, the element count checked against the data before allocating.
Const read_const(const onnx::TensorProto& t, const std::string& where, uint64_t max_bytes);
// As a parameter tensor (float32, rank 1 to 4).
Tensor to_tensor(const Const& c, const std::string& where);

// An element of a shape value (ONNX's Shape and the arithmetic on it: Gather, Slice, Concat,
// Unsqueeze, Squeeze, Reshape, Cast, and Add, Sub, Mul, Div by constants): a constant `value`, or
// ((D + add) / div) * mul + value, D dimension `axis` (0..3: N, C, H, W) of an engine node's
// output, / the floor division (ONNX's Div on int64 truncates: the same for the sizes >= 0 the
// engine checks when it plans). What torch.export writes for a size such as (h - 1) // 8 + 1.
struct SymDim {
  int64_t value = 0;
  std::string node;
  int axis = -1;  // -1: the constant `value`
  int64_t add = 0, div = 1, mul = 1;
  bool plain() const { return axis >= 0 && value == 0 && add == 0 && div == 1 && mul == 1; }
  bool operator==(const SymDim& o) const {
    return value == o.value && node == o.node && axis == o.axis && add == o.add && div == o.div && mul == o.mul;
  }
};

// One import: the ONNX graph walked node by node into the engine's GraphDesc and parameters.
struct Importer {
  std::string path;
  OnnxLimits limits;
  onnx::ModelProto proto;
  int64_t opset = 0;
  std::map<std::string, Const> consts;      // ONNX value -> constant
  std::map<std::string, std::string> node_of;  // ONNX value -> engine node (or the input)
  std::map<std::string, std::string> name_for;  // ONNX value -> the engine name it must have
  std::map<std::string, int> uses;           // ONNX value -> readers
  std::map<std::string, std::vector<SymDim>> shapes;  // ONNX value -> a shape value (1-D int64)
  int64_t input_h = -1, input_w = -1;        // the image input's fixed size, where it has one
  std::set<std::string> taken, reserved;  // reserved: the outputs' names, for them alone
  GraphDesc g;
  Model model;
  uint64_t param_bytes = 0;

  std::string where(const onnx::NodeProto& n) const {
    return str_cat(path, ": node '", n.name().empty() ? n.output_size() ? n.output(0) : "?" : n.name(), "' (",
                   n.op_type(), ")");
  }

  [[noreturn]] void unsupported(const onnx::NodeProto& n, const std::string& what) const {
    throw OnnxUnsupported(str_cat(where(n), ": not supported: ", what));
  }
  [[noreturn]] void unsupported_graph(const std::string& what) const {
    throw OnnxUnsupported(str_cat(path, ": not supported: ", what));
  }

  const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) const {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t def) const {
    const auto* a = attr(n, name);
    return a ? a->i() : def;
  }
  float attr_float(const onnx::NodeProto& n, const std::string& name, float def) const {
    const auto* a = attr(n, name);
    return a ? a->f() : def;
  }
  std::string attr_str(const onnx::NodeProto& n, const std::string& name, const std::string& def) const {
    const auto* a = attr(n, name);
    return a ? a->s() : def;
  }
  std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name) const {
    const auto* a = attr(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }
  // Refuses attributes this mapping does not read.
  void known(const onnx::NodeProto& n, const std::set<std::string>& names) const {
    for (const auto& a : n.attribute())
      if (!names.count(a.name())) unsupported(n, "attribute '" + a.name() + "'");
  }

  const Const* constant(const std::string& v) const {
    auto it = consts.find(v);
    return it == consts.end() ? nullptr : &it->second;
  }
  const Const& need_const(const onnx::NodeProto& n, int input, const char* what) const {
    if (!(input < n.input_size() && !n.input(input).empty())) unsupported(n, str_cat("no ", what));
    const Const* c = constant(n.input(input));
    if (!c) unsupported(n, str_cat(what, " '", n.input(input), "' computed in the graph (it must be a constant)"));
    return *c;
  }
  std::string data(const onnx::NodeProto& n, int input) const {
    SL_REQUIRE(input < n.input_size() && !n.input(input).empty(), where(n), ": input ", input, " is missing");
    const std::string& v = n.input(input);
    auto it = node_of.find(v);
    if (it != node_of.end()) return it->second;
    if (constant(v)) unsupported(n, "a constant '" + v + "' as data (no constant folding)");
    throw_error(where(n), ": input '", v, "' is not computed before this node");
  }

  std::string fresh(const std::string& value);

  // Adds an engine node computing ONNX value `value`; returns its name.
  std::string add(const std::string& value, const std::string& type, std::vector<std::string> inputs,
                  std::vector<std::pair<std::string, std::string>> attrs = {});

  void add_param(const std::string& key, Tensor t);

  // Names for the graph's outputs (the engine's node of ONNX output k: names[k]), through
  // Identity and Dropout to the node that computes the value.
  void name_outputs(const std::vector<std::string>& names);

  void run(const std::vector<Tensor>& given, const std::vector<std::string>& output_names,
           const std::vector<float>& mean, const std::vector<float>& stdev);

  // The node's output 0 is the same value as its input 0 (Identity, inference Dropout).
  void alias(const onnx::NodeProto& n);

  // The engine's tensors are N x C x H x W; a tensor of rank r < 4 is one with 4 - r leading 1s
  // (every mapped operator keeps its input's rank). An axis must be the channels.
  int rank = 4;
  void channel_axis(const onnx::NodeProto& n, int64_t axis) const;

  void map_node(const onnx::NodeProto& n);
  // Refuses a node whose outputs past the first are read (the engine's layers have one).
  void only_first_output(const onnx::NodeProto& n);

  static std::string num(double v);

  void map_activation(const onnx::NodeProto& n);

  // The channels of an engine node's output (the input's, for "image").
  int channels_of(const std::string& node) const;

  // A constant as one value a channel (a scalar spread; [C], [C, 1, 1] or [1, C, 1, 1] shapes, by
  // the data's rank); nullopt-like empty where it is not.
  std::vector<float> per_channel(const Const& c, int channels) const;

  // A channel_op node (its parameters GROUP/value and, for op=affine, GROUP/shift); its name.
  std::string add_channel_op(const std::string& value, const std::string& in, const std::string& op,
                             std::vector<float> v, std::vector<float> shift = {});

  void map_arithmetic(const onnx::NodeProto& n);

  void map_constant(const onnx::NodeProto& n);

  // Folds a BatchNormalization that alone reads a convolution's output into its weight and bias.
  const onnx::NodeProto* bn_after(const onnx::NodeProto& conv) const;

  // A BatchNormalization as y = scale[c] x + shift[c] (its attributes and constants checked).
  std::pair<std::vector<double>, std::vector<double>> bn_affine(const onnx::NodeProto& bn, int64_t channels) const;
  // One not folded into a convolution: channel_op mul, then add.
  void map_batchnorm(const onnx::NodeProto& n);

  void map_conv(const onnx::NodeProto& n);
  // Pad (zeros on the height and width) folded into its one reader, a Conv or an AveragePool:
  // folded_pads holds its top, left, bottom and right, added to the reader's own pads.
  void map_pad(const onnx::NodeProto& n);
  void add_folded_pads(const onnx::NodeProto& n, std::vector<int64_t>& pads) const;
  std::map<std::string, std::vector<int64_t>> folded_pads;

  void map_conv_transpose(const onnx::NodeProto& n);
  // A convolution's bias input (empty: none), checked against its `out` channels.
  std::vector<float> conv_bias(const onnx::NodeProto& n, int64_t out) const;
  // The last node added reads parameter group `name`: its weight and (non-empty) bias.
  void add_weights(const onnx::NodeProto& n, const std::string& name, const Const& weight,
                   const std::vector<float>& bias);

  // Constant folding (weights/onnx_shapes.cpp): true where every input of n is a constant and
  // its operator one folded there (ConstantOfShape, Concat, Reshape, Flatten, Slice, Transpose,
  // Cast, Unsqueeze, Squeeze, Gather); its output is then a constant.
  bool fold_constant(const onnx::NodeProto& n);
  std::vector<int64_t> const_ints(const onnx::NodeProto& n, int input, const char* what) const;
  // Shape arithmetic (Shape, Gather, Slice, Concat, Unsqueeze, Squeeze, Cast on shape values):
  // true where the node was one, its result kept in `shapes` (no engine node).
  bool map_shape_op(const onnx::NodeProto& n);
  std::vector<SymDim> shape_arithmetic(const onnx::NodeProto& n) const;
  // A value as a shape value: from `shapes`, or an int64 constant; false where it is neither.
  bool shape_of(const std::string& v, std::vector<SymDim>& out) const;
  // Resize's attributes that upsample cannot honour, refused.
  void resize_checks(const onnx::NodeProto& n, const std::string& mode) const;

  void map_maxpool(const onnx::NodeProto& n);

  void map_resize(const onnx::NodeProto& n);

  // A call of a model-local function of the domain kScenelabDomain (weights/onnx_functions.cpp).
  void map_scenelab(const onnx::NodeProto& n);

  std::set<const onnx::NodeProto*> folded_;
};

}  // namespace scenelab::onnx_import
#endif
