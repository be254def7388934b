// conv2d against the float64 reference. Bound: relative error 1e-5 (float32 accumulation over
// K <= 64*49 terms; measured errors are ~1e-7) for im2col + GEMM; Winograd's transforms add
// rounding (their entries reach 5.25 and a tile sums 64 products): bound 5e-5 there (measured
// 1.5e-6 to 7.3e-6 on the shapes below).
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "tests/reference.h"

using namespace scenelab;
using namespace scenelab::test;

namespace {

constexpr double kBound = 1e-5;
constexpr double kWinogradBound = 5e-5;

void check_conv(Shape in, int out, int k, const char* pad, bool bias, bool relu, int threads,
                CpuConv conv = CpuConv::Gemm) {
  Tensor x = random_tensor(in, 1);
  Tensor w = random_tensor(Shape(out, in.c, k, k), 2);
  Tensor b = random_tensor(Shape(out, 1, 1, 1), 3);
  std::map<std::string, Tensor> p{{"weight", w}};
  if (bias) p.emplace("bias", b);
  std::string line = "y = conv2d(x0) out=" + std::to_string(out) + " k=" + std::to_string(k) +
                     " pad=" + pad + (bias ? "" : " bias=0");
  LayerRun r = run_layer(line, {&x}, p, threads, relu, {}, conv);
  Ref rb = to_ref(b.view());
  rb.shape = Shape(out, 1, 1, 1);
  Ref want = ref_conv2d(to_ref(x.view()), to_ref(w.view()), bias ? &rb : nullptr,
                        std::string(pad) == "same" ? k / 2 : 0, relu);
  const double err = rel_error(r.out.view(), want);
  EXPECT_LT(err, conv == CpuConv::Winograd ? kWinogradBound : kBound)
      << line << " on " << in.str() << " relu=" << relu << " threads=" << threads
      << (conv == CpuConv::Winograd ? " (winograd)" : " (gemm)");
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

// Winograd F(m x m, k x k) on 8 x 8 tiles: every kernel size it takes (m = 6, 4, 2), both
// paddings, odd sizes whose last tiles hang over the output's edge, batch 2, from one input
// channel to the stage-3 shape, several threads. Outputs poisoned (run_layer), workspace too.
TEST(Conv2d, WinogradAgainstFloat64) {
  for (int k : {3, 5, 7})
    for (const char* pad : {"valid", "same"}) {
      check_conv(Shape(2, 1, 19, 23), 5, k, pad, true, false, 2, CpuConv::Winograd);
      check_conv(Shape(2, 17, 29, 13), 33, k, pad, false, true, 3, CpuConv::Winograd);
    }
  check_conv(Shape(1, 64, 23, 31), 48, 7, "same", true, true, 2, CpuConv::Winograd);
  check_conv(Shape(3, 3, 9, 8), 4, 7, "valid", true, false, 1, CpuConv::Winograd);  // 3x2 output
}

// Bands cut across a tile row (wide maps, many channels: a band holds fewer tiles than a row has)
// and down the rows; the last band of each row narrower than the others.
TEST(Conv2d, WinogradBandsAcrossRowsAndColumns) {
  check_conv(Shape(2, 32, 9, 77), 480, 7, "same", true, true, 2, CpuConv::Winograd);
  check_conv(Shape(1, 40, 13, 161), 600, 3, "valid", true, false, 3, CpuConv::Winograd);
}

// Winograd and im2col + GEMM compute the same layer; auto takes Winograd for this shape (16 or more
// input channels, 7x7) and im2col for 3 input channels.
TEST(Conv2d, WinogradEqualsGemmWithinBound) {
  Tensor x = random_tensor(Shape(2, 16, 41, 37), 21);
  Tensor w = random_tensor(Shape(24, 16, 7, 7), 22);
  Tensor b = random_tensor(Shape(24, 1, 1, 1), 23);
  const std::string line = "y = conv2d(x0) out=24 k=7 pad=same";
  LayerRun g = run_layer(line, {&x}, {{"weight", w}, {"bias", b}}, 2, true, {}, CpuConv::Gemm);
  LayerRun wg = run_layer(line, {&x}, {{"weight", w}, {"bias", b}}, 2, true, {}, CpuConv::Winograd);
  LayerRun au = run_layer(line, {&x}, {{"weight", w}, {"bias", b}}, 2, true, {}, CpuConv::Auto);
  double num = 0, den = 0;
  size_t same_as_auto = 0;
  for (size_t i = 0; i < g.out.numel(); ++i) {
    num = std::max(num, double(std::abs(g.out.data()[i] - wg.out.data()[i])));
    den = std::max(den, double(std::abs(g.out.data()[i])));
    same_as_auto += wg.out.data()[i] == au.out.data()[i];
  }
  EXPECT_LT(num / den, kWinogradBound);
  EXPECT_GT(num, 0.0) << "the two paths gave identical bits: is Winograd running at all?";
  EXPECT_EQ(same_as_auto, g.out.numel()) << "auto should run Winograd for 16 -> 24 channels, 7x7";
}

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
    for (CpuConv conv : {CpuConv::Gemm, CpuConv::Winograd}) {
    LayerRun one = run_layer(line, {&x}, {{"weight", w}, {"bias", b}}, 1, true, {}, conv);
    for (int threads : {2, 3, 5, 16}) {
      LayerRun many = run_layer(line, {&x}, {{"weight", w}, {"bias", b}}, threads, true, {}, conv);
      ASSERT_EQ(one.out.numel(), many.out.numel());
      size_t differ = 0;
      for (size_t i = 0; i < one.out.numel(); ++i) differ += one.out.data()[i] != many.out.data()[i];
      EXPECT_EQ(differ, 0u) << in.str() << ": " << differ << " outputs differ between 1 and " << threads
                            << " threads" << (conv == CpuConv::Winograd ? " (winograd)" : " (gemm)");
    }
    }
  }
}
