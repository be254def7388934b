// The ONNX importer's operator mappings (weights/onnx_model.h lists them): each node checked,
// attribute by attribute, and mapped onto the engine's layers, or refused by name
// (Importer::unsupported).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "weights/onnx_import.h"

#ifdef SCENELAB_WITH_ONNX
namespace scenelab::onnx_import {

void Importer::channel_axis(const onnx::NodeProto& n, int64_t axis) const {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a + (4 - rank) != 1)
    unsupported(n, str_cat("axis ", axis, " of rank ", rank, " (only the channels: ", rank - 3, " or -3)"));
}

void Importer::only_first_output(const onnx::NodeProto& n) {
  for (int k = 1; k < n.output_size(); ++k)
    if (!n.output(k).empty() && uses[n.output(k)]) unsupported(n, "output " + std::to_string(k) + " (only the first)");
}

void Importer::map_node(const onnx::NodeProto& n) {
  const bool ours = n.domain() == kScenelabDomain;
  SL_REQUIRE(ours || n.domain().empty() || n.domain() == "ai.onnx", where(n), ": operator domain '", n.domain(),
             "' is not supported");
  SL_REQUIRE(n.output_size() >= 1, where(n), ": no output");
  if (ours) {
    only_first_output(n);
    return map_scenelab(n);
  }
  const std::string& op = n.op_type();
  if (op == "Constant") return map_constant(n);
  if (fold_constant(n) || map_shape_op(n)) return;
  if (op == "Identity") {
    known(n, {});
    return alias(n);
  }
  if (op == "Dropout") {
    known(n, {"ratio", "seed", "is_test"});
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const Const& tm = need_const(n, 2, "training_mode");
      if (!tm.i.empty() && tm.i[0]) unsupported(n, "training mode");
    }
    return alias(n);
  }
  only_first_output(n);
  if (op == "Conv") return map_conv(n);
  if (op == "Pad") return map_pad(n);
  if (op == "ConvTranspose") return map_conv_transpose(n);
  if (op == "BatchNormalization") {
    if (!folded_.count(&n)) map_batchnorm(n);  // straight after a convolution: folded into it
    return;
  }
  if (op == "Relu") {
    known(n, {});
    add(n.output(0), "relu", {data(n, 0)});
    return;
  }
  if (op == "MaxPool") return map_maxpool(n);
  if (op == "Concat") {
    known(n, {"axis"});
    channel_axis(n, attr_int(n, "axis", 1));
    std::vector<std::string> ins;
    for (int k = 0; k < n.input_size(); ++k) ins.push_back(data(n, k));
    return void(add(n.output(0), "concat", ins));
  }
  if (op == "Softmax") {
    known(n, {"axis"});
    if (opset < 13) unsupported(n, "opset " + std::to_string(opset) + "'s softmax over the flattened C x H x W");
    channel_axis(n, attr_int(n, "axis", -1));
    return void(add(n.output(0), "softmax", {data(n, 0)}));
  }
  if (op == "ArgMax") {
    known(n, {"axis", "keepdims", "select_last_index"});
    channel_axis(n, attr_int(n, "axis", 0));
    if (attr_int(n, "keepdims", 1) != 1) unsupported(n, "keepdims 0");
    if (attr_int(n, "select_last_index", 0) != 0) unsupported(n, "select_last_index 1");
    return void(add(n.output(0), "argmax", {data(n, 0)}));
  }
  if (op == "Resize" || op == "Upsample") return map_resize(n);
  if (op == "Sigmoid" || op == "Tanh" || op == "LeakyRelu" || op == "Clip" || op == "HardSigmoid" ||
      op == "HardSwish")
    return map_activation(n);
  if (op == "PRelu" || op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return map_arithmetic(n);
  if (op == "AveragePool") {  // windows that tile the map: downscale; others: pool
    known(n, {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"});
    const auto ks = attr_ints(n, "kernel_shape");
    auto st = attr_ints(n, "strides");
    if (st.empty()) st = {1, 1};
    auto pads = attr_ints(n, "pads");
    if (pads.empty()) pads.assign(4, 0);
    if (rank != 4 || ks.size() != 2 || st.size() != 2 || pads.size() != 4) unsupported(n, "a pool that is not 2-D");
    for (int64_t d : attr_ints(n, "dilations"))
      if (d != 1) unsupported(n, "dilation");
    const std::string ap = attr_str(n, "auto_pad", "NOTSET");
    if (ap != "NOTSET" && ap != "VALID") unsupported(n, "auto_pad " + ap);
    if (ap == "VALID") pads.assign(4, 0);
    if (attr_int(n, "ceil_mode", 0) != 0) unsupported(n, "ceil_mode 1");
    const std::string x = data(n, 0);  // (refused by name where the node has no input)
    int64_t count_pad = attr_int(n, "count_include_pad", 0);
    if (folded_pads.count(n.input(0))) {  // zeros padded before: counted, as this pool's own cannot be
      if (!count_pad && std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }))
        unsupported(n, "pads not counted after a Pad");
      count_pad = 1;
    }
    add_folded_pads(n, pads);
    for (int k = 0; k < 4; ++k)
      if (pads[size_t(k)] < 0 || pads[size_t(k)] >= ks[size_t(k % 2)]) unsupported(n, "pads of a window or more");
    const bool none = std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
    if (none && ks[0] == ks[1] && st == ks) {
      add(n.output(0), "downscale", {x}, {{"factor", std::to_string(ks[0])}});
      return;
    }
    add(n.output(0), "pool", {x},
        {{"mode", "avg"},
         {"kernel", str_cat(ks[0], ",", ks[1])},
         {"stride", str_cat(st[0], ",", st[1])},
         {"pads", str_cat(pads[0], ",", pads[1], ",", pads[2], ",", pads[3])},
         {"count_pad", count_pad ? "1" : "0"}});
    return;
  }
  if (op == "GlobalAveragePool") {
    known(n, {});
    if (rank != 4) unsupported(n, str_cat("input of rank ", rank));
    add(n.output(0), "global_avgpool", {data(n, 0)});
    return;
  }
  if (op == "ReduceMean") {  // over height and width, kept: global average pooling (torch.export's mean)
    known(n, {"axes", "keepdims", "noop_with_empty_axes"});
    if (rank != 4) unsupported(n, str_cat("input of rank ", rank));
    std::vector<int64_t> axes = opset >= 18 ? (n.input_size() > 1 && !n.input(1).empty() ? const_ints(n, 1, "axes")
                                                                                         : std::vector<int64_t>{})
                                            : attr_ints(n, "axes");
    for (auto& a : axes) a = a < 0 ? a + 4 : a;
    std::sort(axes.begin(), axes.end());
    if (axes != std::vector<int64_t>{2, 3}) unsupported(n, "a mean over other axes than height and width");
    if (attr_int(n, "keepdims", 1) != 1) unsupported(n, "keepdims 0");
    add(n.output(0), "global_avgpool", {data(n, 0)});
    return;
  }
  unsupported(n, "operator " + op);
}

std::string Importer::num(double v) {
  std::ostringstream ss;
  ss.precision(9);
  ss << v;
  return ss.str();
}

void Importer::map_activation(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  std::vector<std::pair<std::string, std::string>> a;
  if (op == "Sigmoid" || op == "Tanh" || op == "HardSwish") {
    known(n, {});
    a = {{"fn", op == "Sigmoid" ? "sigmoid" : op == "Tanh" ? "tanh" : "hard_swish"}};
  } else if (op == "LeakyRelu") {
    known(n, {"alpha"});
    a = {{"fn", "leaky_relu"}, {"alpha", num(attr_float(n, "alpha", 0.01f))}};
  } else if (op == "HardSigmoid") {
    known(n, {"alpha", "beta"});
    a = {{"fn", "hard_sigmoid"}, {"alpha", num(attr_float(n, "alpha", 0.2f))},
         {"beta", num(attr_float(n, "beta", 0.5f))}};
  } else {  // Clip: bounds as attributes (opset < 11) or optional constant inputs
    known(n, {"min", "max"});
    a = {{"fn", "clip"}};
    auto bound = [&](int input, const char* name) {
      if (opset < 11) {
        if (attr(n, name)) a.push_back({name, num(attr_float(n, name, 0.f))});
        return;
      }
      if (input >= n.input_size() || n.input(input).empty()) return;
      const Const& c = need_const(n, input, name);
      if (c.is_int || c.f.size() != 1) unsupported(n, str_cat("a ", name, " that is not one float"));
      a.push_back({name, num(c.f[0])});
    };
    bound(1, "min");
    bound(2, "max");
  }
  add(n.output(0), "activation", {data(n, 0)}, a);
}

int Importer::channels_of(const std::string& node) const {
  if (node == "image") return g.input_channels;
  return node_channels(g, node);
}

std::vector<float> Importer::per_channel(const Const& c, int channels) const {
  if (c.is_int) return {};
  if (c.f.size() == 1) return std::vector<float>(size_t(channels), c.f[0]);
  if (c.f.size() != size_t(channels)) return {};
  std::vector<int64_t> d = c.dims;  // aligned to the data's rank from the right
  while (d.size() < size_t(rank)) d.insert(d.begin(), 1);
  if (d.size() != size_t(rank)) return {};
  const int axis = rank - 3;  // the channels' axis at this rank (padded to 4 from the front)
  for (int k = 0; k < rank; ++k)
    if (k != axis && d[size_t(k)] != 1) return {};
  return axis >= 0 ? c.f : std::vector<float>{};
}

void Importer::map_arithmetic(const onnx::NodeProto& n) {
  known(n, {});
  const std::string& op = n.op_type();
  SL_REQUIRE(n.input_size() == 2, where(n), ": ", n.input_size(), " inputs (two expected)");
  const Const *c0 = constant(n.input(0)), *c1 = constant(n.input(1));
  if (!c0 && !c1) {  // two computed values
    if (op == "PRelu" || op == "Div") unsupported(n, "a computed second operand");
    add(n.output(0), "binary", {data(n, 0), data(n, 1)},
        {{"op", op == "Add" ? "add" : op == "Sub" ? "sub" : "mul"}});
    return;
  }
  if (c0 && c1) unsupported(n, "two constant operands (no constant folding)");
  const bool data_first = c1 != nullptr;
  const std::string in = data(n, data_first ? 0 : 1);
  const int channels = channels_of(in);
  std::vector<float> v = per_channel(data_first ? *c1 : *c0, channels);
  if (v.empty()) unsupported(n, str_cat("a constant operand that is not one value or one a channel (", channels,
                                        ")"));
  if (op == "PRelu") {
    if (!data_first) unsupported(n, "the slope first");
    add_channel_op(n.output(0), in, "prelu", v);
  } else if (op == "Add") {
    add_channel_op(n.output(0), in, "add", v);
  } else if (op == "Mul") {
    add_channel_op(n.output(0), in, "mul", v);
  } else if (op == "Sub") {
    if (data_first) {
      for (float& x : v) x = -x;
      add_channel_op(n.output(0), in, "add", v);
    } else {  // c - x = (-1) x + c
      const std::string neg = add_channel_op(n.output(0) + "_negated", in, "mul",
                                             std::vector<float>(size_t(channels), -1.f));
      add_channel_op(n.output(0), neg, "add", v);
    }
  } else {  // Div
    if (!data_first) unsupported(n, "a constant divided by a computed value");
    for (float x : v)
      if (x == 0.f) unsupported(n, "division by zero");
    for (float& x : v) x = 1.f / x;
    add_channel_op(n.output(0), in, "mul", v);
  }
}

void Importer::map_constant(const onnx::NodeProto& n) {
  SL_REQUIRE(n.attribute_size() == 1, where(n), ": expected one value attribute");
  const auto& a = n.attribute(0);
  Const c;
  if (a.name() == "value") {
    c = read_const(a.t(), where(n), limits.max_param_bytes);
  } else if (a.name() == "value_float") {
    c.f = {a.f()};
  } else if (a.name() == "value_floats") {
    c.f.assign(a.floats().begin(), a.floats().end());
    c.dims = {int64_t(c.f.size())};
  } else if (a.name() == "value_int") {
    c.is_int = true;
    c.i = {a.i()};
  } else if (a.name() == "value_ints") {
    c.is_int = true;
    c.i.assign(a.ints().begin(), a.ints().end());
    c.dims = {int64_t(c.i.size())};
  } else {
    unsupported(n, "attribute '" + a.name() + "'");
  }
  consts[n.output(0)] = std::move(c);
}

const onnx::NodeProto* Importer::bn_after(const onnx::NodeProto& conv) const {
  const std::string& v = conv.output(0);
  auto u = uses.find(v);
  if (u == uses.end() || u->second != 1) return nullptr;
  for (const auto& m : proto.graph().node())
    if (m.op_type() == "BatchNormalization" && m.input_size() >= 5 && m.output_size() >= 1 && m.input(0) == v)
      return &m;
  return nullptr;
}

std::pair<std::vector<double>, std::vector<double>> Importer::bn_affine(const onnx::NodeProto& bn,
                                                                         int64_t channels) const {
  for (const auto& a : bn.attribute())  // y = gamma (x - mean) / sqrt(var + eps) + beta
    if (a.name() != "epsilon" && a.name() != "momentum" && a.name() != "spatial" && a.name() != "training_mode")
      unsupported(bn, "attribute '" + a.name() + "'");
  if (attr_int(bn, "training_mode", 0) != 0) unsupported(bn, "training mode");
  if (attr_int(bn, "spatial", 1) != 1) unsupported(bn, "spatial 0");
  for (int k = 1; k < bn.output_size(); ++k)
    if (!bn.output(k).empty() && uses.count(bn.output(k)) && uses.at(bn.output(k)))
      unsupported(bn, "its running statistics as outputs");
  const double eps = attr_float(bn, "epsilon", 1e-5f);
  const Const *gamma = &need_const(bn, 1, "scale"), *beta = &need_const(bn, 2, "bias"),
              *mean = &need_const(bn, 3, "mean"), *var = &need_const(bn, 4, "variance");
  for (const Const* c : {gamma, beta, mean, var})
    SL_REQUIRE(!c->is_int && c->f.size() == size_t(channels), where(bn), ": ", c->f.size(), " values for ",
               channels, " channels");
  std::vector<double> scale(static_cast<size_t>(channels)), shift(static_cast<size_t>(channels));
  for (size_t o = 0; o < size_t(channels); ++o) {
    SL_REQUIRE(var->f[o] + eps > 0, where(bn), ": variance + epsilon of channel ", o, " is not positive");
    scale[o] = double(gamma->f[o]) / std::sqrt(double(var->f[o]) + eps);
    shift[o] = double(beta->f[o]) - double(mean->f[o]) * scale[o];
  }
  return {scale, shift};
}

void Importer::map_batchnorm(const onnx::NodeProto& n) {
  if (n.output_size() < 1 || n.output(0).empty()) unsupported(n, "no output");
  if (rank != 4) unsupported(n, str_cat("input of rank ", rank));
  const std::string in = data(n, 0);
  const auto [scale, shift] = bn_affine(n, channels_of(in));
  add_channel_op(n.output(0), in, "affine", {scale.begin(), scale.end()}, {shift.begin(), shift.end()});
}

void Importer::map_conv(const onnx::NodeProto& n) {
  known(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  if (rank != 4) unsupported(n, str_cat("input of rank ", rank));
  const Const& w = need_const(n, 1, "weight");
  if (w.dims.size() != 4) unsupported(n, "a " + std::to_string(w.dims.size() - 2) + "-D convolution");
  const int64_t out = w.dims[0], kh = w.dims[2], kw = w.dims[3], group = attr_int(n, "group", 1);
  const auto ks = attr_ints(n, "kernel_shape");
  if (!ks.empty() && (ks.size() != 2 || ks[0] != kh || ks[1] != kw)) unsupported(n, "kernel_shape unlike the weight's");
  if (group < 1 || out % group != 0) unsupported(n, str_cat("group ", group, " for ", out, " outputs"));
  auto pair = [&](const char* name) {
    auto v = attr_ints(n, name);
    if (v.empty()) v = {1, 1};
    if (v.size() != 2 || v[0] < 1 || v[1] < 1) unsupported(n, str_cat(name, " other than two positive values"));
    return v;
  };
  const auto st = pair("strides"), dl = pair("dilations");
  std::vector<int64_t> pads = attr_ints(n, "pads");  // top, left, bottom, right
  const std::string auto_pad = attr_str(n, "auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    pads.assign(4, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (st[0] != 1 || st[1] != 1) unsupported(n, "auto_pad " + auto_pad + " with a stride (its pads follow the size)");
    const int64_t th = dl[0] * (kh - 1), tw = dl[1] * (kw - 1);  // stride 1: the total is fixed
    const bool upper = auto_pad == "SAME_UPPER";                 // the odd one at the end
    pads = {upper ? th / 2 : th - th / 2, upper ? tw / 2 : tw - tw / 2, upper ? th - th / 2 : th / 2,
            upper ? tw - tw / 2 : tw / 2};
  } else if (auto_pad != "NOTSET") {
    unsupported(n, "auto_pad " + auto_pad);
  }
  if (pads.empty()) pads.assign(4, 0);
  if (pads.size() != 4) unsupported(n, "pads of " + std::to_string(pads.size()) + " values");
  for (int64_t p : pads)
    if (p < 0) unsupported(n, "negative pads");
  add_folded_pads(n, pads);
  // conv2d (every fast path) where it takes the shape: odd square kernel, stride 1, no dilation,
  // one group, pads 0 or k / 2 on every side; else the general conv layer.
  const int64_t k = kh;
  const bool simple = kh == kw && k % 2 == 1 && st == std::vector<int64_t>{1, 1} &&
                      dl == std::vector<int64_t>{1, 1} && group == 1 &&
                      (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }) ||
                       std::all_of(pads.begin(), pads.end(), [&](int64_t p) { return p == k / 2; }));
  std::vector<std::pair<std::string, std::string>> attrs;
  if (simple) {
    attrs = {{"out", std::to_string(out)}, {"k", std::to_string(k)}, {"pad", pads[0] ? "same" : "valid"}};
  } else {
    attrs = {{"out", std::to_string(out)},
             {"kernel", str_cat(kh, ",", kw)},
             {"stride", str_cat(st[0], ",", st[1])},
             {"dilation", str_cat(dl[0], ",", dl[1])},
             {"pads", str_cat(pads[0], ",", pads[1], ",", pads[2], ",", pads[3])},
             {"groups", std::to_string(group)}};
  }
  std::vector<float> weight = w.f, bias = conv_bias(n, out);
  bool has_bias = !bias.empty();
  if (!has_bias) bias.assign(size_t(out), 0.f);  // a batch normalisation may give it one
  std::string value = n.output(0);
  if (const onnx::NodeProto* bn = bn_after(n)) {
    const auto [scale, shift] = bn_affine(*bn, out);
    const size_t per = weight.size() / size_t(out);
    for (size_t o = 0; o < size_t(out); ++o) {
      for (size_t i = 0; i < per; ++i) weight[o * per + i] = float(double(weight[o * per + i]) * scale[o]);
      bias[o] = float(double(bias[o]) * scale[o] + shift[o]);
    }
    has_bias = true;
    value = bn->output(0);
    folded_.insert(bn);
  }
  attrs.push_back({"bias", has_bias ? "1" : "0"});
  const std::string name = add(value, simple ? "conv2d" : "conv", {data(n, 0)}, attrs);
  node_of[n.output(0)] = name;
  Const wc;
  wc.dims = w.dims;
  wc.f = std::move(weight);
  add_weights(n, name, wc, has_bias ? bias : std::vector<float>{});
}

std::vector<float> Importer::conv_bias(const onnx::NodeProto& n, int64_t out) const {
  if (n.input_size() <= 2 || n.input(2).empty()) return {};
  const Const& b = need_const(n, 2, "bias");
  SL_REQUIRE(!b.is_int && b.f.size() == size_t(out), where(n), ": bias of ", b.f.size(), " values for ", out,
             " outputs");
  return b.f;
}

void Importer::add_weights(const onnx::NodeProto& n, const std::string& name, const Const& weight,
                           const std::vector<float>& bias) {
  g.nodes.back().attrs.set("params", name);
  add_param(name + "/weight", to_tensor(weight, where(n)));
  if (bias.empty()) return;
  Const bc;
  bc.dims = {int64_t(bias.size())};
  bc.f = bias;
  add_param(name + "/bias", to_tensor(bc, where(n)));
}

void Importer::map_conv_transpose(const onnx::NodeProto& n) {
  known(n, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"});
  if (rank != 4) unsupported(n, str_cat("input of rank ", rank));
  const Const& w = need_const(n, 1, "weight");
  if (w.dims.size() != 4) unsupported(n, "a " + std::to_string(w.dims.size() - 2) + "-D transposed convolution");
  const int64_t group = attr_int(n, "group", 1), kh = w.dims[2], kw = w.dims[3], out = w.dims[1] * group;
  const auto ks = attr_ints(n, "kernel_shape");
  if (!ks.empty() && (ks.size() != 2 || ks[0] != kh || ks[1] != kw)) unsupported(n, "kernel_shape unlike the weight's");
  if (!attr_ints(n, "output_shape").empty()) unsupported(n, "output_shape (pads and output_padding are)");
  const std::string ap = attr_str(n, "auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID") unsupported(n, "auto_pad " + ap);
  auto pair = [&](const char* name, int64_t def) {
    auto v = attr_ints(n, name);
    if (v.empty()) v = {def, def};
    if (v.size() != 2) unsupported(n, str_cat(name, " of ", v.size(), " values"));
    return v;
  };
  const auto st = pair("strides", 1), dl = pair("dilations", 1), op = pair("output_padding", 0);
  auto pads = attr_ints(n, "pads");
  if (pads.empty() || ap == "VALID") pads.assign(4, 0);
  if (pads.size() != 4) unsupported(n, "pads of " + std::to_string(pads.size()) + " values");
  std::vector<std::pair<std::string, std::string>> attrs = {
      {"out", std::to_string(out)},
      {"kernel", str_cat(kh, ",", kw)},
      {"stride", str_cat(st[0], ",", st[1])},
      {"dilation", str_cat(dl[0], ",", dl[1])},
      {"pads", str_cat(pads[0], ",", pads[1], ",", pads[2], ",", pads[3])},
      {"output_pad", str_cat(op[0], ",", op[1])},
      {"groups", std::to_string(group)}};
  const std::vector<float> bias = conv_bias(n, out);
  attrs.push_back({"bias", bias.empty() ? "0" : "1"});
  add_weights(n, add(n.output(0), "conv_transpose", {data(n, 0)}, attrs), w, bias);
}

void Importer::map_maxpool(const onnx::NodeProto& n) {
  known(n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
  if (n.output_size() > 1 && !n.output(1).empty()) unsupported(n, "the indices output");
  const auto ks = attr_ints(n, "kernel_shape");
  if (ks.size() != 2 || rank != 4) unsupported(n, "a " + std::to_string(ks.size()) + "-D pool");
  auto st = attr_ints(n, "strides");
  if (st.empty()) st = {1, 1};
  auto pads = attr_ints(n, "pads");
  if (pads.empty()) pads.assign(4, 0);
  if (st.size() != 2 || pads.size() != 4) unsupported(n, "strides or pads that are not 2-D");
  for (int64_t d : attr_ints(n, "dilations"))
    if (d != 1) unsupported(n, "dilation");
  const std::string ap = attr_str(n, "auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID") unsupported(n, "auto_pad " + ap);
  if (ap == "VALID") pads.assign(4, 0);
  if (attr_int(n, "ceil_mode", 0) != 0) unsupported(n, "ceil_mode 1");
  if (attr_int(n, "storage_order", 0) != 0) unsupported(n, "storage_order 1");
  for (int k = 0; k < 4; ++k)
    if (pads[size_t(k)] < 0 || pads[size_t(k)] >= ks[size_t(k % 2)]) unsupported(n, "pads of a window or more");
  const bool none = std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
  if (none && ks[0] == ks[1] && st[0] == st[1]) {  // maxpool2d: NHWC half-precision kernels, fused
    add(n.output(0), "maxpool2d", {data(n, 0)}, {{"k", std::to_string(ks[0])}, {"stride", std::to_string(st[0])}});
    return;
  }
  add(n.output(0), "pool", {data(n, 0)},
      {{"mode", "max"},
       {"kernel", str_cat(ks[0], ",", ks[1])},
       {"stride", str_cat(st[0], ",", st[1])},
       {"pads", str_cat(pads[0], ",", pads[1], ",", pads[2], ",", pads[3])}});
}

void Importer::resize_checks(const onnx::NodeProto& n, const std::string& mode) const {
  if (!attr_ints(n, "axes").empty()) unsupported(n, "axes");
  if (attr_int(n, "antialias", 0) != 0) unsupported(n, "antialias");
  if (attr_int(n, "exclude_outside", 0) != 0) unsupported(n, "exclude_outside");
  const std::string ct = attr_str(n, "coordinate_transformation_mode", opset >= 11 ? "half_pixel" : "asymmetric");
  if (mode == "linear") {
    if (ct != "half_pixel" && ct != "pytorch_half_pixel")
      unsupported(n, "linear with coordinate_transformation_mode " + ct);
  } else if (mode == "nearest") {
    const std::string nm = attr_str(n, "nearest_mode", "round_prefer_floor");
    if (ct != "asymmetric" || (opset >= 11 && nm != "floor"))
      unsupported(n, "nearest with " + ct + " coordinates and nearest_mode " + nm +
                         " (asymmetric with floor is supported)");
  } else {
    unsupported(n, "mode " + mode);
  }
}

void Importer::map_resize(const onnx::NodeProto& n) {
  if (rank != 4) unsupported(n, str_cat("input of rank ", rank));
  std::string mode = attr_str(n, "mode", "nearest");
  std::vector<float> scales;
  if (n.op_type() == "Upsample") {
    known(n, {"mode", "scales"});
    if (opset < 9) {
      const auto* a = attr(n, "scales");
      if (!a) unsupported(n, "no scales");
      scales.assign(a->floats().begin(), a->floats().end());
    } else {
      scales = need_const(n, 1, "scales").f;
    }
    if (mode != "nearest") unsupported(n, "Upsample's " + mode + " mode (its coordinates are asymmetric)");
  } else {
    known(n, {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
              "extrapolation_value", "antialias", "axes", "keep_aspect_ratio_policy"});
    const int scales_input = opset >= 11 ? 2 : 1;
    if (opset >= 11 && n.input_size() > 3 && !n.input(3).empty()) {
      // Sizes: another map's height and width (F.interpolate(x, size=y.shape[2:])), or
      // arithmetic on them (torch.export's (h - 1) // 8 + 1: the upsample's size=), or, in a
      // model of a fixed input size, that size: resampled onto that map.
      std::vector<SymDim> sz;
      if (!shape_of(n.input(3), sz) || sz.size() != 4) unsupported(n, "output sizes not computed from a shape");
      std::string ref;
      std::vector<std::pair<std::string, std::string>> at{{"mode", mode == "linear" ? "bilinear" : "nearest"},
                                                          {"align", "size"}};
      if (!sz[2].node.empty() && sz[2].node == sz[3].node && sz[2].axis == 2 && sz[3].axis == 3) {
        ref = sz[2].node;
        if (!sz[2].plain() || !sz[3].plain())
          at.emplace_back("size", str_cat(sz[2].add, ",", sz[2].div, ",", sz[2].mul, ",", sz[2].value, ",", sz[3].add, ",",
                                 sz[3].div, ",", sz[3].mul, ",", sz[3].value));
      } else if (sz[2].axis < 0 && sz[3].axis < 0 && sz[2].value == input_h && sz[3].value == input_w) {
        ref = "image";
      } else {
        unsupported(n, "output sizes other than another map's height and width, or arithmetic on them");
      }
      resize_checks(n, mode);
      add(n.output(0), "upsample", {data(n, 0), ref}, at);
      return;
    }
    scales = need_const(n, scales_input, "scales").f;
    resize_checks(n, mode);
  }
  if (scales.size() != 4 || scales[0] != 1.f || scales[1] != 1.f || scales[2] != scales[3])
    unsupported(n, "scales other than [1, 1, s, s]");
  const float s = scales[2];
  if (!(s >= 1.f && s <= 64.f && s == std::floor(s))) unsupported(n, "scale " + std::to_string(s) + " (whole 1-64)");
  std::ostringstream ss;
  ss << s;
  add(n.output(0), "upsample", {data(n, 0)},
      {{"mode", mode == "linear" ? "bilinear" : "nearest"}, {"align", "size"}, {"scale", ss.str()}});
}

std::string Importer::add_channel_op(const std::string& value, const std::string& in, const std::string& op,
                                     std::vector<float> v, std::vector<float> shift) {
  const std::string name = add(value, "channel_op", {in}, {{"op", op}});
  g.nodes.back().attrs.set("params", name);
  auto param = [&](const char* key, std::vector<float> f) {
    Const c;
    c.dims = {int64_t(f.size())};
    c.f = std::move(f);
    add_param(name + "/" + key, to_tensor(c, path));
  };
  param("value", std::move(v));
  if (op == "affine") param("shift", std::move(shift));
  return name;
}

}  // namespace scenelab::onnx_import
#endif
