// CPU NMS rules: greedy checked by its defining properties (independent kept set; every dropped
// box overlaps a higher-ranked kept box), Cluster-NMS equal to greedy index for index, Fast-NMS
// equal to its own rule and a subset of greedy; adversarial inputs with defined behaviour.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "nms/nms.h"
#include "tests/nms/box_sets.h"

using namespace scenelab::nms;

namespace {


void check_greedy_properties(const std::vector<Detection>& d, const Options& o,
                             const std::vector<int>& keep) {
  std::vector<int> order = rank_order(d, o);
  std::set<int> kept(keep.begin(), keep.end());
  auto rank = [&](int i) { return int(std::find(order.begin(), order.end(), i) - order.begin()); };
  for (size_t a = 0; a < keep.size(); ++a)
    for (size_t b = a + 1; b < keep.size(); ++b) {
      ASSERT_LT(rank(keep[a]), rank(keep[b])) << "kept boxes are not in rank order";
      if (!o.per_class || d[size_t(keep[a])].cls == d[size_t(keep[b])].cls) {
        ASSERT_LE(overlap(d[size_t(keep[b])].box, d[size_t(keep[a])].box, o.criterion), o.threshold);
      }
    }
  for (int i : order) {
    if (kept.count(i)) continue;
    bool covered = false;
    for (int k : keep)
      covered = covered || (rank(k) < rank(i) && (!o.per_class || d[size_t(k)].cls == d[size_t(i)].cls) &&
                            overlap(d[size_t(i)].box, d[size_t(k)].box, o.criterion) > o.threshold);
    ASSERT_TRUE(covered) << "box " << i << " dropped without a kept box above it overlapping it";
  }
}

}  // namespace

TEST(NmsCpu, GreedyClusterFastOnRandomAndClusteredSets) {
  for (int n : {0, 1, 2, 63, 64, 65, 1000}) {
    for (bool clustered : {false, true}) {
      for (Criterion c : {Criterion::IoU, Criterion::OverCandidate}) {
        auto d = scenelab::test::make_box_set(n, uint32_t(n * 7 + clustered), clustered);
        Options o;
        o.criterion = c;
        o.threshold = 0.45f;
        auto g = greedy_nms(d, o);
        check_greedy_properties(d, o, g);
        int iters = 0;
        EXPECT_EQ(cluster_nms(d, o, &iters), g) << "n=" << n;
        EXPECT_EQ(iters >= 1, n > 0) << "one step at least, none without boxes";
        auto f = fast_nms(d, o);
        std::set<int> gs(g.begin(), g.end());
        for (int i : f) EXPECT_TRUE(gs.count(i)) << "fast NMS kept a box greedy dropped";
        if (clustered && n >= 1000) {
          EXPECT_LT(f.size(), g.size()) << "fast NMS should drop more";
        }
      }
    }
  }
}

TEST(NmsCpu, PerClassAndTopKAndScoreThreshold) {
  auto d = scenelab::test::make_box_set(1000, 3, true, 4);
  Options o;
  o.per_class = true;
  auto g = greedy_nms(d, o);
  check_greedy_properties(d, o, g);
  EXPECT_EQ(cluster_nms(d, o), g);
  // Per class equals running each class alone.
  std::set<int> merged;
  for (int c = 0; c < 4; ++c) {
    std::vector<Detection> sub;
    std::vector<int> idx;
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i].cls == c) sub.push_back(d[i]), idx.push_back(int(i));
    for (int k : greedy_nms(sub, Options{})) merged.insert(idx[size_t(k)]);
  }
  EXPECT_EQ(merged, std::set<int>(g.begin(), g.end()));
  o.max_outputs = 5;
  auto top = greedy_nms(d, o);
  ASSERT_EQ(top.size(), 5u);
  EXPECT_EQ(std::vector<int>(g.begin(), g.begin() + 5), top);
  Options t;
  t.score_threshold = 0.5f;
  for (int k : greedy_nms(d, t)) EXPECT_GE(d[size_t(k)].score, 0.5f);
}

TEST(NmsCpu, AdversarialInputs) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Options o;
  // All boxes identical, equal scores: the lowest index survives.
  std::vector<Detection> same(50, Detection{{10, 10, 50, 50}, 0.7f, 0});
  EXPECT_EQ(greedy_nms(same, o), std::vector<int>{0});
  EXPECT_EQ(fast_nms(same, o), std::vector<int>{0});
  // Zero-area and inverted boxes overlap nothing: all kept.
  std::vector<Detection> degenerate{{{5, 5, 5, 5}, 0.9f}, {{5, 5, 5, 5}, 0.8f}, {{9, 9, 3, 3}, 0.7f},
                                    {{9, 9, 3, 3}, 0.6f}};
  EXPECT_EQ(greedy_nms(degenerate, o).size(), 4u);
  // Huge coordinates stay finite.
  std::vector<Detection> huge{{{0, 0, 3e18f, 3e18f}, 0.9f}, {{1e18f, 1e18f, 3e18f, 3e18f}, 0.8f}};
  EXPECT_EQ(greedy_nms(huge, o), (std::vector<int>{0, 1}));  // IoU 4/9 < 0.5
  // NaN scores are dropped; +Inf ranks first; -Inf last.
  std::vector<Detection> odd{{{0, 0, 10, 10}, nan}, {{0, 0, 10, 10}, 0.5f}, {{1, 0, 11, 10}, inf},
                             {{100, 100, 110, 110}, -inf}};
  EXPECT_EQ(greedy_nms(odd, o), (std::vector<int>{2, 3}));
  EXPECT_EQ(cluster_nms(odd, o), (std::vector<int>{2, 3}));
}

TEST(NmsCpu, PixelInclusiveConventionAndOverCandidate) {
  Box a{0, 0, 9, 9}, b{5, 0, 14, 9};  // 10x10 pixel boxes overlapping 5 columns
  EXPECT_FLOAT_EQ(overlap(a, b, Criterion::IoU, true), 50.f / 150.f);
  EXPECT_FLOAT_EQ(overlap(a, b, Criterion::IoU, false), 36.f / 126.f);
  Box small{2, 2, 4, 4};
  EXPECT_FLOAT_EQ(overlap(small, a, Criterion::OverCandidate), 1.f);
  EXPECT_FLOAT_EQ(overlap(a, small, Criterion::OverCandidate), 4.f / 81.f);
}

TEST(NmsCpu, SoftNms) {
  std::vector<Detection> d{{{0, 0, 10, 10}, 0.9f}, {{1, 0, 11, 10}, 0.8f}, {{50, 50, 60, 60}, 0.7f}};
  Options o;
  o.threshold = 0.3f;
  auto lin = soft_nms(d, o, SoftKind::Linear);
  ASSERT_EQ(lin.size(), 3u);
  EXPECT_FLOAT_EQ(lin[0].score, 0.9f);
  EXPECT_FLOAT_EQ(lin[1].score, 0.7f);  // the far box is not decayed
  const float iou = 90.f / 110.f;
  EXPECT_NEAR(lin[2].score, 0.8f * (1 - iou), 1e-6f);
  auto gau = soft_nms(d, o, SoftKind::Gaussian, 0.5f);
  EXPECT_NEAR(gau[2].score, 0.8f * std::exp(-iou * iou / 0.5f), 1e-6f);
  o.score_threshold = 0.2f;
  EXPECT_EQ(soft_nms(d, o, SoftKind::Linear).size(), 2u);
}

TEST(NmsCpu, Segments1D) {
  std::vector<Segment> s{{0, 10, 0.9f}, {2, 12, 0.8f}, {11, 20, 0.85f}, {30, 31, 0.1f}};
  Options o;
  EXPECT_EQ(greedy_nms_1d(s, o), (std::vector<int>{0, 2, 3}));  // [2,12] IoU 8/12 with [0,10]
}

// OpenCV's groupRectangles semantics: similar rectangles joined, groups of more than min_group
// kept as their rounded mean with the best score, a group inside a larger, more numerous one
// dropped, min_group <= 0 returns the input.
TEST(GroupRectangles, OpenCVSemantics) {
  auto det = [](float x, float y, float w, float h, float s) { return Detection{{x, y, x + w, y + h}, s, 0}; };
  std::vector<Detection> d = {
      det(10, 10, 64, 128, 0.5f), det(12, 11, 64, 128, 0.9f), det(9, 13, 66, 130, 0.1f),  // group A: 3
      det(300, 300, 64, 128, 2.f),                                                          // alone
      det(400, 100, 200, 400, 1), det(402, 101, 200, 400, 1), det(399, 99, 201, 402, 1),    // group D: 5
      det(401, 102, 198, 398, 1), det(400, 100, 202, 400, 3.f),
      det(420, 150, 64, 128, 1), det(421, 151, 64, 128, 1), det(419, 150, 64, 128, 1)};     // E: 3, in D
  const auto g = group_rectangles(d, 2, 0.2f);
  ASSERT_EQ(g.size(), 2u);
  // A: mean (10.33, 11.33, 64.67, 128.67) rounded -> (10, 11, 65, 129); best score 0.9.
  EXPECT_EQ(g[0].box.x1, 10.f);
  EXPECT_EQ(g[0].box.y1, 11.f);
  EXPECT_EQ(g[0].box.x2, 75.f);
  EXPECT_EQ(g[0].box.y2, 140.f);
  EXPECT_FLOAT_EQ(g[0].score, 0.9f);
  // D: mean (400.4, 100.4, 200.2, 400) -> (400, 100, 200, 400); E is inside it and dropped.
  EXPECT_EQ(g[1].box.x1, 400.f);
  EXPECT_EQ(g[1].box.x2, 600.f);
  EXPECT_EQ(g[1].box.y2, 500.f);
  EXPECT_FLOAT_EQ(g[1].score, 3.f);
  EXPECT_EQ(group_rectangles(d, 0).size(), d.size());
  EXPECT_EQ(group_rectangles(d, 4).size(), 1u);  // only D has more than 4
}
