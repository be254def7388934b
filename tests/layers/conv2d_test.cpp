// conv2d against the float64 reference. Bound: relative error 1e-5 (float32 accumulation over
// K <= 64*49 terms; measured errors are ~1e-7).
#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/reference.h"

using namespace scenelab;
using namespace scenelab::test;

namespace {

constexpr double kBound = 1e-5;

void check_conv(Shape in, int out, int k, const char* pad, bool bias, bool relu, int threads) {
  Tensor x = random_tensor(in, 1);
  Tensor w = random_tensor(Shape(out, in.c, k, k), 2);
  Tensor b = random_tensor(Shape(out, 1, 1, 1), 3);
  std::map<std::string, Tensor> p{{"weight", w}};
  if (bias) p.emplace("bias", b);
  std::string line = "y = conv2d(x0) out=" + std::to_string(out) + " k=" + std::to_string(k) +
                     " pad=" + pad + (bias ? "" : " bias=0");
  LayerRun r = run_layer(line, {&x}, p, threads, relu);
  Ref rb = to_ref(b.view());
  rb.shape = Shape(out, 1, 1, 1);
  Ref want = ref_conv2d(to_ref(x.view()), to_ref(w.view()), bias ? &rb : nullptr,
                        std::string(pad) == "same" ? k / 2 : 0, relu);
  EXPECT_LT(rel_error(r.out.view(), want), kBound)
      << line << " on " << in.str() << " relu=" << relu << " threads=" << threads;
}

}  // namespace

TEST(Conv2d, Valid7x7OddSize) { check_conv(Shape(1, 3, 37, 53), 5, 7, "valid", true, false, 2); }
TEST(Conv2d, Same7x7OddSizeFusedRelu) {
  check_conv(Shape(1, 3, 37, 53), 16, 7, "same", true, true, 2);
}
TEST(Conv2d, Stage3Shape64Channels) {
  check_conv(Shape(1, 64, 75, 55), 9, 7, "valid", true, true, 2);
}
TEST(Conv2d, Batch2Same3x3NoBias) { check_conv(Shape(2, 5, 17, 23), 7, 3, "same", false, false, 1); }
TEST(Conv2d, PixelwiseFullyConnected1x1) {
  check_conv(Shape(2, 37, 29, 31), 11, 1, "valid", true, false, 2);
}
TEST(Conv2d, ManyThreadsMoreThanRows) { check_conv(Shape(1, 4, 9, 40), 3, 5, "valid", true, true, 8); }
TEST(Conv2d, OneByOneOutput) { check_conv(Shape(1, 6, 7, 7), 4, 7, "valid", true, false, 2); }

TEST(Conv2d, RejectsEvenKernelAndSmallInput) {
  Tensor x = random_tensor(Shape(1, 3, 5, 9), 1);
  Tensor w = random_tensor(Shape(2, 3, 4, 4), 2);
  EXPECT_THROW(run_layer("y = conv2d(x0) out=2 k=4", {&x}, {{"weight", w}}), Error);
  Tensor w7 = random_tensor(Shape(2, 3, 7, 7), 2);
  try {
    run_layer("y = conv2d(x0) out=2 k=7", {&x}, {{"weight", w7}, {"bias", Tensor(Shape(2, 1, 1, 1), 0.f)}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least 7x7"), std::string::npos) << e.what();
  }
}

TEST(Conv2d, CountsPaperOps) {
  // 2 x nout x nin x kh x kw x hout x wout
  Tensor x = random_tensor(Shape(1, 3, 240, 320), 1);
  auto desc = GraphDesc::parse("input x0 channels=3\ny = conv2d(x0) out=16 k=7\n");
  auto layer = create_layer(desc.nodes[0]);
  Shape out = layer->infer_shape({x.shape()});
  EXPECT_EQ(out, Shape(1, 16, 234, 314));
  EXPECT_DOUBLE_EQ(layer->ops({x.shape()}, out), 2.0 * 16 * 3 * 49 * 234 * 314);
}

// The same bits whatever the thread count: bands do not follow the threads (their GEMM shapes set
// Eigen's blocking, hence the order of the sums). A plain label_image run on 1 and 2 threads gave
// different class maps on a val image before (one pixel's near tie).
TEST(Conv2d, BitIdenticalForAnyThreadCount) {
  for (const Shape in : {Shape(2, 16, 61, 47), Shape(1, 3, 133, 97), Shape(1, 64, 29, 31)}) {
    const int k = in.c == 3 ? 7 : in.c == 16 ? 7 : 5;
    Tensor x = random_tensor(in, 11);
    Tensor w = random_tensor(Shape(24, in.c, k, k), 12);
    Tensor b = random_tensor(Shape(24, 1, 1, 1), 13);
    const std::string line = "y = conv2d(x0) out=24 k=" + std::to_string(k) + " pad=same";
    LayerRun one = run_layer(line, {&x}, {{"weight", w}, {"bias", b}}, 1, true);
    for (int threads : {2, 3, 5, 16}) {
      LayerRun many = run_layer(line, {&x}, {{"weight", w}, {"bias", b}}, threads, true);
      ASSERT_EQ(one.out.numel(), many.out.numel());
      size_t differ = 0;
      for (size_t i = 0; i < one.out.numel(); ++i) differ += one.out.data()[i] != many.out.data()[i];
      EXPECT_EQ(differ, 0u) << in.str() << ": " << differ << " outputs differ between 1 and " << threads
                            << " threads";
    }
  }
}
