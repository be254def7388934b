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
  const auto sets = test::adversarial_sets();
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
