// upsample against float64 resampling at the source coordinates each mode defines
// (PyTorch's interpolate for align=size and scale=S; Geometry for align=geometry), and the
// geometry of a map resized by scale. Bound: 1e-6 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "engine/graph.h"
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

// By scale (one input): round(S h) x round(S w), sampled as align=size; shrinking by an odd
// factor and enlarging, batch 2, 1 and 3 threads.
TEST(Upsample, ByScaleSamplesAsSizeAlign) {
  for (int threads : {1, 3})
    for (double s : {0.75, 0.5, 1.3}) {
      Tensor x = random_tensor(Shape(2, 3, 23, 31), 34);
      LayerRun r = run_layer("y = upsample(x0) scale=" + std::to_string(s), {&x}, {}, threads);
      const int h = int(std::lround(23 * s)), w = int(std::lround(31 * s));
      ASSERT_EQ(r.out.shape(), Shape(2, 3, h, w)) << "scale " << s;
      std::vector<double> sy, sx;
      for (int i = 0; i < h; ++i) sy.push_back(std::max((i + 0.5) * 23 / h - 0.5, 0.0));
      for (int j = 0; j < w; ++j) sx.push_back(std::max((j + 0.5) * 31 / w - 0.5, 0.0));
      EXPECT_LT(rel_error(r.out.view(), ref_resample(to_ref(x.view()), h, w, sy, sx, true)), 1e-6)
          << "scale " << s << ", " << threads << " threads";
    }
}

// Where a scaled map's pixels lie on the image: output pixel i samples input (i + 0.5) r - 0.5,
// r = in / out, so it lies there (on the input's own geometry: a stride-2 map here).
TEST(Upsample, ByScaleGeometry) {
  Model m = random_model_from_text(
      "input image channels=3\nsmall = upsample(image) scale=0.75\np = maxpool2d(image) k=2\n"
      "ps = upsample(p) scale=0.6\noutput small ps\n", 1);
  CpuBackend cpu(1);
  Graph g(m);
  g.plan(2, 9, 7, cpu);  // small: 7 x 5 (9 * 0.75 = 6.75), ps: 2 x 2 of 4 x 3
  const double ry = 9.0 / 7, rx = 7.0 / 5;
  EXPECT_DOUBLE_EQ(g.geometry_of("small").stride_y, ry);
  EXPECT_DOUBLE_EQ(g.geometry_of("small").stride_x, rx);
  EXPECT_DOUBLE_EQ(g.geometry_of("small").offset_y, 0.5 * ry - 0.5);
  EXPECT_DOUBLE_EQ(g.geometry_of("small").offset_x, 0.5 * rx - 0.5);
  EXPECT_DOUBLE_EQ(g.geometry_of("ps").stride_y, 2 * 4 / 2.0);
  EXPECT_DOUBLE_EQ(g.geometry_of("ps").stride_x, 2 * 3 / 2.0);
  EXPECT_DOUBLE_EQ(g.geometry_of("ps").offset_y, 0.5 + 2 * (0.5 * 2 - 0.5));
  EXPECT_DOUBLE_EQ(g.geometry_of("ps").offset_x, 0.5 + 2 * (0.5 * 1.5 - 0.5));
  // bad scales and a reference beside a scale are refused, naming the layer
  Tensor x = random_tensor(Shape(1, 3, 9, 7), 2);
  for (const char* bad : {"scale=0", "scale=-1", "scale=100", "scale=nan", "scale=0.5 align=geometry"}) {
    try {
      run_layer(std::string("y = upsample(x0) ") + bad, {&x}, {});
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'y'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("scale"), std::string::npos) << e.what();
    }
  }
}
