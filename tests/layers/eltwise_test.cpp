// The element-wise layers (activation, channel_op, binary) against float64 references on odd
// sizes, batch 2 (run_layer poisons the outputs first). Bound: 1e-6 relative (max |got - want| /
// max |want|); the selections (clip, leaky_relu's sign) exact in float.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/error.h"
#include "engine/backend.h"
#include "engine/graph.h"
#include "tests/reference.h"

using namespace scenelab;
using namespace scenelab::test;

namespace {

Ref map_ref(const Tensor& x, const std::function<double(double, int)>& f) {
  Ref r = to_ref(x.view());
  const size_t plane = size_t(r.shape.h) * r.shape.w;
  for (size_t i = 0; i < r.v.size(); ++i) r.v[i] = f(r.v[i], int((i / plane) % size_t(r.shape.c)));
  return r;
}

}  // namespace

TEST(Activation, EveryFunctionMatchesReference) {
  const Tensor x = random_tensor(Shape(2, 3, 17, 23), 21, -8.f, 8.f);
  const std::vector<std::pair<std::string, std::function<double(double)>>> cases = {
      {"fn=sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"fn=tanh", [](double v) { return std::tanh(v); }},
      {"fn=leaky_relu alpha=0.1", [](double v) { return v >= 0 ? v : 0.1 * v; }},
      {"fn=leaky_relu", [](double v) { return v >= 0 ? v : 0.01 * v; }},
      {"fn=clip min=-0.5 max=0.7", [](double v) { return std::min(std::max(v, -0.5), 0.7); }},
      {"fn=clip max=6", [](double v) { return std::min(v, 6.0); }},
      {"fn=hard_sigmoid", [](double v) { return std::min(std::max(0.2 * v + 0.5, 0.0), 1.0); }},
      {"fn=hard_sigmoid alpha=0.3 beta=0.4", [](double v) { return std::min(std::max(0.3 * v + 0.4, 0.0), 1.0); }},
      {"fn=hard_swish", [](double v) { return v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0); }},
  };
  for (const auto& [attrs, f] : cases) {
    LayerRun r = run_layer("y = activation(x0) " + attrs, {&x}, {});
    EXPECT_LT(rel_error(r.out.view(), map_ref(x, [&](double v, int) { return f(v); })), 1e-6) << attrs;
  }
  EXPECT_THROW(run_layer("y = activation(x0) fn=gelu", {&x}, {}), Error);
  EXPECT_THROW(run_layer("y = activation(x0) fn=clip min=1 max=0", {&x}, {}), Error);
}

TEST(ChannelOp, MulAddPreluMatchReference) {
  const Tensor x = random_tensor(Shape(2, 5, 13, 19), 22, -2.f, 2.f);
  const Tensor v = random_tensor(Shape(5, 1, 1, 1), 23, -1.5f, 1.5f);
  const std::vector<std::pair<std::string, std::function<double(double, double)>>> cases = {
      {"mul", [](double a, double b) { return a * b; }},
      {"add", [](double a, double b) { return a + b; }},
      {"prelu", [](double a, double b) { return a >= 0 ? a : b * a; }},
  };
  for (const auto& [op, f] : cases) {
    LayerRun r = run_layer("y = channel_op(x0) op=" + op, {&x}, {{"value", v}});
    EXPECT_LT(rel_error(r.out.view(), map_ref(x, [&](double a, int c) { return f(a, v[size_t(c)]); })), 1e-6) << op;
  }
  EXPECT_THROW(run_layer("y = channel_op(x0) op=div", {&x}, {{"value", v}}), Error);
  // affine: x v[c] + u[c], with and without a fused ReLU
  const Tensor u = random_tensor(Shape(5, 1, 1, 1), 24, -1.f, 1.f);
  for (bool relu : {false, true}) {
    LayerRun r = run_layer("y = channel_op(x0) op=affine", {&x}, {{"value", v}, {"shift", u}}, 2, relu);
    const Ref want = map_ref(x, [&](double a, int c) {
      const double y = a * v[size_t(c)] + u[size_t(c)];
      return relu ? std::max(y, 0.0) : y;
    });
    EXPECT_LT(rel_error(r.out.view(), want), 1e-6) << "affine, relu " << relu;
  }
}

TEST(Binary, SameShapeAndPerChannelMatchReference) {
  const Tensor a = random_tensor(Shape(2, 4, 11, 17), 24), b = random_tensor(Shape(2, 4, 11, 17), 25),
               s = random_tensor(Shape(2, 4, 1, 1), 26);
  const std::vector<std::pair<std::string, std::function<double(double, double)>>> cases = {
      {"add", [](double p, double q) { return p + q; }},
      {"sub", [](double p, double q) { return p - q; }},
      {"mul", [](double p, double q) { return p * q; }},
  };
  const size_t plane = 11 * 17;
  for (const auto& [op, f] : cases) {
    LayerRun r = run_layer("y = binary(x0, x1) op=" + op, {&a, &b}, {});
    Ref want = to_ref(a.view());
    for (size_t i = 0; i < want.v.size(); ++i) want.v[i] = f(a[i], b[i]);
    EXPECT_LT(rel_error(r.out.view(), want), 1e-6) << op;
    LayerRun spread = run_layer("y = binary(x0, x1) op=" + op, {&a, &s}, {});
    for (size_t i = 0; i < want.v.size(); ++i) want.v[i] = f(a[i], s[i / plane]);
    EXPECT_LT(rel_error(spread.out.view(), want), 1e-6) << op << " spread over the plane";
  }
  const Tensor bad = random_tensor(Shape(2, 4, 11, 16), 27);
  EXPECT_THROW(run_layer("y = binary(x0, x1) op=add", {&a, &bad}, {}), Error);
}

// A squeeze-and-excitation gate in a graph: the convolution's output times the global average
// of its sigmoid (n x c x 1 x 1, spread over the plane); the pool against float64.
TEST(Binary, GateInAGraph) {
  Model m = random_model_from_text(
      "input x channels=3\n"
      "c = conv2d(x) out=6 k=3 pad=same\n"
      "sg = activation(c) fn=sigmoid\n"
      "se = global_avgpool(sg)\n"
      "gate = binary(c, se) op=mul\n"
      "output c se gate\n",
      8);
  Graph g(m);
  CpuBackend cpu(2);
  PlanIO io;
  io.f32_outputs = {"c", "se", "gate"};
  g.plan(2, 37, 53, cpu, io);
  const Tensor x = random_tensor(Shape(2, 3, 37, 53), 9, 0.f, 1.f);
  g.run(x.view());
  const Tensor c = g.fetch("c"), se = g.fetch("se"), gate = g.fetch("gate");
  ASSERT_EQ(se.shape(), Shape(2, 6, 1, 1));
  const size_t plane = 37 * 53;
  for (size_t p = 0; p < 12; ++p) {
    double sum = 0;
    for (size_t i = 0; i < plane; ++i) sum += 1 / (1 + std::exp(-double(c[p * plane + i])));
    EXPECT_NEAR(se[p], sum / double(plane), 1e-6) << p;
  }
  double worst = 0;
  for (size_t i = 0; i < gate.numel(); ++i)
    worst = std::max(worst, std::fabs(double(gate[i]) - double(c[i]) * se[i / plane]));
  EXPECT_LT(worst, 1e-6);
}
