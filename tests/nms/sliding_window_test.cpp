// The sliding-window head on the CPU: window scores against a float64 brute-force mean (bound
// 1e-6, the fixed-point step is 2^-20), box geometry, and a blob found where it is.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nms/sliding_window.h"

using namespace scenelab::nms;

namespace {

std::vector<float> blob_map(int H, int W, uint32_t seed, int y0, int x0, int bh, int bw) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 0.3f);
  std::vector<float> p(size_t(H) * W);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      p[size_t(y) * W + x] = (y >= y0 && y < y0 + bh && x >= x0 && x < x0 + bw) ? 0.95f : u(rng);
  return p;
}

}  // namespace

TEST(SlidingWindow, ScoresMatchBruteForceMean) {
  const int H = 37, W = 53;
  auto p = blob_map(H, W, 1, 10, 20, 9, 14);
  WindowHeadOptions o;
  o.sizes = {{3, 3}, {5, 9}, {8, 8}};
  o.stride = 1;
  o.threshold = 0.f;  // every window is a candidate
  MapGeometry g;      // identity
  auto cand = window_candidates_cpu(p.data(), H, W, 0, o, g, W, H);
  size_t k = 0;
  for (const auto& [h, w] : o.sizes)
    for (int y = 0; y + h <= H; ++y)
      for (int x = 0; x + w <= W; ++x, ++k) {
        ASSERT_LT(k, cand.size());
        double s = 0;
        for (int yy = y; yy < y + h; ++yy)
          for (int xx = x; xx < x + w; ++xx) s += p[size_t(yy) * W + xx];
        ASSERT_NEAR(cand[k].score, s / (h * w), 1e-6) << "window " << h << "x" << w << " at " << y << "," << x;
        ASSERT_FLOAT_EQ(cand[k].box.x1, std::max(0.f, x - 0.5f));
        ASSERT_FLOAT_EQ(cand[k].box.y2, std::min(float(H), y + h - 0.5f));
      }
  EXPECT_EQ(k, cand.size());
}

TEST(SlidingWindow, GeometryMapsToInputPixels) {
  std::vector<float> p(20 * 30, 1.f);
  WindowHeadOptions o;
  o.sizes = {{4, 5}};
  o.stride = 100;  // only the window at (0, 0)
  MapGeometry g{4, 4, 1.5, 1.5};
  auto cand = window_candidates_cpu(p.data(), 20, 30, 3, o, g, 1000, 1000);
  ASSERT_EQ(cand.size(), 1u);
  EXPECT_FLOAT_EQ(cand[0].box.x1, 0.f);           // 1.5 - 2 clamped to 0
  EXPECT_FLOAT_EQ(cand[0].box.x2, 1.5f + 4 * 4.5f);  // right edge of map pixel 4
  EXPECT_FLOAT_EQ(cand[0].box.y2, 1.5f + 4 * 3.5f);
  EXPECT_EQ(cand[0].cls, 3);
  EXPECT_FLOAT_EQ(cand[0].score, 1.f);
}

TEST(SlidingWindow, FindsTheBlobAndFusesItsWindows) {
  const int H = 60, W = 80;
  auto p = blob_map(H, W, 2, 20, 30, 12, 24);
  WindowHeadOptions o;
  MapGeometry g{4, 4, 1.5, 1.5};
  auto det = detect_windows_cpu(p.data(), H, W, 8, o, g, 320, 240);
  ASSERT_GE(det.size(), 1u);
  Box truth{1.5f + 4 * 29.5f, 1.5f + 4 * 19.5f, 1.5f + 4 * 53.5f, 1.5f + 4 * 31.5f};
  EXPECT_GT(overlap(det[0].box, truth, Criterion::IoU), 0.5f);
  for (size_t a = 0; a < det.size(); ++a)
    for (size_t b = a + 1; b < det.size(); ++b)
      EXPECT_LE(overlap(det[b].box, det[a].box, o.nms.criterion), o.nms.threshold);
  std::vector<float> flat(size_t(H) * W, 0.1f);
  EXPECT_TRUE(detect_windows_cpu(flat.data(), H, W, 8, o, g, 320, 240).empty());
}
