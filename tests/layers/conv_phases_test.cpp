// The CPU convolutions' GEMM on stride phases (layers/conv_phases.h) against a float64 direct
// convolution: kernels 1-5 wide and tall, strides 1-3, dilations 1-2, pads uneven and none, odd
// sizes, outputs poisoned first, bias and ReLU. Bound: relative error 1e-5 of the largest |y|
// (float32 sums of up to 325 products). Then the sums themselves: bit for bit those of an im2col
// GEMM (sgemm_colmajor on the explicit matrix), whatever rows and channels a call takes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "layers/conv_phases.h"
#include "layers/cpu_gemm.h"

using namespace scenelab;

namespace {

int out_size(int in, int k, int s, int d, int p0, int p1) { return (in + p0 + p1 - d * (k - 1) - 1) / s + 1; }

struct Case {
  ConvTaps t;
  int pb, pr, cin, cout, h, w;
  int ho() const { return out_size(h, t.kh, t.sh, t.dh, t.pt, pb); }
  int wo() const { return out_size(w, t.kw, t.sw, t.dw, t.pl, pr); }
  size_t k() const { return size_t(cin) * t.kh * t.kw; }
};

std::vector<float> uniform(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& e : v) e = u(rng);
  return v;
}

// Every band of `rows` rows and chunk of `chunk` channels, as the layers call it.
std::vector<float> run(const Case& c, int rows, int chunk, const std::vector<float>& x, const std::vector<float>& w,
                       const float* bias, bool relu) {
  const int ho = c.ho(), wo = c.wo();
  const PhaseConv pc(c.t, c.cin, c.h, c.w, wo, rows, chunk);
  std::vector<float> ws(pc.workspace_floats(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> y(size_t(c.cout) * ho * wo, std::numeric_limits<float>::quiet_NaN());
  const size_t k = c.k();
  for (int y0 = 0; y0 < ho; y0 += rows)
    for (int o0 = 0; o0 < c.cout; o0 += chunk) {
      const int n = std::min(chunk, c.cout - o0);
      pc.band(x.data(), size_t(c.h) * c.w, y0, std::min(ho, y0 + rows), w.data() + o0 * k, n,
              bias ? bias + o0 : nullptr, relu, y.data() + size_t(o0) * ho * wo, size_t(ho) * wo, ws.data());
    }
  return y;
}

const Case kCases[] = {
    {{3, 3, 1, 1, 1, 1, 1, 1}, 1, 1, 13, 17, 23, 31},  // same padding, stride 1
    {{3, 3, 2, 2, 1, 1, 1, 1}, 1, 1, 8, 5, 29, 37},    // stride 2
    {{3, 3, 2, 2, 1, 1, 0, 0}, 1, 1, 9, 9, 30, 41},    // stride 2, pads bottom and right only
    {{5, 3, 1, 2, 2, 1, 4, 1}, 3, 2, 7, 11, 21, 26},   // tall kernel, dilated rows, uneven pads
    {{1, 1, 2, 2, 1, 1, 0, 0}, 0, 0, 64, 8, 17, 23},   // 1x1 stride 2
    {{4, 5, 3, 3, 1, 2, 0, 2}, 1, 3, 6, 7, 25, 35},    // even kernel, stride 3, dilated columns
    {{7, 7, 1, 1, 1, 1, 3, 3}, 3, 3, 3, 16, 19, 27},   // the paper's 7x7
};

}  // namespace

TEST(PhaseConv, AgainstFloat64DirectConvolution) {
  if (!has_indirect_gemm()) GTEST_SKIP() << "this build has no AVX-512: the layers use im2col";
  std::mt19937 rng(11);
  for (const Case& c : kCases) {
    const int ho = c.ho(), wo = c.wo();
    const std::vector<float> x = uniform(size_t(c.cin) * c.h * c.w, rng), w = uniform(c.cout * c.k(), rng),
                             b = uniform(size_t(c.cout), rng);
    for (bool relu : {false, true}) {
      const std::vector<float> y = run(c, 3, 5, x, w, b.data(), relu);
      double num = 0, den = 0;
      for (int o = 0; o < c.cout; ++o)
        for (int oy = 0; oy < ho; ++oy)
          for (int ox = 0; ox < wo; ++ox) {
            double want = b[o];
            for (int ci = 0; ci < c.cin; ++ci)
              for (int i = 0; i < c.t.kh; ++i)
                for (int j = 0; j < c.t.kw; ++j) {
                  const int iy = oy * c.t.sh - c.t.pt + i * c.t.dh, ix = ox * c.t.sw - c.t.pl + j * c.t.dw;
                  if (iy >= 0 && iy < c.h && ix >= 0 && ix < c.w)
                    want += double(w[((size_t(o) * c.cin + ci) * c.t.kh + i) * c.t.kw + j]) *
                            x[(size_t(ci) * c.h + iy) * c.w + ix];
                }
            if (relu) want = std::max(want, 0.0);
            const double d = std::abs(double(y[(size_t(o) * ho + oy) * wo + ox]) - want);
            num = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(num, d);
            den = std::max(den, std::abs(want));
          }
      EXPECT_LT(num / den, 1e-5) << "kernel " << c.t.kh << "x" << c.t.kw << " stride " << c.t.sh << "," << c.t.sw
                                 << (relu ? " relu" : "");
    }
  }
}

TEST(PhaseConv, SumsAreIm2colsWhateverTheCut) {
  if (!has_indirect_gemm()) GTEST_SKIP() << "this build has no AVX-512: the layers use im2col";
  std::mt19937 rng(5);
  for (const Case& c : kCases) {
    const int ho = c.ho(), wo = c.wo();
    const size_t k = c.k(), p = size_t(ho) * wo;
    const std::vector<float> x = uniform(size_t(c.cin) * c.h * c.w, rng), w = uniform(c.cout * k, rng);
    // the im2col matrix (row (c, i, j), column (oy, ox)) and its GEMM, as the layers' fallback
    std::vector<float> col(k * p, 0.f), want(size_t(c.cout) * p);
    for (int ci = 0; ci < c.cin; ++ci)
      for (int i = 0; i < c.t.kh; ++i)
        for (int j = 0; j < c.t.kw; ++j)
          for (int oy = 0; oy < ho; ++oy)
            for (int ox = 0; ox < wo; ++ox) {
              const int iy = oy * c.t.sh - c.t.pt + i * c.t.dh, ix = ox * c.t.sw - c.t.pl + j * c.t.dw;
              if (iy >= 0 && iy < c.h && ix >= 0 && ix < c.w)
                col[((size_t(ci) * c.t.kh + i) * c.t.kw + j) * p + size_t(oy) * wo + ox] =
                    x[(size_t(ci) * c.h + iy) * c.w + ix];
            }
    sgemm_colmajor(p, size_t(c.cout), k, col.data(), p, w.data(), k, want.data(), p);
    for (const auto& [rows, chunk] : {std::pair{1, 1}, std::pair{2, 3}, std::pair{ho, c.cout}, std::pair{5, 16}}) {
      const std::vector<float> y = run(c, rows, chunk, x, w, nullptr, false);
      EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
          << "kernel " << c.t.kh << "x" << c.t.kw << " stride " << c.t.sh << ": bands of " << rows << " rows, "
          << chunk << " channels";
    }
  }
}
