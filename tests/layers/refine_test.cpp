// refine (layers/refine.cpp) against its float64 definition on odd sizes, batch 2; what it is
// for (probabilities spread within a region and stop at the image's edges); its errors.
// Bounds: 2e-5 absolute on the output (log probabilities; float32 against float64 through up to
// 4 x 8 passes of the recursive filter), 1e-5 on each pixel's probabilities summing to 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/error.h"
#include "tests/reference.h"

using namespace scenelab;
using namespace scenelab::test;

namespace {

double max_abs_error(const TensorView& got, const Ref& want) {
  double e = 0;
  for (size_t i = 0; i < want.v.size(); ++i) e = std::max(e, std::abs(double(got.f32()[i]) - want.v[i]));
  return e;
}

// An image in [0, 1] of flat patches (a few edges) with a little noise.
Tensor patchy_image(Shape s, uint32_t seed) {
  Tensor noise = random_tensor(s, seed, -0.02f, 0.02f), level = random_tensor(Shape(s.n, s.c, 3, 3), seed + 1, 0.2f, 0.8f);
  Tensor g(s);
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c)
      for (int y = 0; y < s.h; ++y)
        for (int x = 0; x < s.w; ++x) {
          const size_t i = ((size_t(n) * s.c + c) * s.h + y) * s.w + x;
          g[i] = level[((size_t(n) * s.c + c) * 3 + y * 3 / s.h) * 3 + x * 3 / s.w] + noise[i];
        }
  return g;
}

}  // namespace

TEST(Refine, MatchesReference) {
  struct Case {
    double sigma_s, sigma_r;
    int iterations;
  };
  // 23 rows: two groups of eight filtered together and seven alone; 531 columns: rows of three
  // spans of the CPU path (layers/channel_math.h), the last one not a whole vector
  for (const Shape s : {Shape(2, 5, 23, 31), Shape(2, 3, 11, 531)}) {
    Tensor x = random_tensor(s, 21, -6.f, 6.f), g = patchy_image(Shape(s.n, 3, s.h, s.w), 22);
    for (const Case c : {Case{10, 0.2, 3}, Case{40, 0.5, 1}, Case{3, 0.05, 2}, Case{80, 1.0, 8}}) {
      const std::string line = "y = refine(x0, x1) sigma_s=" + std::to_string(c.sigma_s) +
                               " sigma_r=" + std::to_string(c.sigma_r) + " iterations=" + std::to_string(c.iterations);
      for (int threads : {1, 3}) {
        LayerRun r = run_layer(line, {&x, &g}, {}, threads);
        const Ref want = ref_refine(to_ref(x.view()), to_ref(g.view()), c.sigma_s, c.sigma_r, c.iterations);
        EXPECT_LT(max_abs_error(r.out.view(), want), 2e-5) << line << ", threads " << threads;
        for (int n = 0; n < s.n; ++n)
          for (size_t i = 0; i < s.plane(); ++i) {
            double sum = 0;
            for (int ch = 0; ch < s.c; ++ch) sum += std::exp(double(r.out.view().channel(n, ch)[i]));
            ASSERT_NEAR(sum, 1.0, 1e-5) << line << ": frame " << n << " pixel " << i;
          }
      }
    }
  }
}

// A one-channel image, dark left of column 12 and bright from it, and scores for class 0 left of
// it and class 1 right of it, except one wrong column on each side: the filter mends the wrong
// columns from their side's majority and keeps each side's class up to the edge. Without the
// edge (a flat image) the same filter blurs the classes across it.
TEST(Refine, SpreadsWithinRegionsAndStopsAtEdges) {
  const int h = 9, w = 25, edge = 12;
  Tensor x(Shape(1, 2, h, w)), g(Shape(1, 1, h, w)), flat(Shape(1, 1, h, w), 0.5f);
  for (int y = 0; y < h; ++y)
    for (int c = 0; c < w; ++c) {
      const bool right = c >= edge, wrong = c == 4 || c == 20;
      const bool one = right != wrong;
      x[size_t(y) * w + c] = one ? -2.f : 2.f;
      x[size_t(h) * w + size_t(y) * w + c] = one ? 2.f : -2.f;
      g[size_t(y) * w + c] = right ? 1.f : 0.f;
    }
  LayerRun r = run_layer("y = refine(x0, x1) sigma_s=20 sigma_r=0.1", {&x, &g}, {});
  for (int y = 0; y < h; ++y)
    for (int c = 0; c < w; ++c) {
      const float p0 = r.out[size_t(y) * w + c], p1 = r.out[size_t(h) * w + size_t(y) * w + c];
      EXPECT_EQ(p1 > p0, c >= edge) << "row " << y << " column " << c;
    }
  // Across the edge the filter barely blends: the columns beside it keep their side's class by far.
  const float margin = r.out[size_t(h) * w + edge] - r.out[edge];
  EXPECT_GT(margin, 1.5f);
  LayerRun blur = run_layer("y = refine(x0, x1) sigma_s=20 sigma_r=0.1", {&x, &flat}, {});
  EXPECT_LT(std::abs(blur.out[size_t(h) * w + edge] - blur.out[edge]), 0.5f);
}

TEST(Refine, KeepsTheScoresGeometry) {
  Tensor x = random_tensor(Shape(1, 3, 6, 7), 3), g = random_tensor(Shape(1, 3, 6, 7), 4, 0.f, 1.f);
  Geometry gx{2, 3, 0.5, 1.5};
  LayerRun r = run_layer("y = refine(x0, x1) sigma_s=5 sigma_r=0.3", {&x, &g}, {}, 1, false, {gx, Geometry{}});
  const Geometry out = r.layer->infer_geometry({gx, Geometry{}}, {x.shape(), g.shape()});
  EXPECT_EQ(out.stride_x, 3);
  EXPECT_EQ(out.offset_x, 1.5);
}

TEST(Refine, BadAttributesAndSizesAreErrors) {
  Tensor x = random_tensor(Shape(2, 3, 8, 9), 1), g = random_tensor(Shape(2, 3, 8, 9), 2, 0.f, 1.f);
  for (const char* bad : {"y = refine(x0, x1) sigma_r=0.2", "y = refine(x0, x1) sigma_s=10",
                          "y = refine(x0, x1) sigma_s=0 sigma_r=0.2", "y = refine(x0, x1) sigma_s=-1 sigma_r=0.2",
                          "y = refine(x0, x1) sigma_s=10 sigma_r=0", "y = refine(x0, x1) sigma_s=nan sigma_r=0.2",
                          "y = refine(x0, x1) sigma_s=5000 sigma_r=0.2",
                          "y = refine(x0, x1) sigma_s=10 sigma_r=0.2 iterations=0",
                          "y = refine(x0, x1) sigma_s=10 sigma_r=0.2 iterations=9",
                          "y = refine(x0, x1) sigma_s=10 sigma_r=0.2 radius=3"})
    EXPECT_THROW(run_layer(bad, {&x, &g}, {}), Error) << bad;
  Tensor small = random_tensor(Shape(2, 3, 8, 8), 2, 0.f, 1.f), one = random_tensor(Shape(1, 3, 8, 9), 2, 0.f, 1.f);
  for (const Tensor* wrong : {&small, &one}) {
    try {
      run_layer("y = refine(x0, x1) sigma_s=10 sigma_r=0.2", {&x, wrong}, {});
      ADD_FAILURE() << "no error for image " << wrong->shape().str();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("same batch, height and width"), std::string::npos) << e.what();
    }
  }
}
