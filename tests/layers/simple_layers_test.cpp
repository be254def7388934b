// relu, maxpool2d, downscale, concat, argmax, softmax against float64 references on odd sizes.
// Bounds: exact (0) for selection layers, 1e-6 relative for arithmetic ones.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/error.h"
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

TEST(Softmax, MatchesReference) {
  Tensor x = random_tensor(Shape(2, 11, 13, 17), 12, -20.f, 20.f);
  LayerRun r = run_layer("y = softmax(x0)", {&x}, {});
  EXPECT_LT(rel_error(r.out.view(), ref_softmax(to_ref(x.view()))), 1e-6);
}

TEST(Layers, UnknownAttributeIsAnError) {
  Tensor x = random_tensor(Shape(1, 3, 8, 8), 1);
  EXPECT_THROW(run_layer("y = maxpool2d(x0) kernel=2", {&x}, {}), Error);
}
