// Random and clustered box sets shared by the CPU and GPU NMS tests (many equal scores).
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nms/nms.h"

namespace scenelab::test {

// About 20 boxes per object when clustered; scores rounded to 1/score_steps so ties are common.
inline std::vector<nms::Detection> make_box_set(int n, uint32_t seed, bool clustered,
                                                int classes = 1, int score_steps = 100) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<nms::Box> objects;
  for (int k = 0; k < std::max(1, n / 20); ++k) {
    float w = 20 + 200 * u(rng), h = 20 + 200 * u(rng), x = 1700 * u(rng), y = 860 * u(rng);
    objects.push_back({x, y, x + w, y + h});
  }
  std::vector<nms::Detection> d;
  for (int i = 0; i < n; ++i) {
    nms::Box b;
    if (clustered) {
      const nms::Box& c = objects[size_t(i) % objects.size()];
      const float w = c.x2 - c.x1, h = c.y2 - c.y1, dx = (u(rng) - 0.5f) * 0.3f * w,
                  dy = (u(rng) - 0.5f) * 0.3f * h, s = 0.8f + 0.4f * u(rng);
      b = {c.x1 + dx, c.y1 + dy, c.x1 + dx + w * s, c.y1 + dy + h * s};
    } else {
      const float w = 5 + 150 * u(rng), h = 5 + 150 * u(rng), x = 1900 * u(rng), y = 1060 * u(rng);
      b = {x, y, x + w, y + h};
    }
    d.push_back({b, std::round(u(rng) * score_steps) / score_steps, int(u(rng) * classes)});
  }
  return d;
}


// The sets an exact greedy NMS must get right whatever its binning: one huge box over many small
// ones, all boxes identical, long thin boxes spanning many cells, coordinates near the float
// limits with non-finite scores and coordinates and degenerate boxes, and a tiny median box
// (most boxes far larger than a cell of its size). Each about 3,000-4,000 boxes.
inline std::vector<std::pair<std::string, std::vector<nms::Detection>>> adversarial_sets() {
  using nms::Detection;
  const float big = 3.0e38f, inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<std::pair<std::string, std::vector<Detection>>> sets;
  {  // one huge box over many small ones, ranked anywhere
    auto d = make_box_set(3000, 11, false);
    d.push_back({{-10, -10, 5000, 5000}, 0.5f, 0});
    d.insert(d.begin() + 100, {{-10, -10, 5000, 5000}, 0.99f, 0});
    sets.emplace_back("huge box", d);
  }
  {  // every box the same
    std::vector<Detection> d(3000, Detection{{10, 20, 60, 90}, 0.5f, 0});
    for (size_t i = 0; i < d.size(); i += 7) d[i].score = 0.25f;
    sets.emplace_back("identical", d);
  }
  {  // long thin boxes spanning many cells among small ones
    auto d = make_box_set(3000, 12, true);
    for (int i = 0; i < 300; ++i) {
      const float y = 1000 * u(rng), x = 1800 * u(rng);
      d.push_back({{0, y, 1900, y + 3}, u(rng), 0});
      d.push_back({{x, 0, x + 4, 1000}, u(rng), 0});
    }
    sets.emplace_back("spanning", d);
  }
  {  // coordinates near the float limits, non-finite scores and coordinates, degenerate boxes
    auto d = make_box_set(3000, 13, true);
    d.push_back({{-big, -big, big, big}, 0.7f, 0});
    d.push_back({{big * 0.5f, big * 0.5f, big, big}, 0.9f, 0});
    d.push_back({{big * 0.5f, big * 0.5f, big * 0.9f, big * 0.9f}, 0.8f, 0});
    d.push_back({{-inf, 0, inf, 100}, 0.6f, 0});
    d.push_back({{0, 0, inf, inf}, 0.95f, 0});
    d.push_back({{nan, 0, 100, 100}, 0.9f, 0});
    d.push_back({{0, 0, 100, 100}, nan, 0});
    d.push_back({{0, 0, 100, 100}, inf, 0});
    d.push_back({{0, 0, 100, 100}, -inf, 0});
    d.push_back({{50, 50, 50, 80}, 0.99f, 0});   // zero width
    d.push_back({{80, 80, 40, 40}, 0.98f, 0});   // inverted
    d.push_back({{1e-30f, 1e-30f, 2e-30f, 2e-30f}, 0.97f, 0});  // tiny
    for (int i = 0; i < 50; ++i) d.push_back({{u(rng) * 1e30f, u(rng) * 1e30f, 1e31f, 1e31f}, u(rng), 0});
    sets.emplace_back("limits", d);
  }
  {  // a tiny median box: most boxes far larger than the cells
    std::vector<Detection> d;
    for (int i = 0; i < 2000; ++i) d.push_back({{u(rng), u(rng), u(rng) + 0.01f, u(rng) + 0.01f}, u(rng), 0});
    for (int i = 0; i < 1500; ++i) {
      const float x = 100 * u(rng), y = 100 * u(rng);
      d.push_back({{x, y, x + 10 + 20 * u(rng), y + 10 + 20 * u(rng)}, u(rng), 0});
    }
    sets.emplace_back("tiny median", d);
  }
  return sets;
}

}  // namespace scenelab::test
