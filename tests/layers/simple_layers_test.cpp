// relu, maxpool2d, downscale, concat, argmax, softmax, flip, softmax_mean against float64
// references on odd sizes.
// Bounds: exact (0) for selection layers, 1e-6 relative for arithmetic ones.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "engine/graph.h"
#include "layers/softmax_mean.h"
#include "tests/reference.h"

using namespace scenelab;
using namespace scenelab::test;

TEST(Relu, MatchesReference) {
  Tensor x = random_tensor(Shape(2, 3, 37, 53), 4);
  LayerRun r = run_layer("y = relu(x0)", {&x}, {});
  EXPECT_EQ(rel_error(r.out.view(), ref_relu(to_ref(x.view()))), 0.0);
}

TEST(MaxPool2d, TwoByTwoOddSize) {
  Tensor x = random_tensor(Shape(1, 3, 37, 53), 5);
  LayerRun r = run_layer("y = maxpool2d(x0) k=2", {&x}, {});
  EXPECT_EQ(r.out.shape(), Shape(1, 3, 18, 26));
  EXPECT_EQ(rel_error(r.out.view(), ref_maxpool(to_ref(x.view()), 2, 2)), 0.0);
}

TEST(MaxPool2d, GeneralKernelAndStride) {
  Tensor x = random_tensor(Shape(2, 5, 21, 16), 6);
  LayerRun r = run_layer("y = maxpool2d(x0) k=3 stride=2", {&x}, {});
  EXPECT_EQ(rel_error(r.out.view(), ref_maxpool(to_ref(x.view()), 3, 2)), 0.0);
}

TEST(Downscale, ByTwoAndFour) {
  Tensor x = random_tensor(Shape(1, 3, 37, 53), 7);
  for (int f : {2, 4}) {
    LayerRun r = run_layer("y = downscale(x0) factor=" + std::to_string(f), {&x}, {});
    EXPECT_LT(rel_error(r.out.view(), ref_avgpool(to_ref(x.view()), f)), 1e-6) << f;
  }
}

TEST(Concat, ThreeInputs) {
  Tensor a = random_tensor(Shape(2, 3, 11, 13), 8), b = random_tensor(Shape(2, 5, 11, 13), 9),
         c = random_tensor(Shape(2, 1, 11, 13), 10);
  LayerRun r = run_layer("y = concat(x0, x1, x2)", {&a, &b, &c}, {});
  EXPECT_EQ(rel_error(r.out.view(), ref_concat({to_ref(a.view()), to_ref(b.view()),
                                                to_ref(c.view())})),
            0.0);
  Tensor bad = random_tensor(Shape(2, 1, 11, 12), 10);
  EXPECT_THROW(run_layer("y = concat(x0, x1)", {&a, &bad}, {}), Error);
}

TEST(Argmax, LowestIndexOnTiesAndIgnoresNaN) {
  Tensor x = random_tensor(Shape(1, 6, 9, 7), 11);
  x[0] = 5.f;                                   // pixel 0: channel 0 and 3 tie at the top
  x[3 * 63] = 5.f;
  x[1] = std::numeric_limits<float>::quiet_NaN();  // pixel 1: NaN in channel 0 never wins
  LayerRun r = run_layer("y = argmax(x0)", {&x}, {});
  Ref ref = to_ref(x.view());
  for (int i = 0; i < 63; ++i) {
    int best = -1;
    double bv = -1e300;
    for (int c = 0; c < 6; ++c) {
      double v = ref.v[size_t(c) * 63 + i];
      if (v == v && v > bv) bv = v, best = c;
    }
    EXPECT_EQ(int(r.out[size_t(i)]), best) << "pixel " << i;
  }
  EXPECT_EQ(r.out[0], 0.f);
}

// 531 columns: rows of three spans of the CPU path (layers/channel_math.h), the last not a whole vector.
TEST(Softmax, MatchesReference) {
  for (const Shape shape : {Shape(2, 11, 13, 17), Shape(2, 11, 3, 531)}) {
    Tensor x = random_tensor(shape, 12, -20.f, 20.f);
    LayerRun r = run_layer("y = softmax(x0)", {&x}, {});
    EXPECT_LT(rel_error(r.out.view(), ref_softmax(to_ref(x.view()))), 1e-6) << shape.str();
  }
}

TEST(Layers, UnknownAttributeIsAnError) {
  Tensor x = random_tensor(Shape(1, 3, 8, 8), 1);
  EXPECT_THROW(run_layer("y = maxpool2d(x0) kernel=2", {&x}, {}), Error);
}

TEST(Flip, MirrorsRowsOrColumnsExactly) {
  Tensor x = random_tensor(Shape(2, 3, 13, 17), 13);
  for (const char* axis : {"w", "h"}) {
    LayerRun r = run_layer(std::string("y = flip(x0) axis=") + axis, {&x}, {});
    const bool rows = axis[0] == 'h';
    Ref want(x.shape());
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 3; ++c)
        for (int y = 0; y < 13; ++y)
          for (int xx = 0; xx < 17; ++xx)
            want.at(n, c, y, xx) = to_ref(x.view()).at(n, c, rows ? 12 - y : y, rows ? xx : 16 - xx);
    EXPECT_EQ(rel_error(r.out.view(), want), 0.0) << axis;
  }
  LayerRun d = run_layer("y = flip(x0)", {&x}, {});  // axis w by default
  EXPECT_EQ(d.out[0], x[16]);
  EXPECT_THROW(run_layer("y = flip(x0) axis=c", {&x}, {}), Error);
}

// log(mean_k softmax(x_k)) against float64, scores up to +-60 (exp overflows float beyond 88:
// the layer works in log space, so every output is finite); one input gives the log softmax. Up to
// kSoftmaxMeanMaxInputs inputs (a mirrored ensemble of four models at four scales), one more is an error.
TEST(SoftmaxMean, MatchesReference) {
  for (const Shape shape : {Shape(2, 11, 7, 9), Shape(2, 11, 2, 531)}) {  // 531: three spans a row
    std::vector<Tensor> xs;
    for (uint32_t k = 0; k <= uint32_t(kSoftmaxMeanMaxInputs); ++k)
      xs.push_back(random_tensor(shape, 20 + k, -60.f, 60.f));
    for (size_t count : {size_t(1), size_t(3), size_t(kSoftmaxMeanMaxInputs), size_t(kSoftmaxMeanMaxInputs) + 1}) {
      std::vector<const Tensor*> in;
      std::string line = "y = softmax_mean(";
      for (size_t k = 0; k < count; ++k) {
        in.push_back(&xs[k]);
        line += (k ? ", x" : "x") + std::to_string(k);
      }
      if (count > size_t(kSoftmaxMeanMaxInputs)) {
        EXPECT_THROW(run_layer(line + ")", in, {}), Error) << count << " inputs";
        continue;
      }
      LayerRun r = run_layer(line + ")", in, {});
      Ref want(xs[0].shape());
      std::vector<Ref> p;
      for (size_t k = 0; k < count; ++k) p.push_back(ref_softmax(to_ref(xs[k].view())));
      for (size_t i = 0; i < want.v.size(); ++i) {
        double s = 0;
        for (const Ref& q : p) s += q.v[i];
        // where every probability underflows double too, the log softmax is the exact value
        want.v[i] = s > 1e-300 ? std::log(s / double(count)) : 0;
      }
      double worst = 0;
      for (size_t i = 0; i < want.v.size(); ++i) {
        ASSERT_TRUE(std::isfinite(r.out[i])) << i;
        if (want.v[i] != 0) worst = std::max(worst, std::abs(r.out[i] - want.v[i]) / std::max(1.0, std::abs(want.v[i])));
      }
      EXPECT_LT(worst, 1e-5) << count << " inputs, " << shape.str();
    }
  }
  Tensor one = random_tensor(Shape(2, 11, 7, 9), 29), other = random_tensor(Shape(2, 11, 7, 8), 30);
  EXPECT_THROW(run_layer("y = softmax_mean(x0, x1)", {&one, &other}, {}), Error);
}

// flip(x) keeps x's geometry; flip(x, ref) mirrors it about the middle of ref's extent. A 2x2 pool
// of a 7-pixel-wide image has centres 0.5, 2.5, 4.5; mirrored about 3 they are 5.5, 3.5, 1.5, so
// the flipped map starts at 1.5. Rows: 9 high, 4 rows at 0.5..6.5, mirrored about 4: from 1.5.
TEST(Flip, GeometryMirroredAboutTheReference) {
  Model m = random_model_from_text(
      "input image channels=3\np = maxpool2d(image) k=2\nkeep = flip(p)\nfw = flip(p, image)\n"
      "fh = flip(p, image) axis=h\noutput keep fw fh\n", 1);
  CpuBackend cpu(1);
  Graph g(m);
  g.plan(2, 9, 7, cpu);
  EXPECT_DOUBLE_EQ(g.geometry_of("keep").offset_x, 0.5);
  EXPECT_DOUBLE_EQ(g.geometry_of("fw").offset_x, 1.5);
  EXPECT_DOUBLE_EQ(g.geometry_of("fw").offset_y, 0.5);
  EXPECT_DOUBLE_EQ(g.geometry_of("fw").stride_x, 2.0);
  EXPECT_DOUBLE_EQ(g.geometry_of("fh").offset_y, 1.5);
  EXPECT_DOUBLE_EQ(g.geometry_of("fh").offset_x, 0.5);
  // a third input is refused
  Tensor x = random_tensor(Shape(1, 3, 9, 7), 2);
  EXPECT_THROW(run_layer("y = flip(x0, x1, x2)", {&x, &x, &x}, {}), Error);
}
