// The conv, avgpool and conv_transpose layers (any kernel, stride, dilation, padding on each side, groups) against a float64
// direct convolution on odd sizes, batch 2, with and without bias and a fused ReLU (run_layer
// poisons the output first). Bound: 1e-5 relative (max |got - want| / max |want|).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "tests/reference.h"

using namespace scenelab;
using namespace scenelab::test;

namespace {

struct Cfg {
  int cin, cout, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, groups;
  bool bias, relu;
};

Ref ref_conv(const Ref& x, const Tensor& w, const Tensor* b, const Cfg& c) {
  const int ho = (x.shape.h + c.pt + c.pb - c.dh * (c.kh - 1) - 1) / c.sh + 1;
  const int wo = (x.shape.w + c.pl + c.pr - c.dw * (c.kw - 1) - 1) / c.sw + 1;
  Ref y(Shape(x.shape.n, c.cout, ho, wo));
  const int cin_g = c.cin / c.groups, cout_g = c.cout / c.groups;
  for (int n = 0; n < x.shape.n; ++n)
    for (int o = 0; o < c.cout; ++o)
      for (int oy = 0; oy < ho; ++oy)
        for (int ox = 0; ox < wo; ++ox) {
          double s = b ? (*b)[size_t(o)] : 0.0;
          const int g = o / cout_g;
          for (int ci = 0; ci < cin_g; ++ci)
            for (int i = 0; i < c.kh; ++i)
              for (int j = 0; j < c.kw; ++j) {
                const int iy = oy * c.sh - c.pt + i * c.dh, ix = ox * c.sw - c.pl + j * c.dw;
                if (iy < 0 || iy >= x.shape.h || ix < 0 || ix >= x.shape.w) continue;
                s += double(w[((size_t(o) * cin_g + ci) * c.kh + i) * c.kw + j]) *
                     x.at(n, g * cin_g + ci, iy, ix);
              }
          y.at(n, o, oy, ox) = c.relu ? std::max(s, 0.0) : s;
        }
  return y;
}

}  // namespace

TEST(Conv, EveryShapeOnnxDescribes) {
  const Cfg cases[] = {
      {3, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, true, false},   // stride 2, same-ish padding
      {4, 6, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 2, true, true},    // dilation 2, two groups, ReLU
      {6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, false, false},  // depthwise, no bias
      {6, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 6, true, false},  // depthwise x2, stride 2
      {5, 7, 1, 3, 1, 2, 1, 1, 0, 1, 0, 1, 1, true, false},   // 1x3, stride 1x2
      {3, 4, 4, 4, 2, 2, 1, 1, 0, 0, 1, 1, 1, true, true},    // even kernel, padding at the end only
      {3, 5, 7, 5, 3, 2, 1, 2, 3, 0, 2, 4, 1, true, false},   // everything uneven
      {8, 8, 5, 3, 1, 1, 2, 1, 4, 0, 3, 2, 8, true, true},    // depthwise, dilated, uneven pads, ReLU
      {4, 8, 3, 4, 2, 3, 1, 2, 0, 5, 1, 0, 4, false, false},  // depthwise x2, strides 2x3, pads beyond the kernel
  };
  int seed = 40;
  for (const Cfg& c : cases) {
    const Tensor x = random_tensor(Shape(2, c.cin, 23, 29), uint32_t(++seed));
    const Tensor w = random_tensor(Shape(c.cout, c.cin / c.groups, c.kh, c.kw), uint32_t(++seed));
    const Tensor b = random_tensor(Shape(c.cout, 1, 1, 1), uint32_t(++seed));
    const std::string line = "y = conv(x0) out=" + std::to_string(c.cout) + " kernel=" + std::to_string(c.kh) +
                             "," + std::to_string(c.kw) + " stride=" + std::to_string(c.sh) + "," +
                             std::to_string(c.sw) + " dilation=" + std::to_string(c.dh) + "," +
                             std::to_string(c.dw) + " pads=" + std::to_string(c.pt) + "," + std::to_string(c.pl) +
                             "," + std::to_string(c.pb) + "," + std::to_string(c.pr) +
                             " groups=" + std::to_string(c.groups) + " bias=" + (c.bias ? "1" : "0");
    std::map<std::string, Tensor> params{{"weight", w}};
    if (c.bias) params["bias"] = b;
    LayerRun r = run_layer(line, {&x}, params, 2, c.relu);
    const Ref want = ref_conv(to_ref(x.view()), w, c.bias ? &b : nullptr, c);
    ASSERT_EQ(r.out.shape(), want.shape) << line;
    EXPECT_LT(rel_error(r.out.view(), want), 1e-5) << line;
  }
  const Tensor x = random_tensor(Shape(1, 3, 5, 5), 1);
  EXPECT_THROW(run_layer("y = conv(x0) out=4 kernel=3 groups=2", {&x}, {}), Error);  // 3 channels, 2 groups
  EXPECT_THROW(run_layer("y = conv(x0) out=4 kernel=7", {&x}, {}), Error);            // larger than the input
}

// pool: windows with strides and pads on each side; the mean with the padding excluded or
// counted as zeros, and the largest value (padding never taken), against float64 (batch 2, odd
// sizes).
TEST(Pool, MeanAndMaxWithPads) {
  const Tensor x = random_tensor(Shape(2, 3, 19, 26), 61);
  struct Case {
    int kh, kw, sh, sw, pt, pl, pb, pr;
  };
  for (const Case& c : {Case{3, 3, 2, 2, 1, 1, 1, 1}, Case{3, 2, 1, 2, 0, 1, 2, 0}, Case{5, 5, 3, 3, 2, 2, 2, 2}})
    for (const char* mode : {"avg", "avg count_pad=1", "max"}) {
      const bool max = std::string(mode) == "max", count_pad = std::string(mode).find("count_pad") != std::string::npos;
      const std::string line = "y = pool(x0) mode=" + std::string(mode) + " kernel=" + std::to_string(c.kh) + "," +
                               std::to_string(c.kw) + " stride=" + std::to_string(c.sh) + "," + std::to_string(c.sw) +
                               " pads=" + std::to_string(c.pt) + "," + std::to_string(c.pl) + "," +
                               std::to_string(c.pb) + "," + std::to_string(c.pr);
      LayerRun r = run_layer(line, {&x}, {});
      const Ref in = to_ref(x.view());
      const int ho = (19 + c.pt + c.pb - c.kh) / c.sh + 1, wo = (26 + c.pl + c.pr - c.kw) / c.sw + 1;
      Ref want(Shape(2, 3, ho, wo));
      for (int n = 0; n < 2; ++n)
        for (int ch = 0; ch < 3; ++ch)
          for (int oy = 0; oy < ho; ++oy)
            for (int ox = 0; ox < wo; ++ox) {
              double s = 0, m = -1e300;
              int inside = 0, padded = 0;
              for (int i = oy * c.sh - c.pt; i < oy * c.sh - c.pt + c.kh; ++i)
                for (int j = ox * c.sw - c.pl; j < ox * c.sw - c.pl + c.kw; ++j) {
                  const bool in_padded = i >= -c.pt && i < 19 + c.pb && j >= -c.pl && j < 26 + c.pr;
                  padded += in_padded;
                  if (i < 0 || i >= 19 || j < 0 || j >= 26) continue;
                  s += in.at(n, ch, i, j);
                  m = std::max(m, in.at(n, ch, i, j));
                  ++inside;
                }
              want.at(n, ch, oy, ox) = max ? m : s / (count_pad ? padded : inside);
            }
      ASSERT_EQ(r.out.shape(), want.shape) << line;
      EXPECT_LE(rel_error(r.out.view(), want), max ? 0.0 : 1e-6) << line;  // max: exact
    }
}

// A NaN in a max window is the window's value (as PyTorch's and ONNX's max pooling give), and
// count_pad belongs to the mean alone.
TEST(Pool, MaxTakesNaNAndRefusesCountPad) {
  Tensor x = random_tensor(Shape(1, 1, 5, 5), 62);
  x.data()[6] = std::nanf("");  // pixel (1, 1): in the windows of outputs (0..1, 0..1)
  LayerRun r = run_layer("y = pool(x0) mode=max kernel=3 stride=2 pads=1,1,1,1", {&x}, {});
  const float* y = r.out.data();  // 3 x 3 outputs, windows of rows and columns 2o-1 .. 2o+1
  for (int k = 0; k < 9; ++k) EXPECT_EQ(std::isnan(y[k]), k == 0 || k == 1 || k == 3 || k == 4) << k;
  EXPECT_THROW(run_layer("y = pool(x0) mode=max kernel=3 count_pad=1", {&x}, {}), Error);
  EXPECT_THROW(run_layer("y = pool(x0) mode=min kernel=3", {&x}, {}), Error);
}

// conv_transpose against the scatter definition in float64 (each input pixel adds its
// kernel-weighted value to the outputs it reaches), independent of the layer's gathering:
// strides, dilations, pads on each side, output padding, groups, a fused ReLU; batch 2.
TEST(ConvTranspose, EqualsTheScatterDefinition) {
  struct Case {
    int cin, cout, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oph, opw, groups;
    bool bias, relu;
  };
  const Case cases[] = {
      {4, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},  // the usual x2 upsampling
      {4, 4, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 2, false, true},  // 4x4 at stride 2, two groups
      {3, 5, 3, 2, 3, 1, 2, 1, 0, 1, 2, 0, 2, 0, 1, true, false},  // uneven everything
  };
  int seed = 70;
  for (const Case& c : cases) {
    const int h = 9, w = 11;
    const Tensor x = random_tensor(Shape(2, c.cin, h, w), uint32_t(++seed));
    const Tensor wt = random_tensor(Shape(c.cin, c.cout / c.groups, c.kh, c.kw), uint32_t(++seed));
    const Tensor b = random_tensor(Shape(c.cout, 1, 1, 1), uint32_t(++seed));
    auto pair = [](int a, int b2) { return std::to_string(a) + "," + std::to_string(b2); };
    const std::string line = "y = conv_transpose(x0) out=" + std::to_string(c.cout) + " kernel=" + pair(c.kh, c.kw) +
                             " stride=" + pair(c.sh, c.sw) + " dilation=" + pair(c.dh, c.dw) + " pads=" +
                             pair(c.pt, c.pl) + "," + pair(c.pb, c.pr) + " output_pad=" + pair(c.oph, c.opw) +
                             " groups=" + std::to_string(c.groups) + " bias=" + (c.bias ? "1" : "0");
    std::map<std::string, Tensor> params{{"weight", wt}};
    if (c.bias) params["bias"] = b;
    LayerRun r = run_layer(line, {&x}, params, 2, c.relu);
    const int ho = (h - 1) * c.sh - c.pt - c.pb + c.dh * (c.kh - 1) + c.oph + 1;
    const int wo = (w - 1) * c.sw - c.pl - c.pr + c.dw * (c.kw - 1) + c.opw + 1;
    Ref want(Shape(2, c.cout, ho, wo));
    const int cin_g = c.cin / c.groups, cout_g = c.cout / c.groups;
    for (int n = 0; n < 2; ++n) {
      for (int o = 0; o < c.cout; ++o)
        for (int y = 0; y < ho; ++y)
          for (int xx = 0; xx < wo; ++xx) want.at(n, o, y, xx) = c.bias ? b[size_t(o)] : 0.0;
      for (int ci = 0; ci < c.cin; ++ci)
        for (int iy = 0; iy < h; ++iy)
          for (int ix = 0; ix < w; ++ix)
            for (int og = 0; og < cout_g; ++og)
              for (int i = 0; i < c.kh; ++i)
                for (int j = 0; j < c.kw; ++j) {
                  const int oy = iy * c.sh - c.pt + i * c.dh, ox = ix * c.sw - c.pl + j * c.dw;
                  if (oy < 0 || oy >= ho || ox < 0 || ox >= wo) continue;
                  const int o = ci / cin_g * cout_g + og;
                  want.at(n, o, oy, ox) += double(x[((size_t(n) * c.cin + ci) * h + iy) * w + ix]) *
                                           wt[((size_t(ci) * cout_g + og) * c.kh + i) * c.kw + j];
                }
      if (c.relu)
        for (double& v : want.v) v = std::max(v, 0.0);
    }
    ASSERT_EQ(r.out.shape(), want.shape) << line;
    EXPECT_LT(rel_error(r.out.view(), want), 1e-5) << line;
  }
}
