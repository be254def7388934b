// PyramidDetector on the shipped HOG model (weights/hog-people.h5): OpenCV's level rule, boxes at
// the level's scale, each fusion rule against the NMS rules it names, grey / RGBA / RGB alike,
// images smaller than a window, bad specs. (OpenCV itself: tests/tools/peer_hog_test.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <random>

#include "core/error.h"
#include "job/pyramid_detector.h"
#include "engine/resize_linear.h"
#include "weights/model_file.h"

using namespace scenelab;

namespace {

Model hog_model() { return read_model(std::string(SCENELAB_SOURCE_DIR) + "/weights/hog-people.h5"); }

// A smooth random image with a few bright vertical bars (strong gradients, some windows fire).
std::vector<uint8_t> test_image(int h, int w, int c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> px(size_t(h) * w * c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) {
        const bool bar = (x / 9) % 5 == 0 && (y / 40) % 2 == 0;
        px[(size_t(y) * w + x) * c + k] = uint8_t(bar ? 230 : 40 + (x + 3 * y + 17 * k) % 60 + rng() % 8);
      }
  return px;
}

}  // namespace

TEST(PyramidDetector, LevelsFollowOpenCVsRule) {
  Model m = hog_model();
  CpuBackend cpu(2);
  PyramidDetector det(m, cpu);
  for (auto [w, h] : std::vector<std::pair<int, int>>{{640, 480}, {1920, 1080}, {64, 128}, {65, 300}, {30, 20}}) {
    const auto s = det.level_scales(h, w);
    // Independently: levels while the rounded size holds 64x128, at most 64; always one.
    std::vector<double> want;
    double scale = 1;
    for (int l = 0; l < 64 && std::nearbyint(w / scale) >= 64 && std::nearbyint(h / scale) >= 128; ++l) {
      want.push_back(scale);
      scale *= 1.05;
    }
    if (want.empty()) want.push_back(1.0);
    ASSERT_EQ(s.size(), want.size()) << w << "x" << h;
    for (size_t i = 0; i < s.size(); ++i) EXPECT_DOUBLE_EQ(s[i], want[i]);
  }
  EXPECT_EQ(det.level_scales(480, 640).size(), 28u);
}

TEST(PyramidDetector, HitsFusionAndChannels) {
  Model m = hog_model();
  CpuBackend cpu(2);
  const int h = 301, w = 237;
  const auto rgb = test_image(h, w, 3, 1);
  // The threshold: the score of the 100th best window (every window scored first).
  PyramidDetector all(m, cpu, "fusion=none threshold=-1e30");
  std::vector<float> scores;
  for (const auto& x : all.hits(rgb.data(), h, w, 3)) scores.push_back(x.det.score);
  ASSERT_GT(scores.size(), 300u);
  std::sort(scores.begin(), scores.end(), std::greater<float>());
  const float thr = scores[99];
  const std::string t = " threshold=" + std::to_string(thr);
  PyramidDetector none(m, cpu, "fusion=none" + t);
  const auto hits = none.hits(rgb.data(), h, w, 3);
  ASSERT_GE(hits.size(), 90u);  // about 100 (the threshold printed to 6 decimals)
  // Each hit: a level's window (64x128 times the level's scale), inside the image, score >= the threshold.
  const auto scales = none.level_scales(h, w);
  for (const auto& x : hits) {
    ASSERT_GE(x.level, 0);
    ASSERT_LT(size_t(x.level), scales.size());
    const double s = scales[size_t(x.level)];
    EXPECT_EQ(x.det.box.x2 - x.det.box.x1, float(std::nearbyint(64 * s)));
    EXPECT_EQ(x.det.box.y2 - x.det.box.y1, float(std::nearbyint(128 * s)));
    EXPECT_GE(x.det.box.x1, 0.f);
    EXPECT_GE(x.det.score, thr - 1e-5f);
  }
  // Greedy and Oro give what the NMS rules give on the same hits (boxes already inside).
  std::vector<nms::Detection> d;
  for (const auto& x : hits) d.push_back(x.det);
  PyramidDetector greedy(m, cpu, "fusion=greedy overlap=0.3" + t);
  nms::Options o;
  o.threshold = 0.3f;
  const auto g = greedy.detect(rgb.data(), h, w, 3);
  const auto keep = nms::greedy_nms(d, o);
  ASSERT_EQ(g.size(), keep.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i].score, d[size_t(keep[i])].score);
  PyramidDetector oro(m, cpu, "fusion=oro overlap=0.3" + t);
  o.criterion = nms::Criterion::OverCandidate;
  EXPECT_EQ(oro.detect(rgb.data(), h, w, 3).size(), nms::fast_nms(d, o).size());
  PyramidDetector group(m, cpu, "fusion=group" + t);
  EXPECT_EQ(group.detect(rgb.data(), h, w, 3).size(), nms::group_rectangles(d, 2, 0.2f).size());
  // Grey equals its three equal channels; RGBA equals its RGB.
  const auto grey = test_image(h, w, 1, 2);
  std::vector<uint8_t> grey3(size_t(h) * w * 3), rgba(size_t(h) * w * 4);
  for (size_t i = 0; i < size_t(h) * w; ++i) {
    for (int k = 0; k < 3; ++k) grey3[i * 3 + k] = grey[i], rgba[i * 4 + k] = rgb[i * 3 + k];
    rgba[i * 4 + 3] = uint8_t(i % 256);
  }
  auto same = [](const std::vector<PyramidHit>& a, const std::vector<PyramidHit>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].det.score != b[i].det.score || a[i].det.box.x1 != b[i].det.box.x1 || a[i].level != b[i].level)
        return false;
    return true;
  };
  EXPECT_TRUE(same(none.hits(grey.data(), h, w, 1), none.hits(grey3.data(), h, w, 3)));
  EXPECT_TRUE(same(none.hits(rgba.data(), h, w, 4), hits));
  // The same detector on another size, then back: the same hits (plans per size).
  none.hits(rgb.data(), 200, 150, 3);
  EXPECT_TRUE(same(none.hits(rgb.data(), h, w, 3), hits));
}

TEST(PyramidDetector, SmallImagesAndBadInput) {
  Model m = hog_model();
  CpuBackend cpu(1);
  PyramidDetector det(m, cpu);
  const auto px = test_image(127, 300, 3, 3);
  EXPECT_TRUE(det.detect(px.data(), 127, 300, 3).empty());  // shorter than a window
  EXPECT_TRUE(det.detect(px.data(), 1, 1, 3).empty());
  EXPECT_THROW(det.detect(px.data(), 0, 5, 3), Error);
  EXPECT_THROW(det.detect(px.data(), 10, 10, 2), Error);
  for (const char* bad : {"fusion=mean", "scale=1", "window=64", "levels=0", "overlap=2", "colour=red", "scale", "candidates=0"})
    EXPECT_THROW(PyramidDetector(m, cpu, bad), Error) << bad;
  Model scene = m;
  scene.pyramid.clear();
  EXPECT_THROW(PyramidDetector(scene, cpu), Error);
}

// A model file's pyramid settings are untrusted: a scale just above 1 with 2^31 - 1 levels asked
// for a planned graph per level (a hostile file could exhaust memory), numbers past int's range
// were narrowed, and a refused text had changed the settings before it. Now each is refused by
// name and nothing changes.
TEST(PyramidDetector, SpecOutsideItsRangesIsRefusedAndChangesNothing) {
  PyramidOptions o;
  parse_pyramid_spec("window=48x96 scale=1.1 levels=20 threshold=0.5 group=3 eps=0.3 candidates=128", o);
  const PyramidOptions before = o;
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"scale=1.0000001 levels=2147483647", "levels=2147483647 is outside [1, 256]"},
           {"levels=4294967297", "levels=4294967297 is outside [1, 256]"},
           {"levels=99999999999999999999", "levels=99999999999999999999 is outside [1, 256]"},
           {"levels=12abc", "levels=12abc is not an integer"},
           {"window=64x99999", "window=99999 is outside [1, 16384]"},
           {"window=0x128", "window=0 is outside [1, 16384]"},
           {"scale=17", "scale=17 is outside (1, 16]"},
           {"threshold=1e300", "threshold=1e300 is outside [-1e+30, 1e+30]"},
           {"candidates=2147483647", "candidates=2147483647 is outside [1, 16777216]"},
           {"group=-1", "group=-1 is outside [0, 1048576]"},
           {"eps=0", "eps=0 is outside (0, 16]"},
           {"window=32x64 levels=0", "levels=0 is outside"}}) {
    try {
      parse_pyramid_spec(bad, o);
      ADD_FAILURE() << bad << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << bad << ": " << e.what();
    }
    EXPECT_EQ(o.window_w, before.window_w) << bad;  // refused: the options as they were
    EXPECT_EQ(o.window_h, before.window_h) << bad;
    EXPECT_EQ(o.levels, before.levels) << bad;
    EXPECT_EQ(o.scale, before.scale) << bad;
  }
  parse_pyramid_spec("window=16384x16384 scale=16 levels=256 candidates=16777216", o);
  EXPECT_EQ(o.levels, 256);
  EXPECT_EQ(o.candidates, 1 << 24);
}

// The CPU backend's pyramid resize: every byte equals resize_linear.h's linear_sample (OpenCV's
// INTER_LINEAR_EXACT fixed point) and lies within one step of float64 bilinear interpolation at
// the same source coordinates; batch 2, 3 channels, shrinking and enlarging, odd sizes.
TEST(PyramidDetector, CpuResizeIsTheFixedPointRule) {
  CpuBackend cpu(2);
  std::mt19937 rng(9);
  for (auto [sh, sw, h, w] : std::vector<std::array<int, 4>>{{37, 53, 29, 41}, {20, 17, 31, 23}, {5, 1, 9, 3}, {64, 128, 61, 122}}) {
    const int n = 2, c = 3;
    std::vector<uint8_t> src(size_t(n) * sh * sw * c);
    for (auto& v : src) v = uint8_t(rng() % 256);
    std::vector<float> out(size_t(n) * c * h * w, -1.f);
    cpu.resize_u8_to_float(src.data(), sh, sw, out.data(), n, c, h, w, 255.f);
    for (int b = 0; b < n; ++b)
      for (int ch = 0; ch < c; ++ch)
        for (int y = 0; y < h; ++y)
          for (int x = 0; x < w; ++x) {
            const float got = out[((size_t(b) * c + ch) * h + y) * w + x] * 255.f;
            const uint8_t want = linear_sample(src.data() + size_t(b) * sh * sw * c, sw, c, ch,
                                               linear_tap(y, sh, h), linear_tap(x, sw, w));
            ASSERT_EQ(int(std::lround(got)), int(want)) << sw << "x" << sh << " -> " << w << "x" << h;
            // float64 bilinear, edge pixels beyond the outer centres.
            auto coord = [](int d, int s, int dn) { return std::clamp((d + 0.5) * s / dn - 0.5, 0.0, double(s - 1)); };
            const double fy = coord(y, sh, h), fx = coord(x, sw, w);
            const int y0 = int(fy), x0 = int(fx), y1 = std::min(y0 + 1, sh - 1), x1 = std::min(x0 + 1, sw - 1);
            auto px = [&](int yy, int xx) { return double(src[((size_t(b) * sh + yy) * sw + xx) * c + ch]); };
            const double ref = (px(y0, x0) * (1 - (fx - x0)) + px(y0, x1) * (fx - x0)) * (1 - (fy - y0)) +
                               (px(y1, x0) * (1 - (fx - x0)) + px(y1, x1) * (fx - x0)) * (fy - y0);
            ASSERT_LE(std::abs(double(want) - ref), 1.5) << "fixed point far from bilinear";
          }
  }
}
