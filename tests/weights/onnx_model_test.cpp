// The ONNX importer (weights/onnx_model.h): models built here with ONNX's protobuf classes, run by
// the engine on the CPU and checked against the float64 references (a convolution with its batch
// normalisation folded in at load, ReLU, max-pool, a 1x1 convolution without bias, a bilinear x2
// resize, softmax over the channels; batch 2, odd sizes); the labelling model's extra nodes,
// metadata and preprocessing; and bad files refused by name (truncated, wrong opset, unsupported
// operators and attributes, huge or inconsistent initialisers, non-finite weights).
#include <gtest/gtest.h>

#ifdef SCENELAB_WITH_ONNX
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/backend.h"
#include "engine/graph.h"
#include "tests/reference.h"
#include "weights/model_file.h"
#include "weights/onnx_model.h"

using namespace scenelab;
using namespace scenelab::test;

namespace {

struct Builder {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  std::mt19937 rng{5};

  explicit Builder(int opset = 13, int channels = 3) {
    m.set_ir_version(7);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    g = m.mutable_graph();
    g->set_name("test_net");
    auto* in = g->add_input();
    in->set_name("input");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = tt->mutable_shape();
    shape->add_dim()->set_dim_param("n");
    shape->add_dim()->set_dim_value(channels);
    shape->add_dim()->set_dim_param("h");
    shape->add_dim()->set_dim_param("w");
  }
  // A float32 initialiser of random values (uniform in [lo, hi]); returns them.
  std::vector<float> init(const std::string& name, const std::vector<int64_t>& dims, float lo = -0.5f,
                          float hi = 0.5f) {
    std::uniform_real_distribution<float> u(lo, hi);
    size_t n = 1;
    for (int64_t d : dims) n *= size_t(d);
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return v;
  }
  // An int64 initialiser (dims {} : a scalar).
  void int64s(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& ins, const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out + "_node");
    for (const auto& i : ins) n->add_input(i);
    n->add_output(out);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void integer(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void text(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  void output(const std::string& name) { g->add_output()->set_name(name); }
  void meta(const std::string& k, const std::string& v) {
    auto* p = m.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
  std::string save(const std::string& name) const {
    const std::string path = (std::filesystem::temp_directory_path() / name).string();
    std::ofstream f(path, std::ios::binary);
    m.SerializeToOstream(&f);
    return path;
  }
};

Ref to_ref4(const std::vector<float>& v, Shape s) {
  Ref r(s);
  for (size_t i = 0; i < v.size(); ++i) r.v[i] = v[i];
  return r;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(OnnxModel, NetMatchesTheFloat64Reference) {
  Builder b;
  const auto w1 = b.init("w1", {4, 3, 3, 3}), b1 = b.init("b1", {4});
  const auto gamma = b.init("gamma", {4}, 0.5f, 1.5f), beta = b.init("beta", {4});
  const auto mean = b.init("mean", {4}), var = b.init("var", {4}, 0.5f, 2.f);
  const auto w2 = b.init("w2", {5, 4, 1, 1});
  auto* conv = b.node("Conv", {"input", "w1", "b1"}, "c1");
  Builder::ints(conv, "pads", {1, 1, 1, 1});
  Builder::ints(conv, "kernel_shape", {3, 3});
  auto* bn = b.node("BatchNormalization", {"c1", "gamma", "beta", "mean", "var"}, "bn");
  auto* eps = bn->add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(1e-3f);
  b.node("Relu", {"bn"}, "r1");
  auto* pool = b.node("MaxPool", {"r1"}, "p1");
  Builder::ints(pool, "kernel_shape", {2, 2});
  Builder::ints(pool, "strides", {2, 2});
  b.node("Conv", {"p1", "w2"}, "c2");
  auto* sc = b.g->add_initializer();
  sc->set_name("scales");
  sc->set_data_type(onnx::TensorProto::FLOAT);
  sc->add_dims(4);
  for (float s : {1.f, 1.f, 2.f, 2.f}) sc->add_float_data(s);
  auto* rs = b.node("Resize", {"c2", "", "scales"}, "up");
  Builder::text(rs, "mode", "linear");
  Builder::text(rs, "coordinate_transformation_mode", "pytorch_half_pixel");
  auto* sm = b.node("Softmax", {"up"}, "prob");
  Builder::integer(sm, "axis", 1);
  b.node("Identity", {"prob"}, "out");
  b.output("out");
  const std::string path = b.save("scenelab_onnx_net.onnx");

  const OnnxImport im = import_onnx(path);
  ASSERT_EQ(im.outputs.size(), 1u);
  EXPECT_EQ(im.onnx_outputs[0], "out");
  const Shape in_shape(2, 3, 13, 17);
  const Tensor x = random_tensor(in_shape, 3, 0.f, 1.f);
  Graph g(im.model);
  CpuBackend cpu(2);
  PlanIO io;
  io.f32_outputs = im.outputs;
  g.plan(2, 13, 17, cpu, io);
  Tensor out(g.fetch(im.outputs[0]).shape(), std::nanf(""));  // poisoned until the run
  g.run(x.view());
  out = g.fetch(im.outputs[0]);

  // The reference, batch normalisation unfolded.
  Ref r = ref_conv2d(to_ref(x.view()), to_ref4(w1, Shape(4, 3, 3, 3)), nullptr, 1, false);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 4; ++c)
      for (int y = 0; y < r.shape.h; ++y)
        for (int xx = 0; xx < r.shape.w; ++xx) {
          const double v = r.at(n, c, y, xx) + b1[size_t(c)];
          r.at(n, c, y, xx) = (v - mean[size_t(c)]) / std::sqrt(double(var[size_t(c)]) + 1e-3) * gamma[size_t(c)] +
                              beta[size_t(c)];
        }
  r = ref_maxpool(ref_relu(r), 2, 2);
  r = ref_conv2d(r, to_ref4(w2, Shape(5, 4, 1, 1)), nullptr, 0, false);
  std::vector<double> sy, sx;
  for (int i = 0; i < r.shape.h * 2; ++i) sy.push_back(std::max(0.0, (i + 0.5) / 2 - 0.5));
  for (int i = 0; i < r.shape.w * 2; ++i) sx.push_back(std::max(0.0, (i + 0.5) / 2 - 0.5));
  r = ref_softmax(ref_resample(r, r.shape.h * 2, r.shape.w * 2, sy, sx, true));
  ASSERT_EQ(out.shape(), r.shape);
  EXPECT_LT(rel_error(out.view(), r), 1e-5);
}

TEST(OnnxModel, LabellingModelTakesMetadataAndRunsThroughReadModel) {
  Builder b;
  b.init("w", {3, 3, 1, 1});
  b.node("Conv", {"input", "w"}, "logits");
  b.output("logits");
  b.meta("class_names", "road, sky,car");
  b.meta("palette", "1,2,3;4,5,6;7,8,9");
  b.meta("input_mean", "0.5,0.4,0.3");
  b.meta("input_std", "0.2,0.25,0.5");
  const std::string path = b.save("scenelab_onnx_label.onnx");
  const Model m = read_model(path);
  EXPECT_EQ(m.class_names, (std::vector<std::string>{"road", "sky", "car"}));
  ASSERT_EQ(m.palette.size(), 3u);
  EXPECT_EQ(m.palette[1][2], 6);
  ASSERT_TRUE(m.graph.find("scores") && m.graph.find("full") && m.graph.find("labels_full"));
  EXPECT_EQ(m.graph.nodes.front().type, "standardize");
  EXPECT_EQ(m.graph.find("scores")->inputs[0], m.graph.nodes.front().name);
  Graph g(m);
  CpuBackend cpu(1);
  PlanIO io;
  io.f32_outputs = {"scores", "labels_full"};
  g.plan(1, 5, 6, cpu, io);
  const Tensor x = random_tensor(Shape(1, 3, 5, 6), 9, 0.f, 1.f);
  g.run(x.view());
  EXPECT_EQ(g.fetch("labels_full").shape(), Shape(1, 1, 5, 6));

  // Without metadata: class0.., a palette of as many colours.
  Builder plain;
  plain.init("w", {4, 3, 1, 1});
  plain.node("Conv", {"input", "w"}, "logits");
  plain.output("logits");
  const Model p = read_model(plain.save("scenelab_onnx_plain.onnx"));
  EXPECT_EQ(p.class_names.back(), "class3");
  EXPECT_EQ(p.palette.size(), 4u);
}

// The paper's preprocessing as model-local functions of the domain "scenelab"
// (tools/export_onnx.py; tests/python/test_onnx_export.py runs the shipped models through them):
// mapped by name onto the engine's layers with their attributes, or refused by name.
TEST(OnnxModel, ScenelabFunctionsAreMappedOrRefusedByName) {
  auto net = [](Builder& b, const std::string& second, int64_t size, bool functions) {
    b.m.add_opset_import()->set_domain("scenelab");
    b.node("RgbToYuv", {"input"}, "yuv")->set_domain("scenelab");
    auto* cn = b.node(second, {"yuv"}, "lcn");
    cn->set_domain("scenelab");
    Builder::integer(cn, "size", size);
    b.output("lcn");
    if (!functions) return;
    for (const std::string& f : {std::string("RgbToYuv"), second}) {
      auto* fp = b.m.add_functions();
      fp->set_domain("scenelab");
      fp->set_name(f);
    }
  };
  {
    Builder b;
    net(b, "ContrastNorm", 5, true);
    const Model m = read_model(b.save("scenelab_onnx_functions.onnx"));
    ASSERT_GE(m.graph.nodes.size(), 2u);  // then the labelling's upsample and argmax
    EXPECT_EQ(m.graph.nodes[0].type, "rgb_to_yuv");
    EXPECT_EQ(m.graph.nodes[1].type, "contrast_norm");
    EXPECT_EQ(m.graph.nodes[1].attrs.get_int("size"), 5);
  }
  // refused: the error read_model gives for the net (second function, window, functions defined),
  // with `edit` applied to the model first
  auto refused = [&](const std::string& second, int64_t size, bool functions,
                     const std::function<void(Builder&)>& edit = {}) {
    Builder b;
    net(b, second, size, functions);
    if (edit) edit(b);
    return error_of([&] { read_model(b.save("scenelab_onnx_functions_refused.onnx")); });
  };
  std::string e = refused("ContrastNorm", 5, false);
  EXPECT_NE(e.find("(RgbToYuv): not supported: no model-local function scenelab.RgbToYuv"), std::string::npos) << e;
  e = refused("ContrastNorm", 4, true);
  EXPECT_NE(e.find("(ContrastNorm): not supported: size 4 (odd, 1 to 63)"), std::string::npos) << e;
  // a call without an output (found by fuzz_onnx)
  e = refused("ContrastNorm", 5, true, [](Builder& b) { b.g->mutable_node(0)->clear_output(); });
  EXPECT_NE(e.find("(RgbToYuv): no output"), std::string::npos) << e;
  e = refused("Bogus", 5, true);
  EXPECT_NE(e.find("(Bogus): not supported: function scenelab.Bogus"), std::string::npos) << e;
}

// What torch.export writes for F.interpolate(x, size=...) in a net of free input size (the
// dynamo exporter, opset 18): the output size as arithmetic on another map's (Shape with start and
// end, Squeeze, Add, Sub, Mul, Div by constants, Reshape to [-1], Concat), here height
// ((h + 1) / 3) * 2 + 1 and width (w - 1) / 4 + 1 of the input; and its mean over height and
// width (ReduceMean, axes an input). Run at two input sizes against the float64 reference;
// arithmetic the engine cannot follow refused by name, a size that divides a negative number
// refused when planned.
TEST(OnnxModel, SizesComputedFromTheInputsAreFollowed) {
  // op: which step to swap for one the importer refuses ("" none).
  auto net = [](Builder& b, const std::string& bad, std::vector<float>* w1) {
    *w1 = b.init("w1", {4, 3, 1, 1});
    b.node("Conv", {"input", "w1"}, "c1");
    for (auto [name, v] : {std::pair<const char*, int64_t>{"one", 1}, {"two", 2}, {"three", 3}, {"four", 4},
                           {"minus2", -2}, {"zero", 0}, {"forty", 40}})
      b.int64s(name, {}, {v});
    b.int64s("flat", {1}, {-1});
    b.int64s("hw", {2}, {-1, -2});
    b.int64s("chan", {1}, {1});
    auto* sh = b.node("Shape", {"input"}, "sh");
    Builder::integer(sh, "start", 2), Builder::integer(sh, "end", 3);
    auto* sw = b.node("Shape", {"input"}, "sw");
    Builder::integer(sw, "start", 3), Builder::integer(sw, "end", 4);
    b.node("Squeeze", {"sh"}, "h");
    b.node("Squeeze", {"sw"}, "w");
    if (bad == "constant minus a size") b.node("Sub", {"one", "h"}, "h1");
    else if (bad == "between two sizes") b.node("Add", {"h", "w"}, "h1");
    else if (bad == "negative") b.node("Sub", {"h", "forty"}, "h1");
    else b.node("Add", {"one", "h"}, "h1");  // the constant first, as torch.export writes it
    b.node("Div", {"h1", bad == "by zero" ? "zero" : "three"}, "h2");
    b.node("Mul", {"h2", bad == "times -2" ? "minus2" : "two"}, "h3");
    b.node("Add", {"h3", "one"}, "h4");
    b.node("Reshape", {"h4", "flat"}, "hr");
    b.node("Sub", {"w", "one"}, "w1v");
    b.node("Div", {"w1v", "four"}, "w2");
    b.node("Add", {"w2", "one"}, "w3");
    b.node("Reshape", {"w3", "flat"}, "wr");
    auto* nc = b.node("Shape", {"c1"}, "nc");
    Builder::integer(nc, "start", 0), Builder::integer(nc, "end", 2);
    b.node("Concat", {"nc", "hr", "wr"}, "sizes")->add_attribute()->CopyFrom([] {
      onnx::AttributeProto a;
      a.set_name("axis"), a.set_type(onnx::AttributeProto::INT), a.set_i(0);
      return a;
    }());
    auto* rs = b.node("Resize", {"c1", "", "", "sizes"}, "up");
    Builder::text(rs, "mode", "linear");
    Builder::text(rs, "coordinate_transformation_mode", "half_pixel");
    b.node("ReduceMean", {"c1", bad == "mean over channels" ? "chan" : "hw"}, "gap");
    b.output("up");
    b.output("gap");
  };
  std::vector<float> w1;
  Builder b(18);
  net(b, "", &w1);
  const OnnxImport im = import_onnx(b.save("scenelab_onnx_sizes.onnx"));
  ASSERT_EQ(im.outputs.size(), 2u);
  CpuBackend cpu(2);
  for (auto [h, w] : {std::pair<int, int>{13, 17}, {20, 9}}) {
    Graph g(im.model);
    PlanIO io;
    io.f32_outputs = im.outputs;
    g.plan(2, h, w, cpu, io);
    const Tensor x = random_tensor(Shape(2, 3, h, w), 11, 0.f, 1.f);
    Tensor up(g.fetch(im.outputs[0]).shape(), std::nanf("")), gap(g.fetch(im.outputs[1]).shape(), std::nanf(""));
    g.run(x.view());
    up = g.fetch(im.outputs[0]), gap = g.fetch(im.outputs[1]);
    const int oh = (h + 1) / 3 * 2 + 1, ow = (w - 1) / 4 + 1;
    const Ref c1 = ref_conv2d(to_ref(x.view()), to_ref4(w1, Shape(4, 3, 1, 1)), nullptr, 0, false);
    std::vector<double> sy, sx;
    for (int i = 0; i < oh; ++i) sy.push_back(std::max(0.0, (i + 0.5) * h / oh - 0.5));
    for (int i = 0; i < ow; ++i) sx.push_back(std::max(0.0, (i + 0.5) * w / ow - 0.5));
    const Ref r = ref_resample(c1, oh, ow, sy, sx, true);
    ASSERT_EQ(up.shape(), r.shape) << h << "x" << w;
    EXPECT_LT(rel_error(up.view(), r), 1e-5) << h << "x" << w;
    Ref m(Shape(2, 4, 1, 1));
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 4; ++c) {
        for (int y = 0; y < h; ++y)
          for (int xx = 0; xx < w; ++xx) m.at(n, c, 0, 0) += c1.at(n, c, y, xx) / (double(h) * w);
      }
    ASSERT_EQ(gap.shape(), m.shape);
    EXPECT_LT(rel_error(gap.view(), m), 1e-5);
  }
  for (const std::string bad : {"constant minus a size", "between two sizes", "by zero", "times -2",
                                "mean over channels"}) {
    Builder e(18);
    net(e, bad, &w1);
    const std::string err = error_of([&] { import_onnx(e.save("scenelab_onnx_sizes_bad.onnx")); });
    const std::string want = bad == "by zero" ? "a size divided by 0" : bad == "times -2" ? "a size times -2"
                             : bad == "mean over channels" ? "other axes than height and width" : bad;
    EXPECT_NE(err.find(want), std::string::npos) << bad << ": " << err;
    EXPECT_NE(err.find("_node"), std::string::npos) << bad << ": " << err;  // the node named
  }
  Builder neg(18);
  net(neg, "negative", &w1);
  const OnnxImport ni = import_onnx(neg.save("scenelab_onnx_sizes_neg.onnx"));
  Graph gn(ni.model);
  const std::string err = error_of([&] { gn.plan(1, 13, 17, cpu); });
  EXPECT_NE(err.find("divides a negative number"), std::string::npos) << err;
}

// Initialisers whose data lies in a file beside the model (external_data: PyTorch's dynamo
// exporter writes model.onnx.data): read from there at their offset, the same scores as with the
// data inline; a location outside the model's folder, a missing file, a wrong length or a file too
// short refused by name.
TEST(OnnxModel, ExternalDataIsReadBesideTheModel) {
  const auto dir = std::filesystem::temp_directory_path();
  auto net = [&](const std::string& location, const std::string& offset, const std::string& length) {
    Builder b;
    const auto w = b.init("w", {2, 3, 3, 3});
    b.node("Conv", {"input", "w"}, "y");
    b.output("y");
    if (location.empty()) return b.save("scenelab_onnx_inline.onnx");
    std::ofstream(dir / "scenelab_onnx_ext.bin", std::ios::binary)
        .write("sixteen bytes...", 16)
        .write(reinterpret_cast<const char*>(w.data()), std::streamsize(w.size() * sizeof(float)));
    auto* t = b.g->mutable_initializer(0);
    t->clear_float_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair<std::string, std::string>{"location", location}, {"offset", offset}, {"length", length}}) {
      auto* e = t->add_external_data();
      e->set_key(k), e->set_value(v);
    }
    return b.save("scenelab_onnx_ext.onnx");
  };
  auto run = [](const std::string& path) {
    const OnnxImport im = import_onnx(path);
    Graph g(im.model);
    CpuBackend cpu(1);
    PlanIO io;
    io.f32_outputs = im.outputs;
    g.plan(2, 9, 11, cpu, io);
    g.run(random_tensor(Shape(2, 3, 9, 11), 4, 0.f, 1.f).view());
    return g.fetch(im.outputs[0]);
  };
  const Tensor inline_out = run(net("", "", ""));
  const Tensor ext_out = run(net("scenelab_onnx_ext.bin", "16", "216"));
  ASSERT_EQ(ext_out.shape(), inline_out.shape());
  EXPECT_EQ(std::memcmp(ext_out.data(), inline_out.data(), inline_out.numel() * sizeof(float)), 0);
  for (auto [loc, off, len, want] : {std::tuple<const char*, const char*, const char*, const char*>{
                                         "../scenelab_onnx_ext.bin", "16", "216", "outside the model's folder"},
                                     {"/etc/passwd", "0", "216", "outside the model's folder"},
                                     {"scenelab_onnx_missing.bin", "0", "216", "cannot open its external data"},
                                     {"scenelab_onnx_ext.bin", "16", "212", "external data of 212 bytes for 216"},
                                     {"scenelab_onnx_ext.bin", "17", "216", "fewer than offset 17 + 216"},
                                     {"scenelab_onnx_ext.bin", "-1", "216", "offset '-1' is not a size"}}) {
    const std::string e = error_of([&] { import_onnx(net(loc, off, len)); });
    EXPECT_NE(e.find(want), std::string::npos) << loc << ": " << e;
    EXPECT_NE(e.find("initialiser 'w'"), std::string::npos) << e;
  }
}

TEST(OnnxModel, BadFilesAreRefusedByName) {
  auto conv_net = [](Builder& b) {
    b.init("w", {2, 3, 3, 3});
    b.node("Conv", {"input", "w"}, "y");
    b.output("y");
  };
  {  // truncated
    Builder b;
    conv_net(b);
    std::string bytes;
    b.m.SerializeToString(&bytes);
    const std::string path = (std::filesystem::temp_directory_path() / "scenelab_onnx_trunc.onnx").string();
    std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    const std::string e = error_of([&] { read_model(path); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find("not an ONNX model"), std::string::npos) << e;
  }
  {  // not there
    const std::string e = error_of([&] { read_model("/nonexistent/x.onnx"); });
    EXPECT_NE(e.find("/nonexistent/x.onnx: cannot open"), std::string::npos) << e;
  }
  {  // an operator set this reader does not take
    Builder b(30);
    conv_net(b);
    const std::string e = error_of([&] { read_model(b.save("scenelab_onnx_opset.onnx")); });
    EXPECT_NE(e.find("operator set 30"), std::string::npos) << e;
  }
  {  // an unsupported operator, named with its node
    Builder b;
    b.node("LSTM", {"input"}, "h");
    b.output("h");
    const std::string e = error_of([&] { read_model(b.save("scenelab_onnx_lstm.onnx")); });
    EXPECT_NE(e.find("node 'h_node' (LSTM): not supported: operator LSTM"), std::string::npos) << e;
  }
  {  // an unsupported attribute value
    Builder b;
    conv_net(b);
    Builder::ints(b.g->mutable_node(0), "strides", {3, 3});
    Builder::text(b.g->mutable_node(0), "auto_pad", "SAME_UPPER");
    const std::string e = error_of([&] { read_model(b.save("scenelab_onnx_stride.onnx")); });
    EXPECT_NE(e.find("(Conv): not supported: auto_pad SAME_UPPER with a stride"), std::string::npos) << e;
  }
  {  // 10^12 elements claimed, no data
    Builder b;
    auto* t = b.g->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1000000, 1000000, 1, 1}) t->add_dims(d);
    b.node("Conv", {"input", "w"}, "y");
    b.output("y");
    const std::string e = error_of([&] { read_model(b.save("scenelab_onnx_huge.onnx")); });
    EXPECT_NE(e.find("initialiser 'w'"), std::string::npos) << e;
    EXPECT_NE(e.find("more than the limit"), std::string::npos) << e;
  }
  {  // raw data shorter than its dimensions
    Builder b;
    auto* t = b.g->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {2, 3, 3, 3}) t->add_dims(d);
    t->set_raw_data(std::string(16, '\0'));
    b.node("Conv", {"input", "w"}, "y");
    b.output("y");
    const std::string e = error_of([&] { read_model(b.save("scenelab_onnx_short.onnx")); });
    EXPECT_NE(e.find("raw data of 16 bytes for 54 float32 elements"), std::string::npos) << e;
  }
  {  // a NaN weight
    Builder b;
    conv_net(b);
    b.g->mutable_initializer(0)->set_float_data(4, std::nanf(""));
    const std::string e = error_of([&] { read_model(b.save("scenelab_onnx_nan.onnx")); });
    EXPECT_NE(e.find("NaN or infinite"), std::string::npos) << e;
  }
  {  // metadata naming the wrong number of classes
    Builder b;
    conv_net(b);
    b.meta("class_names", "a,b,c");
    const std::string e = error_of([&] { read_model(b.save("scenelab_onnx_classes.onnx")); });
    EXPECT_NE(e.find("names 3 classes, the scores have 2"), std::string::npos) << e;
  }
  {  // a second data input
    Builder b;
    auto* in2 = b.g->add_input();
    in2->set_name("other");
    b.node("Relu", {"input"}, "y");
    b.output("y");
    const std::string e = error_of([&] { read_model(b.save("scenelab_onnx_inputs.onnx")); });
    EXPECT_NE(e.find("one image input"), std::string::npos) << e;
  }
}

#else
TEST(OnnxModel, RefusedWithoutOnnx) { GTEST_SKIP() << "built without libonnx-dev / libprotobuf-dev"; }
#endif
