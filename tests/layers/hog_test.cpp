// hog_gradient, hog_blocks and linear_window against float64 references written from the
// definitions (Dalal and Triggs), on odd sizes with batch 2. Bounds:
// - hog_gradient: each pixel's orientation histogram (its two bin shares) within 1e-3 of the
//   largest magnitude (the engine's atan2 is OpenCV's polynomial, about 0.01 degrees off, so a
//   share moves by at most ~0.01/20 of the magnitude);
// - hog_blocks: 1e-5 relative (sums of a few hundred products, then L2-Hys);
// - linear_window: 1e-5 relative.
// OpenCV itself is the oracle of tests/tools/peer_hog_test.py.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "tests/reference.h"

using namespace scenelab;
using namespace scenelab::test;

namespace {

constexpr double kPi = 3.14159265358979323846;

// Bytes / 255, as an 8-bit image reaches the graph.
Tensor random_image(Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  Tensor t(s);
  for (size_t i = 0; i < t.numel(); ++i) t[i] = float(byte(rng)) / 255.f;
  return t;
}

int reflect(int i, int n) { return n == 1 ? 0 : i < 0 ? -i : (i >= n ? 2 * n - 2 - i : i); }

// One pixel's histogram over `bins` from a gradient (dx, dy), by the exact angle.
std::vector<double> pixel_hist(double dx, double dy, int bins, bool signed_gradient) {
  std::vector<double> h(size_t(bins), 0.0);
  const double mag = std::hypot(dx, dy);
  if (mag == 0) return h;
  double ang = std::atan2(dy, dx);
  if (ang < 0) ang += 2 * kPi;
  const double span = signed_gradient ? 2 * kPi : kPi;
  double a = std::fmod(ang, span) / span * bins - 0.5;  // in bin-centre units
  const double lo = std::floor(a);
  const double frac = a - lo;
  const int b0 = (int(lo) % bins + bins) % bins, b1 = (b0 + 1) % bins;
  h[size_t(b0)] += mag * (1 - frac);
  h[size_t(b1)] += mag * frac;
  return h;
}

// The engine's per-pixel output (lower share, upper share, lower bin) as a histogram.
std::vector<double> engine_hist(const Tensor& y, int n, int r, int c, int bins) {
  const Shape& s = y.shape();
  auto at = [&](int k) { return double(y[((size_t(n) * 3 + k) * s.h + r) * s.w + c]); };
  std::vector<double> h(size_t(bins), 0.0);
  const int b0 = int(at(2));
  EXPECT_TRUE(b0 >= 0 && b0 < bins && at(2) == double(b0)) << "bin " << at(2);
  if (b0 < 0 || b0 >= bins) return h;
  h[size_t(b0)] += at(0);
  h[size_t((b0 + 1) % bins)] += at(1);
  return h;
}

// Worst |engine - reference| over pixels, relative to the largest magnitude. The reference picks
// the channel of largest magnitude (ties: the last); where two channels' magnitudes are within
// 1e-6 (float rounding decides), either is accepted.
double gradient_error(const Tensor& x, const Tensor& y, int bins, bool gamma, bool signed_gradient) {
  const Shape& s = x.shape();
  auto val = [&](int n, int k, int r, int c) {
    const double b = std::round(double(x[((size_t(n) * s.c + k) * s.h + r) * s.w + c]) * 255.0);
    return gamma ? std::sqrt(b) : b;
  };
  double worst = 0, largest = 0;
  for (int n = 0; n < s.n; ++n)
    for (int r = 0; r < s.h; ++r)
      for (int c = 0; c < s.w; ++c) {
        std::vector<std::pair<double, std::pair<double, double>>> grads;
        for (int k = 0; k < s.c; ++k) {
          const double dx = val(n, k, r, reflect(c + 1, s.w)) - val(n, k, r, reflect(c - 1, s.w));
          const double dy = val(n, k, reflect(r + 1, s.h), c) - val(n, k, reflect(r - 1, s.h), c);
          grads.push_back({dx * dx + dy * dy, {dx, dy}});
        }
        double top = -1;
        for (const auto& g : grads) top = std::max(top, g.first);
        largest = std::max(largest, std::sqrt(top));
        const std::vector<double> got = engine_hist(y, n, r, c, bins);
        double best = INFINITY;
        for (const auto& g : grads) {
          if (g.first < top - 1e-6 * std::max(top, 1.0)) continue;
          const std::vector<double> want = pixel_hist(g.second.first, g.second.second, bins, signed_gradient);
          double e = 0;
          for (int b = 0; b < bins; ++b) e = std::max(e, std::abs(got[size_t(b)] - want[size_t(b)]));
          best = std::min(best, e);
        }
        worst = std::max(worst, best);
      }
  return largest > 0 ? worst / largest : worst;
}

// Blocks from a gradient tensor, by the definitions: tent-shaped spatial weights between cell
// centres, a Gaussian of the distance to the block centre, then L2-Hys.
Ref ref_blocks(const Tensor& g, int cell, int cells, int stride, int bins, double sigma, double clip) {
  const Shape& s = g.shape();
  const int B = cell * cells, K = cells * cells * bins;
  Ref out(Shape(s.n, K, (s.h - B) / stride + 1, (s.w - B) / stride + 1));
  auto at = [&](int n, int k, int r, int c) { return double(g[((size_t(n) * 3 + k) * s.h + r) * s.w + c]); };
  auto tent = [&](int p, int cc) {
    const double d = std::abs((p + 0.5) - (cc + 0.5) * cell) / cell;
    return std::max(0.0, 1.0 - d);
  };
  for (int n = 0; n < s.n; ++n)
    for (int by = 0; by < out.shape.h; ++by)
      for (int bx = 0; bx < out.shape.w; ++bx) {
        std::vector<double> h(size_t(K), 0.0);
        for (int i = 0; i < B; ++i)
          for (int j = 0; j < B; ++j) {
            const int r = by * stride + i, c = bx * stride + j;
            const double gauss = std::exp(-((i - B / 2.0) * (i - B / 2.0) + (j - B / 2.0) * (j - B / 2.0)) /
                                          (2 * sigma * sigma));
            const int b0 = int(at(n, 2, r, c)), b1 = (b0 + 1) % bins;
            for (int cx = 0; cx < cells; ++cx)
              for (int cy = 0; cy < cells; ++cy) {
                const double w = gauss * tent(j, cx) * tent(i, cy);
                h[size_t((cx * cells + cy) * bins + b0)] += w * at(n, 0, r, c);
                h[size_t((cx * cells + cy) * bins + b1)] += w * at(n, 1, r, c);
              }
          }
        double norm = 0;
        for (double v : h) norm += v * v;
        double sum = 0;
        for (double& v : h) {
          v = std::min(v / (std::sqrt(norm) + 0.1 * K), clip);
          sum += v * v;
        }
        for (int k = 0; k < K; ++k) out.at(n, k, by, bx) = h[size_t(k)] / (std::sqrt(sum) + 1e-3);
      }
  return out;
}

// A gradient tensor: shares in [0, 1], whole bins.
Tensor random_gradient(Shape s, int bins, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> share(0.f, 1.f);
  std::uniform_int_distribution<int> bin(0, bins - 1);
  Tensor t(Shape(s.n, 3, s.h, s.w));
  const size_t plane = size_t(s.h) * s.w;
  for (int n = 0; n < s.n; ++n)
    for (size_t i = 0; i < plane; ++i) {
      float* base = t.data() + size_t(n) * 3 * plane;
      base[i] = share(rng);
      base[plane + i] = share(rng);
      base[2 * plane + i] = float(bin(rng));
    }
  return t;
}

}  // namespace

TEST(HogGradient, MatchesFloat64OnColourAndGrey) {
  for (const auto& [shape, line, bins, gamma, sgn] :
       std::vector<std::tuple<Shape, std::string, int, bool, bool>>{
           {Shape(2, 3, 29, 37), "y = hog_gradient(x0)", 9, true, false},
           {Shape(2, 1, 17, 23), "y = hog_gradient(x0) gamma=0", 9, false, false},
           {Shape(2, 3, 19, 13), "y = hog_gradient(x0) bins=18 signed=1", 18, true, true},
           {Shape(1, 3, 1, 5), "y = hog_gradient(x0)", 9, true, false}}) {
    SCOPED_TRACE(line + " " + shape.str());
    Tensor x = random_image(shape, 21);
    LayerRun r = run_layer(line, {&x}, {});
    ASSERT_EQ(r.out.shape(), Shape(shape.n, 3, shape.h, shape.w));
    EXPECT_LT(gradient_error(x, r.out, bins, gamma, sgn), 1e-3);
  }
  // Smooth regions: whole areas of equal channels (ties everywhere) still give one channel's
  // gradient, never a mix.
  Tensor flat(Shape(2, 3, 15, 11));
  for (size_t i = 0; i < flat.numel(); ++i) flat[i] = float((i % 11) * 7 % 256) / 255.f;
  LayerRun r = run_layer("y = hog_gradient(x0)", {&flat}, {});
  EXPECT_LT(gradient_error(flat, r.out, 9, true, false), 1e-3);
}

TEST(HogBlocks, MatchesFloat64) {
  for (const auto& [shape, cell, cells, stride] : std::vector<std::tuple<Shape, int, int, int>>{
           {Shape(2, 3, 41, 35), 8, 2, 8}, {Shape(2, 3, 29, 37), 4, 2, 3}, {Shape(2, 3, 23, 20), 3, 3, 5},
           {Shape(1, 3, 16, 16), 8, 2, 8}}) {
    const int bins = 9;
    const double sigma = cell * cells / 4.0;
    SCOPED_TRACE(shape.str() + " cell=" + std::to_string(cell) + " cells=" + std::to_string(cells));
    Tensor g = random_gradient(shape, bins, 31);
    const std::string line = "y = hog_blocks(x0) cell=" + std::to_string(cell) + " cells=" +
                             std::to_string(cells) + " stride=" + std::to_string(stride);
    LayerRun r = run_layer(line, {&g}, {});
    EXPECT_LT(rel_error(r.out.view(), ref_blocks(g, cell, cells, stride, bins, sigma, 0.2)), 1e-5);
  }
}

TEST(LinearWindow, MatchesFloat64AcrossBands) {
  // 37 rows of output span three 16-row bands of the CPU path.
  for (const auto& [shape, out, kh, kw] : std::vector<std::tuple<Shape, int, int, int>>{
           {Shape(2, 5, 40, 11), 3, 4, 3}, {Shape(2, 36, 17, 9), 1, 15, 7}, {Shape(1, 2, 3, 4), 2, 3, 4}}) {
    SCOPED_TRACE(shape.str());
    Tensor x = random_tensor(shape, 41);
    std::map<std::string, Tensor> p;
    p["weight"] = random_tensor(Shape(out, shape.c, kh, kw), 42);
    p["bias"] = random_tensor(Shape(out, 1, 1, 1), 43);
    const Ref w = to_ref(p["weight"].view()), b = to_ref(p["bias"].view()), xr = to_ref(x.view());
    LayerRun r = run_layer("y = linear_window(x0) out=" + std::to_string(out) + " kh=" + std::to_string(kh) +
                               " kw=" + std::to_string(kw),
                           {&x}, p);
    Ref want(Shape(shape.n, out, shape.h - kh + 1, shape.w - kw + 1));
    for (int n = 0; n < shape.n; ++n)
      for (int o = 0; o < out; ++o)
        for (int y = 0; y < want.shape.h; ++y)
          for (int xx = 0; xx < want.shape.w; ++xx) {
            double s = b.v[size_t(o)];
            for (int c = 0; c < shape.c; ++c)
              for (int i = 0; i < kh; ++i)
                for (int j = 0; j < kw; ++j) s += w.at(o, c, i, j) * xr.at(n, c, y + i, xx + j);
            want.at(n, o, y, xx) = s;
          }
    EXPECT_LT(rel_error(r.out.view(), want), 1e-5);
  }
}

TEST(Hog, ClearErrors) {
  Tensor two = random_image(Shape(1, 2, 9, 9), 1);
  EXPECT_THROW(run_layer("y = hog_gradient(x0)", {&two}, {}), Error);
  Tensor g = random_gradient(Shape(1, 3, 15, 40), 9, 2);
  try {
    run_layer("y = hog_blocks(x0)", {&g}, {});
    ADD_FAILURE() << "a 40x15 gradient made 16x16 blocks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least 16x16"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_layer("y = hog_blocks(x0) cells=5", {&g}, {}), Error);
  EXPECT_THROW(run_layer("y = hog_gradient(x0) bins=1", {&two}, {}), Error);
  Tensor x = random_tensor(Shape(1, 4, 5, 5), 3);
  std::map<std::string, Tensor> p;
  p["weight"] = random_tensor(Shape(1, 4, 6, 2), 4);
  p["bias"] = random_tensor(Shape(1, 1, 1, 1), 5);
  EXPECT_THROW(run_layer("y = linear_window(x0) kh=6 kw=2", {&x}, p), Error);
}

// Two channels of equal magnitude: the later one (blue over green over red) gives the gradient,
// as OpenCV 4.6 chooses (the pixel's orientation tells which won: horizontal 0 deg vs vertical 90).
TEST(HogGradient, TiesGoToTheLaterChannel) {
  for (const auto& [horizontal, vertical] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {0, 2}, {2, 1}}) {
    Tensor x(Shape(1, 3, 5, 5), 100.f / 255.f);
    auto set = [&](int k, int r, int c, int v) { x[(size_t(k) * 5 + r) * 5 + c] = float(v) / 255.f; };
    set(horizontal, 2, 3, 110);  // d/dx in the horizontal channel
    set(vertical, 3, 2, 110);    // d/dy of the same size in the vertical one
    LayerRun r = run_layer("y = hog_gradient(x0)", {&x}, {});
    const float bin = r.out[(2 * 5 + 2) * 5 + 2];
    // 90 degrees falls on bin 4 (centres at 10, 30, ..., 170); 0 degrees between bins 8 and 0.
    EXPECT_EQ(bin, std::max(horizontal, vertical) == vertical ? 4.f : 8.f)
        << "horizontal channel " << horizontal << ", vertical " << vertical;
  }
}
