// Graph description parsing, shape inference and planning for both networks, and whole networks
// against a float64 interpreter built from the shared references (bound: 1e-4 relative on the
// scores; it checks conv+ReLU fusion, buffer reuse and geometry end to end).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "core/error.h"
#include "engine/graph.h"
#include "engine/networks.h"
#include "tests/reference.h"
#include "weights/default_model.h"
#include "tests/test_util.h"

using namespace scenelab;
using namespace scenelab::test;

namespace {

using test::error_of;

// float64 interpreter of a graph, for the whole-network comparison.
std::map<std::string, Ref> interpret(const Model& m, const Tensor& input) {
  std::map<std::string, Ref> v{{m.graph.input_name, to_ref(input.view())}};
  std::map<std::string, Geometry> geo{{m.graph.input_name, Geometry{}}};
  auto param = [&](const std::string& group, const std::string& name) {
    return to_ref(m.params.at(group + "/" + name).view());
  };
  for (const auto& n : m.graph.nodes) {
    const Ref& x = v.at(n.inputs[0]);
    Geometry g = geo.at(n.inputs[0]);
    std::string group = n.attrs.get_str("params", n.name);
    Ref y;
    if (n.type == "conv2d") {
      int k = n.attrs.get_int("k", 1);
      int pad = n.attrs.get_str("pad", "valid") == "same" ? k / 2 : 0;
      Ref b = param(group, "bias");
      y = ref_conv2d(x, param(group, "weight"), &b, pad, false);
      g.offset_y += g.stride_y * (k / 2 - pad);
      g.offset_x += g.stride_x * (k / 2 - pad);
    } else if (n.type == "relu") {
      y = ref_relu(x);
    } else if (n.type == "maxpool2d") {
      y = ref_maxpool(x, 2, 2);
      g = Geometry{g.stride_y * 2, g.stride_x * 2, g.offset_y + g.stride_y * 0.5,
                   g.offset_x + g.stride_x * 0.5};
    } else if (n.type == "downscale") {
      int f = n.attrs.get_int("factor");
      y = ref_avgpool(x, f);
      g = Geometry{g.stride_y * f, g.stride_x * f, g.offset_y + g.stride_y * (f - 1) / 2.0,
                   g.offset_x + g.stride_x * (f - 1) / 2.0};
    } else if (n.type == "upsample") {
      const Ref& r = v.at(n.inputs[1]);
      const Geometry& go = geo.at(n.inputs[1]);
      std::vector<double> sy, sx;
      bool geom = n.attrs.get_str("align", "size") == "geometry";
      for (int i = 0; i < r.shape.h; ++i)
        sy.push_back(geom ? (go.offset_y + go.stride_y * i - g.offset_y) / g.stride_y
                          : (i + 0.5) * x.shape.h / r.shape.h - 0.5);
      for (int j = 0; j < r.shape.w; ++j)
        sx.push_back(geom ? (go.offset_x + go.stride_x * j - g.offset_x) / g.stride_x
                          : (j + 0.5) * x.shape.w / r.shape.w - 0.5);
      y = ref_resample(x, r.shape.h, r.shape.w, sy, sx, true);
      g = go;
    } else if (n.type == "concat") {
      std::vector<Ref> xs;
      for (const auto& i : n.inputs) xs.push_back(v.at(i));
      y = ref_concat(xs);
    } else if (n.type == "rgb_to_yuv") {
      y = ref_rgb_to_yuv(x);
    } else if (n.type == "contrast_norm") {
      y = ref_contrast_norm(x, 13, 3.25, 1e-4);
    } else if (n.type == "standardize") {
      Ref mean = param(group, "mean"), sd = param(group, "std");
      y = ref_standardize(x, mean.v, sd.v);
    } else if (n.type == "argmax") {
      continue;
    } else {
      ADD_FAILURE() << "interpreter lacks " << n.type;
    }
    v[n.name] = y;
    geo[n.name] = g;
  }
  return v;
}

}  // namespace

TEST(GraphDesc, ParsesAndRoundTrips) {
  GraphDesc g = GraphDesc::parse(network_text("multiscale", 11));
  EXPECT_EQ(g.input_name, "image");
  EXPECT_EQ(g.outputs, (std::vector<std::string>{"scores", "labels_full"}));
  GraphDesc again = GraphDesc::parse(g.to_text());
  EXPECT_EQ(again.to_text(), g.to_text());
  EXPECT_EQ(again.nodes.size(), g.nodes.size());
}

TEST(GraphDesc, ClearErrors) {
  EXPECT_NE(error_of([] { GraphDesc::parse("input x channels=3\ny = conv2d(z) out=2\n"); })
                .find("'z', which is not defined"),
            std::string::npos);
  EXPECT_NE(error_of([] { GraphDesc::parse("input x\ny = relu(x)\ny = relu(x)\n"); })
                .find("defined twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { GraphDesc::parse("y = relu(x)\n"); }).find("not defined"),
            std::string::npos);
  EXPECT_NE(error_of([] { GraphDesc::parse("input x\ny relu x\n"); }).find("graph line 2"),
            std::string::npos);
  Model m = make_random_model("reference", 8, 1);
  m.graph.nodes[3].type = "warp_drive";
  EXPECT_NE(error_of([&] { Graph g(m); }).find("unknown layer type 'warp_drive'"),
            std::string::npos);
}

TEST(Graph, ReferenceNetCountsPaperOpsAt320x240) {
  Model m = make_random_model("reference", 8, 1);
  Graph g(m);
  CpuBackend cpu(2);
  g.plan(1, 240, 320, cpu);
  EXPECT_EQ(g.shape_of("scores"), Shape(1, 8, 49, 69));
  EXPECT_EQ(g.shape_of("labels_full"), Shape(1, 1, 240, 320));
  EXPECT_NEAR(g.total_ops() * 1e-9, 7.57, 0.01);  // the paper's 7.57 GOp
  Geometry geo = g.geometry_of("scores");
  EXPECT_DOUBLE_EQ(geo.stride_x, 4);
  EXPECT_DOUBLE_EQ(geo.offset_x, 22.5);
}

TEST(Graph, ShapesAtSeveralSizesAndSmallestInputs) {
  CpuBackend cpu(2);
  Model ref = make_random_model("reference", 11, 1);
  Graph g(ref);
  g.plan(1, 46, 46, cpu);  // the smallest input: 1x1 features
  EXPECT_EQ(g.shape_of("scores"), Shape(1, 11, 1, 1));
  g.plan(1, 1080, 1920, cpu);
  EXPECT_EQ(g.shape_of("scores"), Shape(1, 11, 259, 469));
  std::string e = error_of([&] { g.plan(1, 45, 46, cpu); });
  EXPECT_NE(e.find("too small"), std::string::npos) << e;
  EXPECT_NE(e.find("s1c3"), std::string::npos) << e;
  EXPECT_FALSE(g.planned());

  Model ms = make_random_model("multiscale", 8, 1);
  Graph h(ms);
  h.plan(1, 240, 320, cpu);
  EXPECT_EQ(h.shape_of("features"), Shape(1, 768, 60, 80));
  EXPECT_EQ(h.shape_of("s4r3"), Shape(1, 256, 15, 20));
  h.plan(1, 16, 16, cpu);  // quarter scale 4x4 -> 1x1 features
  EXPECT_EQ(h.shape_of("s4r3"), Shape(1, 256, 1, 1));
  EXPECT_EQ(h.shape_of("labels_full"), Shape(1, 1, 16, 16));
  e = error_of([&] { h.plan(1, 15, 40, cpu); });
  EXPECT_NE(e.find("too small"), std::string::npos) << e;
}

TEST(Graph, ReusesBuffers) {
  Model m = make_random_model("multiscale", 8, 1);
  Graph g(m);
  CpuBackend cpu(2);
  g.plan(1, 240, 320, cpu);
  size_t all = 0;
  for (const auto& s : g.stats()) all += s.out.numel() * sizeof(float);
  // At the concat, features + its three inputs (29.5 MB) must be live at once.
  EXPECT_LT(g.activation_bytes(), all / 2) << "planned " << g.activation_bytes() << " of " << all;
  EXPECT_GT(g.activation_bytes(), g.shape_of("features").numel() * sizeof(float));
}

// An inner node is read after the pass only when the plan keeps it (PlanIO::keep): its value then
// equals the interpreter's; asking for one not kept is an error naming PlanIO::keep, never the
// bytes of whatever reused its memory.
TEST(Graph, KeepsInnerNodesAskedFor) {
  Model m = make_random_model("multiscale", 8, 3);
  Tensor x = random_tensor(Shape(2, 3, 37, 45), 7, 0.f, 1.f);
  Graph g(m);
  CpuBackend cpu(2);
  PlanIO io;
  io.keep = {"s1r1", "fc1"};
  g.plan(2, 37, 45, cpu, io);
  g.run(x.view());
  auto want = interpret(m, x);
  EXPECT_LT(rel_error(g.fetch("s1r1").view(), want.at("s1r1")), 1e-5);
  EXPECT_LT(rel_error(g.output("fc1"), want.at("fc1")), 1e-5);
  const std::string e = error_of([&] { g.fetch("s2r2"); });
  EXPECT_NE(e.find("PlanIO::keep"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { g.output("s2r2"); }).find("s2r2"), std::string::npos);
}

// Fusion is asked of the layers (Layer::can_fuse) per plan: on the CPU a ReLU is fused into the
// convolution before it (it does not run: profiled time 0) but a pool is not; a producer that is
// kept, or read by two layers, keeps its follower apart; results equal the interpreter's either way.
TEST(Graph, FusesWhatTheProducerCanAndOnlyWhereNothingElseReadsIt) {
  Model m = random_model_from_text(
      "input x channels=3\n"
      "c = conv2d(x) out=4 k=3 pad=same\n"
      "r = relu(c)\n"
      "p = maxpool2d(r) k=2\n"
      "d = conv2d(p) out=3 k=1\n"
      "e = relu(d)\n"
      "f = relu(d)\n"
      "output p e f\n", 12);
  Tensor x = random_tensor(Shape(2, 3, 11, 13), 9, 0.f, 1.f);
  const auto want = interpret(m, x);
  CpuBackend cpu(2);
  for (bool keep_c : {false, true}) {
    SCOPED_TRACE(keep_c ? "c kept" : "nothing kept");
    Graph g(m);
    PlanIO io;
    if (keep_c) io.keep = {"c"};
    g.plan(2, 11, 13, cpu, io);
    g.set_profiling(true);
    g.run(x.view());
    std::map<std::string, double> t;
    for (const auto& s : g.stats()) t[s.name] = s.time_ms;
    EXPECT_EQ(t["r"] == 0.0, !keep_c) << "ReLU fused only where its producer is not kept";
    EXPECT_GT(t["p"], 0.0) << "no pool is fused on the CPU";
    EXPECT_GT(t["e"], 0.0) << "d has two readers: neither ReLU may be fused";
    EXPECT_GT(t["f"], 0.0) << "d has two readers: neither ReLU may be fused";
    for (const char* o : {"p", "e", "f"}) EXPECT_LT(rel_error(g.fetch(o).view(), want.at(o)), 1e-5) << o;
    if (keep_c) {
      EXPECT_LT(rel_error(g.fetch("c").view(), want.at("c")), 1e-5);
    }
  }
}

// An upsample onto its own grid (a net's scores already at the input's size, brought "back" onto
// it) is its input's memory: it does not run (profiled time 0), its value is its input's bit for
// bit, its readers (an argmax, a ReLU) read that memory, and nothing is fused into the producer
// another layer also reads; one onto another grid runs. Equal to the interpreter either way.
TEST(Graph, AnUpsampleOntoItsOwnGridIsItsInput) {
  Model m = random_model_from_text(
      "input x channels=3\n"
      "c = conv2d(x) out=4 k=3 pad=same\n"
      "full = upsample(c, x) mode=bilinear align=geometry\n"
      "labels = argmax(full)\n"
      "r = relu(full)\n"
      "h = downscale(c) factor=2\n"
      "back = upsample(h, x) mode=bilinear align=geometry\n"
      "output c full labels r back\n", 14);
  Tensor x = random_tensor(Shape(2, 3, 11, 13), 9, 0.f, 1.f);
  const auto want = interpret(m, x);
  CpuBackend cpu(2);
  Graph g(m);
  g.plan(2, 11, 13, cpu);
  g.set_profiling(true);
  g.run(x.view());
  std::map<std::string, double> t;
  for (const auto& s : g.stats()) t[s.name] = s.time_ms;
  EXPECT_EQ(t["full"], 0.0) << "an identity runs nothing";
  EXPECT_GT(t["r"], 0.0) << "nothing is fused into c, which three layers read";
  EXPECT_GT(t["back"], 0.0);
  const Tensor c = g.fetch("c"), full = g.fetch("full");
  ASSERT_EQ(c.shape(), full.shape());
  for (size_t i = 0; i < c.numel(); ++i) ASSERT_EQ(c[i], full[i]) << i;
  for (const char* o : {"c", "full", "r", "back"}) EXPECT_LT(rel_error(g.fetch(o).view(), want.at(o)), 1e-5) << o;
  const Tensor labels = g.fetch("labels");  // the first largest of c's channels, per pixel
  const size_t plane = size_t(11) * 13;
  for (size_t i = 0; i < labels.numel(); ++i) {
    const size_t n = i / plane, p = i % plane;
    int best = 0;
    for (int k = 1; k < 4; ++k)
      if (c[(n * 4 + size_t(k)) * plane + p] > c[(n * 4 + size_t(best)) * plane + p]) best = k;
    ASSERT_EQ(int(labels[i]), best) << i;
  }
}

class WholeNet : public ::testing::TestWithParam<std::string> {};

TEST_P(WholeNet, MatchesFloat64InterpreterAndIsRepeatable) {
  Model m = make_random_model(GetParam(), 11, 4);
  // Non-trivial standardisation, so that step is checked too.
  for (int c = 0; c < 3; ++c) {
    m.params.at("pre/mean")[size_t(c)] = 0.1f * c - 0.05f;
    m.params.at("pre/std")[size_t(c)] = 0.8f + 0.3f * c;
  }
  Tensor x = random_tensor(Shape(1, 3, 53, 61), 40, 0.f, 1.f);
  Graph g(m);
  CpuBackend cpu(2);
  PlanIO keep_full;
  keep_full.keep = {"full"};  // an inner node (labels_full is the output)
  g.plan(1, 53, 61, cpu, keep_full);
  g.run(x.view());
  auto want = interpret(m, x);
  EXPECT_LT(rel_error(g.output("scores"), want.at("scores")), 1e-4);
  EXPECT_LT(rel_error(g.output("full"), want.at("full")), 1e-4);
  Tensor first(g.output("scores").shape);
  std::copy(g.output("scores").f32(), g.output("scores").f32() + first.numel(), first.data());
  g.run(x.view());
  for (size_t i = 0; i < first.numel(); ++i) ASSERT_EQ(first[i], g.output("scores").f32()[i]);
  // Batch of two equals two single runs.
  Tensor x2(Shape(2, 3, 53, 61));
  Tensor y = random_tensor(Shape(1, 3, 53, 61), 41, 0.f, 1.f);
  std::copy(x.data(), x.data() + x.numel(), x2.data());
  std::copy(y.data(), y.data() + y.numel(), x2.data() + x.numel());
  g.plan(2, 53, 61, cpu);
  g.run(x2.view());
  EXPECT_LT(rel_error(TensorView{g.output("scores").data, first.shape(), Format{}}, to_ref(first.view())),
            1e-6);
}

INSTANTIATE_TEST_SUITE_P(BothNets, WholeNet, ::testing::Values("reference", "multiscale"));

// run() re-runs the pass on the input last fed: same outputs; refused before
// any run() since the plan.
TEST(Graph, RunResidentRepeatsTheLastInput) {
  Model m = make_random_model("reference", 8, 1);
  CpuBackend cpu(2);
  Graph g(m);
  g.plan(1, 47, 53, cpu);
  EXPECT_THROW(g.run(), Error);
  Tensor x = random_tensor(Shape(1, 3, 47, 53), 3, 0.f, 1.f);
  g.run(x.view());
  Tensor first = g.fetch("scores");
  Tensor other = random_tensor(Shape(1, 3, 47, 53), 4, 0.f, 1.f);
  g.run(other.view());
  ASSERT_NE(g.fetch("scores")[0], first[0]);
  g.run(x.view());
  g.run();
  Tensor again = g.fetch("scores");
  for (size_t i = 0; i < again.numel(); ++i) ASSERT_EQ(again[i], first[i]);
  g.plan(1, 47, 53, cpu);
  EXPECT_THROW(g.run(), Error);
}
