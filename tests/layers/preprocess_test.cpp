// rgb_to_yuv, contrast_norm, standardize against float64 references (contrast_norm's reference
// uses direct 2-D window sums, not the layer's separable passes). Bound: 1e-5 relative.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/reference.h"

using namespace scenelab;
using namespace scenelab::test;

TEST(RgbToYuv, MatchesReference) {
  Tensor x = random_tensor(Shape(2, 3, 37, 53), 20, 0.f, 1.f);
  LayerRun r = run_layer("y = rgb_to_yuv(x0)", {&x}, {});
  EXPECT_LT(rel_error(r.out.view(), ref_rgb_to_yuv(to_ref(x.view()))), 1e-6);
}

TEST(ContrastNorm, Gaussian13x13OddSize) {
  Tensor x = random_tensor(Shape(1, 3, 37, 53), 21, 0.f, 1.f);
  LayerRun r = run_layer("y = contrast_norm(x0) size=13", {&x}, {});
  EXPECT_LT(rel_error(r.out.view(), ref_contrast_norm(to_ref(x.view()), 13, 3.25, 1e-4)), 1e-5);
}

TEST(ContrastNorm, ImageSmallerThanWindowAndCustomSigma) {
  Tensor x = random_tensor(Shape(2, 2, 5, 9), 22);
  LayerRun r = run_layer("y = contrast_norm(x0) size=13 sigma=2", {&x}, {});
  EXPECT_LT(rel_error(r.out.view(), ref_contrast_norm(to_ref(x.view()), 13, 2.0, 1e-4)), 1e-5);
}

// Batch 2, odd sizes (rows not a multiple of the band count, one image narrower than the window
// and one wider), any thread count: against float64, and the same bits for 1, 2, 3 and 7 threads
// (the row bands and the order of the deviation sums follow the image, not the threads).
TEST(ContrastNorm, RowBandsAnyThreadCountSameBits) {
  for (const Shape in : {Shape(2, 3, 61, 47), Shape(1, 3, 9, 130), Shape(2, 1, 3, 11)}) {
    Tensor x = random_tensor(in, 23, 0.f, 1.f);
    LayerRun one = run_layer("y = contrast_norm(x0) size=13", {&x}, {}, 1);
    EXPECT_LT(rel_error(one.out.view(), ref_contrast_norm(to_ref(x.view()), 13, 3.25, 1e-4)), 1e-5) << in.str();
    for (int threads : {2, 3, 7}) {
      LayerRun many = run_layer("y = contrast_norm(x0) size=13", {&x}, {}, threads);
      size_t differ = 0;
      for (size_t i = 0; i < one.out.numel(); ++i) differ += one.out[i] != many.out[i];
      EXPECT_EQ(differ, 0u) << in.str() << ", " << threads << " threads";
    }
  }
}

TEST(ContrastNorm, ConstantImageGivesZerosNotNaN) {
  Tensor x(Shape(1, 3, 20, 30), 0.5f);
  LayerRun r = run_layer("y = contrast_norm(x0)", {&x}, {});
  // Exact answer 0; float rounding of the local mean (~1e-7 of 0.5) is divided by eps = 1e-4.
  for (size_t i = 0; i < r.out.numel(); ++i) ASSERT_NEAR(r.out[i], 0.f, 5e-3f) << i;
}

TEST(Standardize, PerChannel) {
  Tensor x = random_tensor(Shape(2, 3, 37, 53), 23);
  Tensor mean(Shape(3, 1, 1, 1)), sd(Shape(3, 1, 1, 1));
  const double m[3] = {0.1, -0.3, 0.7}, s[3] = {0.5, 2.0, 1.5};
  for (int c = 0; c < 3; ++c) mean[size_t(c)] = float(m[c]), sd[size_t(c)] = float(s[c]);
  LayerRun r = run_layer("y = standardize(x0)", {&x}, {{"mean", mean}, {"std", sd}});
  EXPECT_LT(rel_error(r.out.view(), ref_standardize(to_ref(x.view()), {m[0], m[1], m[2]},
                                                    {s[0], s[1], s[2]})),
            1e-6);
  sd[1] = 0.f;
  EXPECT_THROW(run_layer("y = standardize(x0)", {&x}, {{"mean", mean}, {"std", sd}}), Error);
}

// The training script's preprocessing (tools/scenelab_torch.py, float64) exported as fixture
// data by tests/fixtures/make_preprocess_fixture.py, against the engine's three preprocessing
// nodes of the shipped networks. Bound: 1e-5 relative.
#include "engine/graph.h"
#include "engine/networks.h"
#include "weights/tensor_file.h"

TEST(Preprocess, SameFunctionAsTheTrainingScript) {
  const std::string fx = std::string(SCENELAB_SOURCE_DIR) + "/tests/fixtures/preprocess.h5";
  Tensor img = read_tensor_h5(fx, "input"), want = read_tensor_h5(fx, "expected");
  Model m;
  m.graph = GraphDesc::parse(network_text("multiscale", 11));
  m.graph.outputs = {"pre"};
  for (const auto& r : required_params(m.graph))
    m.params.emplace(r.dataset, Tensor(param_shape(r.dims), 0.f));
  m.params["pre/mean"] = read_tensor_h5(fx, "mean");
  m.params["pre/mean"].reshape(Shape(3, 1, 1, 1));
  m.params["pre/std"] = read_tensor_h5(fx, "std");
  m.params["pre/std"].reshape(Shape(3, 1, 1, 1));
  Graph g(m);
  CpuBackend cpu(2);
  g.plan(1, img.shape().h, img.shape().w, cpu);
  g.run(img.view());
  EXPECT_LT(rel_error(g.output("pre"), to_ref(want.view())), 1e-5);
}
