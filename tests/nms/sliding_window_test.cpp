// The sliding-window head on the CPU: window objectness against a float64 brute force (bound
// 1e-6, the fixed-point step is 2^-20) with and without the ring, box geometry, and hand-made
// probability maps: one blob, two blobs apart, two touching blobs (one object, as the ground
// truth's connected components count it), a blob at the border, an empty map.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "nms/sliding_window.h"

using namespace scenelab::nms;

namespace {

struct Rect {
  int y0, x0, h, w;
};

std::vector<float> blobs_map(int H, int W, uint32_t seed, const std::vector<Rect>& blobs) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 0.3f), v(0.85f, 1.f);
  std::vector<float> p(size_t(H) * W);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      bool in = false;
      for (const auto& b : blobs) in = in || (y >= b.y0 && y < b.y0 + b.h && x >= b.x0 && x < b.x0 + b.w);
      p[size_t(y) * W + x] = in ? v(rng) : u(rng);
    }
  return p;
}

// The input-image box of map rows [y0, y0+h), columns [x0, x0+w) under geometry g.
Box map_box(const Rect& r, const MapGeometry& g) {
  return {float(g.offset_x + g.stride_x * (r.x0 - 0.5)), float(g.offset_y + g.stride_y * (r.y0 - 0.5)),
          float(g.offset_x + g.stride_x * (r.x0 + r.w - 0.5)),
          float(g.offset_y + g.stride_y * (r.y0 + r.h - 0.5))};
}

}  // namespace

TEST(SlidingWindow, ObjectnessMatchesBruteForce) {
  const int H = 37, W = 53;
  auto p = blobs_map(H, W, 1, {{10, 20, 9, 14}});
  for (float ring : {0.f, 0.25f, 0.5f}) {
    WindowHeadOptions o;
    o.sizes = {{3, 3}, {5, 9}, {8, 8}, {9, 14}};
    o.stride_frac = 0;
    o.stride = 1;
    o.ring = ring;
    o.threshold = -2.f;  // every window is a candidate
    o.min_area = 0;      // every size, scored by objectness alone
    o.size_weight = 0;
    MapGeometry g;       // identity
    auto cand = window_candidates_cpu(p.data(), H, W, 0, o, g, W, H);
    auto sum = [&](int y0, int x0, int y1, int x1) {
      double s = 0;
      for (int yy = y0; yy < y1; ++yy)
        for (int xx = x0; xx < x1; ++xx) s += p[size_t(yy) * W + xx];
      return s;
    };
    size_t k = 0;
    for (const auto& [h, w] : o.sizes)
      for (int y = 0; y + h <= H; ++y)
        for (int x = 0; x + w <= W; ++x, ++k) {
          ASSERT_LT(k, cand.size());
          const double in = sum(y, x, y + h, x + w);
          double want = in / (h * w);
          if (ring > 0) {  // minus the largest mean of the ring's four strips
            const int ry = std::max(1, int(ring * h + 0.5f)), rx = std::max(1, int(ring * w + 0.5f));
            const int y0 = std::max(0, y - ry), x0 = std::max(0, x - rx);
            const int y1 = std::min(H, y + h + ry), x1 = std::min(W, x + w + rx);
            double side = 0;
            for (const auto& [a0, b0, a1, b1] : std::vector<std::array<int, 4>>{
                     {y0, x0, y, x1}, {y + h, x0, y1, x1}, {y, x0, y + h, x}, {y, x + w, y + h, x1}})
              if (a1 > a0 && b1 > b0) side = std::max(side, sum(a0, b0, a1, b1) / (double(a1 - a0) * (b1 - b0)));
            want -= side;
          }
          ASSERT_NEAR(cand[k].score, want, 1e-6) << "ring " << ring << " window " << h << "x" << w << " at " << y << "," << x;
          ASSERT_FLOAT_EQ(cand[k].box.x1, std::max(0.f, x - 0.5f));
          ASSERT_FLOAT_EQ(cand[k].box.y2, std::min(float(H), y + h - 0.5f));
        }
    EXPECT_EQ(k, cand.size());
  }
}

TEST(SlidingWindow, GeometryMapsToInputPixels) {
  std::vector<float> p(20 * 30, 1.f);
  WindowHeadOptions o;
  o.sizes = {{4, 5}};
  o.stride_frac = 0;
  o.stride = 100;  // only the window at (0, 0)
  o.ring = 0;
  o.min_area = 0;
  o.size_weight = 0;
  MapGeometry g{4, 4, 1.5, 1.5};
  auto cand = window_candidates_cpu(p.data(), 20, 30, 3, o, g, 1000, 1000);
  ASSERT_EQ(cand.size(), 1u);
  EXPECT_FLOAT_EQ(cand[0].box.x1, 0.f);           // 1.5 - 2 clamped to 0
  EXPECT_FLOAT_EQ(cand[0].box.x2, 1.5f + 4 * 4.5f);  // right edge of map pixel 4
  EXPECT_FLOAT_EQ(cand[0].box.y2, 1.5f + 4 * 3.5f);
  EXPECT_EQ(cand[0].cls, 3);
  EXPECT_FLOAT_EQ(cand[0].score, 1.f);
}

TEST(SlidingWindow, HandMadeMapsGiveTheExpectedBoxes) {
  const int H = 60, W = 80;
  const MapGeometry g{4, 4, 1.5, 1.5};
  const WindowHeadOptions o;  // the defaults
  auto expect_boxes = [&](const std::vector<float>& p, const std::vector<Rect>& want, const char* what) {
    SCOPED_TRACE(what);
    const auto det = detect_windows_cpu(p.data(), H, W, 8, o, g, W * 4, H * 4);
    ASSERT_EQ(det.size(), want.size());
    std::vector<bool> used(want.size(), false);
    for (const auto& d : det) {
      float best = 0;
      size_t bi = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const float iou = overlap(d.box, map_box(want[i], g), Criterion::IoU);
        if (!used[i] && iou > best) best = iou, bi = i;
      }
      EXPECT_GT(best, 0.7f) << "a box matches no blob well";
      used[bi] = true;
      EXPECT_EQ(d.cls, 8);
    }
  };
  expect_boxes(blobs_map(H, W, 2, {{20, 30, 12, 24}}), {{20, 30, 12, 24}}, "one blob");
  expect_boxes(blobs_map(H, W, 3, {{10, 8, 14, 10}, {30, 50, 9, 20}}), {{10, 8, 14, 10}, {30, 50, 9, 20}},
               "two blobs apart");
  expect_boxes(blobs_map(H, W, 4, {{20, 20, 12, 12}, {20, 32, 12, 12}}), {{20, 20, 12, 24}},
               "two touching blobs: one region");
  expect_boxes(blobs_map(H, W, 5, {{0, 60, 10, 20}}), {{0, 60, 10, 20}}, "a blob at the border");
  std::vector<float> flat(size_t(H) * W, 0.1f);
  expect_boxes(flat, {}, "empty");
}

// Sizes whose box on the input is below min_area are not slid; a candidate's score is its
// objectness plus size_weight * ln(area / min_area), area = the window's extent in input pixels.
TEST(SlidingWindow, MinAreaDropsSizesAndTheSizeWeightFavoursLargerWindows) {
  const int H = 31, W = 43;
  auto p = blobs_map(H, W, 6, {{8, 10, 12, 16}});
  const MapGeometry g{3, 5, 1, 2};  // unequal strides: the area is h * 3 * w * 5
  WindowHeadOptions plain;
  plain.sizes = {{2, 2}, {4, 3}, {6, 8}, {12, 16}};
  plain.stride_frac = 0;
  plain.threshold = -2.f;
  plain.min_area = 0;
  plain.size_weight = 0;
  WindowHeadOptions o = plain;
  o.min_area = 200;  // 2x2: 60 input pixels and 4x3: 180 are dropped; 6x8: 720, 12x16: 2880 stay
  o.size_weight = 0.05f;
  const auto all = window_candidates_cpu(p.data(), H, W, 1, plain, g, 200, 100);
  const auto some = window_candidates_cpu(p.data(), H, W, 1, o, g, 200, 100);
  // The kept sizes' windows, in the same order, scores raised by their size's bonus.
  const size_t dropped = size_t((H - 1) * (W - 1) + (H - 3) * (W - 2));
  ASSERT_EQ(all.size(), dropped + some.size());
  for (size_t i = 0; i < some.size(); ++i) {
    const Detection& a = all[dropped + i];
    const double area = i < size_t((H - 5) * (W - 7)) ? 6 * 3 * 8 * 5 : 12 * 3 * 16 * 5;  // 6x8 windows first
    ASSERT_EQ(std::memcmp(&some[i].box, &a.box, sizeof(Box)), 0) << i;
    ASSERT_NEAR(some[i].score, a.score + 0.05 * std::log(area / 200.0), 1e-6) << i;
  }
  // The bonus is what slid_sizes reports, and nothing below min_area is slid.
  const auto z = slid_sizes(H, W, o, &g);
  ASSERT_EQ(z.size(), 2u);
  EXPECT_EQ(z[0].h, 6);
  EXPECT_FLOAT_EQ(z[0].bonus, float(0.05 * std::log(720.0 / 200.0)));
  EXPECT_FLOAT_EQ(z[1].bonus, float(0.05 * std::log(2880.0 / 200.0)));
  EXPECT_EQ(slid_sizes(H, W, o, nullptr).size(), 4u) << "no geometry: every size that fits (buffer bounds)";
  // Detections: the blob's tight 12x16 window outranks the 6x8 windows inside it by more now.
  const auto det = detect_windows_cpu(p.data(), H, W, 1, o, g, 200, 100);
  ASSERT_FALSE(det.empty());
  EXPECT_FLOAT_EQ(det[0].box.x1, float(2 + 5 * (10 - 0.5)));
  EXPECT_FLOAT_EQ(det[0].box.y2, float(1 + 3 * (20 - 0.5)));
}

TEST(SlidingWindow, SettingsFromText) {
  WindowHeadOptions o;
  parse_window_spec("threshold=0.4 ring=0.3 nms=0.6 heights=4,8 aspects=0.5,2 stride=0.5", o);
  EXPECT_FLOAT_EQ(o.threshold, 0.4f);
  EXPECT_FLOAT_EQ(o.ring, 0.3f);
  EXPECT_FLOAT_EQ(o.nms.threshold, 0.6f);
  EXPECT_FLOAT_EQ(o.stride_frac, 0.5f);
  EXPECT_EQ(o.sizes, (std::vector<std::pair<int, int>>{{8, 4}, {8, 16}, {4, 2}, {4, 8}}));
  EXPECT_THROW(parse_window_spec("threshold=abc", o), std::invalid_argument);
  EXPECT_THROW(parse_window_spec("colour=red", o), std::invalid_argument);
  EXPECT_THROW(parse_window_spec("heights=0", o), std::invalid_argument);
  parse_window_spec("min_area=250 size_weight=0.1", o);
  EXPECT_FLOAT_EQ(o.min_area, 250.f);
  EXPECT_FLOAT_EQ(o.size_weight, 0.1f);
  EXPECT_THROW(parse_window_spec("min_area=-1", o), std::invalid_argument);
  EXPECT_THROW(parse_window_spec("threshold=0.9 aspects=0", o), std::invalid_argument);
  EXPECT_FLOAT_EQ(o.min_area, 250.f);  // a refused text changes nothing
  EXPECT_FLOAT_EQ(o.threshold, 0.4f);
  // Settings layered (the model's, then --spec): heights alone keep the aspects, and the reverse.
  parse_window_spec("heights=6", o);
  EXPECT_EQ(o.sizes, (std::vector<std::pair<int, int>>{{6, 3}, {6, 12}}));
  parse_window_spec("aspects=1", o);
  EXPECT_EQ(o.sizes, (std::vector<std::pair<int, int>>{{6, 6}}));
  EXPECT_EQ(WindowHeadOptions{}.sizes, WindowHeadOptions::default_sizes());
}

// A model file's settings are untrusted: values whose window sizes, rings or strides would
// overflow the head's int arithmetic (3e9 as a height was converted to int, undefined), lists
// long enough to make the size set quadratic, and fractional heights are refused by name, and
// a refused text changes nothing.
TEST(SlidingWindow, SettingsOutsideTheirRangesAreRefused) {
  WindowHeadOptions o;
  parse_window_spec("heights=6,8 aspects=0.5,2 ring=0.3", o);
  const WindowHeadOptions before = o;
  auto refused = [&](const std::string& spec, const std::string& why) {
    try {
      parse_window_spec(spec, o);
      ADD_FAILURE() << spec << ": accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << spec << ": " << e.what();
    }
    EXPECT_EQ(o.sizes, before.sizes) << spec;
    EXPECT_EQ(o.heights, before.heights) << spec;
    EXPECT_FLOAT_EQ(o.ring, before.ring) << spec;
    EXPECT_FLOAT_EQ(o.threshold, before.threshold) << spec;
  };
  refused("heights=3e9", "heights=3e9 is outside [1, 16384]");
  refused("heights=16385", "outside [1, 16384]");
  refused("heights=0", "heights=0 is outside");
  refused("heights=4,5.5", "heights=4,5.5: 5.5 is not a whole number");
  refused("aspects=2000", "aspects=2000 is outside [0.000976562, 1024]");
  refused("aspects=0.0001", "outside [0.000976562, 1024]");
  refused("ring=-1", "ring=-1 is outside [0, 16]");
  refused("ring=1e30", "ring=1e30 is outside [0, 16]");
  refused("stride=-0.5", "stride=-0.5 is outside [0, 16]");
  refused("nms=1.5", "nms=1.5 is outside [0, 1]");
  refused("min_area=-1", "min_area=-1 is outside");
  refused("threshold=0.5 ring=inf", "'inf' is not a number");
  refused("threshold=1e39", "'1e39' is not a number");  // past float's range
  std::string many = "heights=1";
  for (int h = 2; h <= 65; ++h) many += "," + std::to_string(h);
  refused(many, "heights lists more than 64 values");
  // The largest accepted values keep every sum in range, and a repeated key replaces its list.
  parse_window_spec("heights=16384 aspects=1024 ring=16 stride=16 nms=1 min_area=0", o);
  EXPECT_EQ(o.sizes, (std::vector<std::pair<int, int>>{{16384, 16384 * 1024}}));
  parse_window_spec("heights=4 heights=6", o);
  EXPECT_EQ(o.heights, std::vector<int>{6});
}
