// upsample against float64 resampling at the source coordinates each mode defines
// (PyTorch's interpolate for align=size; Geometry for align=geometry). Bound: 1e-6 relative.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/reference.h"

using namespace scenelab;
using namespace scenelab::test;

TEST(Upsample, BilinearSizeAlignMatchesPyTorchSampling) {
  Tensor x = random_tensor(Shape(2, 3, 7, 11), 30), ref(Shape(2, 1, 37, 53), 0.f);
  LayerRun r = run_layer("y = upsample(x0, x1) mode=bilinear", {&x, &ref}, {});
  std::vector<double> sy, sx;
  for (int i = 0; i < 37; ++i) sy.push_back(std::max((i + 0.5) * 7 / 37 - 0.5, 0.0));
  for (int j = 0; j < 53; ++j) sx.push_back(std::max((j + 0.5) * 11 / 53 - 0.5, 0.0));
  EXPECT_LT(rel_error(r.out.view(), ref_resample(to_ref(x.view()), 37, 53, sy, sx, true)), 1e-6);
}

TEST(Upsample, NearestSizeAlign) {
  Tensor x = random_tensor(Shape(1, 4, 9, 5), 31), ref(Shape(1, 1, 20, 13), 0.f);
  LayerRun r = run_layer("y = upsample(x0, x1) mode=nearest", {&x, &ref}, {});
  std::vector<double> sy, sx;
  for (int i = 0; i < 20; ++i) sy.push_back(std::floor(i * 9.0 / 20));
  for (int j = 0; j < 13; ++j) sx.push_back(std::floor(j * 5.0 / 13));
  EXPECT_EQ(rel_error(r.out.view(), ref_resample(to_ref(x.view()), 20, 13, sy, sx, false)), 0.0);
}

TEST(Upsample, GeometryAlignPlacesCoarseCentresOnInputPixels) {
  // A valid-conv map: pixel i centred on input coordinate 22.5 + 4 i (the reference net).
  Tensor x = random_tensor(Shape(1, 3, 6, 9), 32), ref(Shape(1, 1, 71, 83), 0.f);
  Geometry coarse{4, 4, 22.5, 22.5};
  LayerRun r = run_layer("y = upsample(x0, x1) mode=bilinear align=geometry", {&x, &ref}, {}, 2,
                         false, {coarse, Geometry{}});
  std::vector<double> sy, sx;
  for (int i = 0; i < 71; ++i) sy.push_back((i - 22.5) / 4);
  for (int j = 0; j < 83; ++j) sx.push_back((j - 22.5) / 4);
  EXPECT_LT(rel_error(r.out.view(), ref_resample(to_ref(x.view()), 71, 83, sy, sx, true)), 1e-6);
}

// Shrinking (each output row reads rows the previous one did not: the CPU path's two resampled
// rows are replaced every row) and enlarging on 1 and 3 threads, batch 2.
TEST(Upsample, BilinearShrinkAndThreads) {
  for (int threads : {1, 3})
    for (const auto& [h, w] : {std::pair{9, 14}, std::pair{50, 70}}) {
      Tensor x = random_tensor(Shape(2, 3, 23, 31), 33), ref(Shape(2, 1, h, w), 0.f);
      LayerRun r = run_layer("y = upsample(x0, x1) mode=bilinear", {&x, &ref}, {}, threads);
      std::vector<double> sy, sx;
      for (int i = 0; i < h; ++i) sy.push_back(std::max((i + 0.5) * 23 / h - 0.5, 0.0));
      for (int j = 0; j < w; ++j) sx.push_back(std::max((j + 0.5) * 31 / w - 0.5, 0.0));
      EXPECT_LT(rel_error(r.out.view(), ref_resample(to_ref(x.view()), h, w, sy, sx, true)), 1e-6)
          << h << "x" << w << ", " << threads << " threads";
    }
}
