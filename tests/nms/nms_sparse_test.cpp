// The sparse exact greedy NMS (nms/nms_sparse.cpp) against the plain greedy loop, index for
// index: random and clustered sets, every option (IoU and over-candidate, the +1 convention, per
// class, score threshold, top-k, thresholds from negative to 0.95), and the adversarial sets: one
// huge box over all, all boxes identical, boxes spanning many cells, coordinates near float
// limits, non-finite scores and coordinates, zero-area and inverted boxes, one tiny box among
// huge ones (a median cell far too small for most). The batched form against each image alone.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "nms/nms.h"
#include "tests/nms/box_sets.h"

using namespace scenelab;
using nms::Detection;

namespace {

void expect_same(const std::vector<Detection>& d, const nms::Options& o, const std::string& what) {
  const auto want = nms::greedy_nms(d, o);
  const auto got = nms::greedy_nms_sparse(d, o);
  ASSERT_EQ(got, want) << what << " (n " << d.size() << ", threshold " << o.threshold << ")";
  ASSERT_EQ(nms::greedy_nms_auto(d, o), want) << what;
}

std::vector<nms::Options> option_sets() {
  std::vector<nms::Options> all;
  for (float t : {-0.1f, 0.f, 0.3f, 0.5f, 0.95f}) {
    nms::Options o;
    o.threshold = t;
    all.push_back(o);
  }
  nms::Options c;
  c.criterion = nms::Criterion::OverCandidate;
  c.threshold = 0.6f;
  all.push_back(c);
  nms::Options p;
  p.pixel_inclusive = true;
  all.push_back(p);
  nms::Options k;
  k.per_class = true;
  k.max_outputs = 37;
  k.score_threshold = 0.2f;
  all.push_back(k);
  return all;
}

}  // namespace

TEST(NmsSparse, EqualsGreedyOnRandomAndClusteredSets) {
  for (int n : {1, 7, 300, 2500, 9000})
    for (bool clustered : {false, true})
      for (const auto& o : option_sets())
        expect_same(test::make_box_set(n, uint32_t(n) + (clustered ? 1u : 0u), clustered, 3), o,
                    clustered ? "clustered" : "random");
}

TEST(NmsSparse, EqualsGreedyOnAdversarialSets) {
  const float big = 3.0e38f, inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<std::pair<std::string, std::vector<Detection>>> sets;
  {  // one huge box over many small ones, ranked anywhere
    auto d = test::make_box_set(3000, 11, false);
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
    auto d = test::make_box_set(3000, 12, true);
    for (int i = 0; i < 300; ++i) {
      const float y = 1000 * u(rng), x = 1800 * u(rng);
      d.push_back({{0, y, 1900, y + 3}, u(rng), 0});
      d.push_back({{x, 0, x + 4, 1000}, u(rng), 0});
    }
    sets.emplace_back("spanning", d);
  }
  {  // coordinates near the float limits, non-finite scores and coordinates, degenerate boxes
    auto d = test::make_box_set(3000, 13, true);
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
  for (const auto& [name, d] : sets)
    for (const auto& o : option_sets()) expect_same(d, o, name);
}

TEST(NmsSparse, BatchedEqualsEachImageAlone) {
  const int batch = 5, n = 2600;
  std::vector<float> boxes(size_t(batch) * n * 4), scores(size_t(batch) * n);
  std::vector<int64_t> classes(size_t(batch) * n), valid{n, 0, 17, 2100, n};
  std::vector<std::vector<Detection>> images;
  for (int b = 0; b < batch; ++b) {
    auto d = test::make_box_set(n, 40u + uint32_t(b), b % 2 == 0, 2);
    for (int i = 0; i < n; ++i) {
      const size_t k = size_t(b) * n + size_t(i);
      boxes[4 * k] = d[size_t(i)].box.x1, boxes[4 * k + 1] = d[size_t(i)].box.y1;
      boxes[4 * k + 2] = d[size_t(i)].box.x2, boxes[4 * k + 3] = d[size_t(i)].box.y2;
      scores[k] = d[size_t(i)].score;
      classes[k] = d[size_t(i)].cls;
    }
    d.resize(size_t(valid[size_t(b)]));
    images.push_back(d);
  }
  for (bool per_class : {false, true}) {
    nms::Options o;
    o.per_class = per_class;
    for (int threads : {1, 3}) {
      const auto got = nms::batched_greedy_nms(boxes.data(), scores.data(), per_class ? classes.data() : nullptr,
                                               valid.data(), batch, n, o, threads);
      ASSERT_EQ(got.size(), size_t(batch));
      for (int b = 0; b < batch; ++b) EXPECT_EQ(got[size_t(b)], nms::greedy_nms(images[size_t(b)], o)) << "image " << b;
    }
  }
  const std::vector<int64_t> bad{n, n + 1, 0, 0, 0};
  EXPECT_THROW(nms::batched_greedy_nms(boxes.data(), scores.data(), nullptr, bad.data(), batch, n, nms::Options{}),
               std::invalid_argument);
  EXPECT_TRUE(nms::batched_greedy_nms(nullptr, nullptr, nullptr, nullptr, 0, 0, nms::Options{}).empty());
}
