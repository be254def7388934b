// Random and clustered box sets shared by the CPU and GPU NMS tests (many equal scores).
#pragma once
#include <algorithm>
#include <cmath>
#include <random>
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

}  // namespace scenelab::test
