// The GPU sparse NMS's grid geometry (nms/sparse_grid.h), checked here on the CPU where it is
// the same code: for pairs of boxes the float overlap test (nms::overlap, the operations the
// GPU repeats) finds above the threshold, the grid must find the pair; probe mode: b's probe
// points' cells fall in a's covered cells, and b's larger side is above t times a's; cover mode:
// the two boxes' covered cells meet. Pairs made at the threshold's edge (shifted, scaled, at
// coordinates up to 10^7 and down to 10^-3, the +1 convention; a box inside another, just
// long enough to hold a probe point), on grids of many cell sides.
#include <gtest/gtest.h>

#include <random>

#include "nms/nms.h"
#include "nms/sparse_grid.h"

using namespace scenelab::nms;

namespace {

// (A box the grid cannot index is unlisted and wide: it meets every box.)
bool meet(const grid::Span& a, const grid::Span& b) {
  return !a.ok || !b.ok || (a.x1 <= b.x2 && b.x1 <= a.x2 && a.y1 <= b.y2 && b.y1 <= a.y2);
}

// b's probe points (the cells of), one of them in a's covered cells.
bool probe_found(const Box& a, const Box& b, float e, double t, double side) {
  const grid::Span s = grid::cover_span(a.x1, a.y1, a.x2, a.y2, e, side);
  const int m = grid::probes_for(t);
  for (int kx = 1; kx <= m; ++kx)
    for (int ky = 1; ky <= m; ++ky) {
      long long cx = 0, cy = 0;
      if (!grid::probe_cell(b.x1, b.x2, e, t, kx, side, cx) || !grid::probe_cell(b.y1, b.y2, e, t, ky, side, cy))
        return true;  // unlisted: every box looks at it
      if (s.ok && cx >= s.x1 && cx <= s.x2 && cy >= s.y1 && cy <= s.y2) return true;
    }
  return false;
}

// A box near a (shifted by about the distance that brings the IoU to t, scaled a little).
Box near(const Box& a, double t, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double w = double(a.x2) - a.x1, h = double(a.y2) - a.y1;
  const double shift = (1 - t) / (1 + t) * (0.9 + 0.2 * u(rng));
  const double sx = 1 + (u(rng) - 0.5) * 0.2 * (1 - t), sy = 1 + (u(rng) - 0.5) * 0.2 * (1 - t);
  const double dx = (u(rng) < 0.5 ? -1 : 1) * shift * w * u(rng), dy = (u(rng) < 0.5 ? -1 : 1) * shift * h * u(rng);
  return {float(a.x1 + dx), float(a.y1 + dy), float(a.x1 + dx + w * sx), float(a.y1 + dy + h * sy)};
}

// A box a inside b, as wide as t times b's (times 1 + up to 1e-4) and as high, anywhere along
// b: IoU just above t, and a's extent just long enough to hold one of b's probe points.
Box inside(const Box& b, double t, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double w = double(b.x2) - b.x1, wa = t * w * (1 + 1e-4 * u(rng) * u(rng));
  const double x = b.x1 + (w - wa) * u(rng);
  return {float(x), b.y1, float(x + wa), b.y2};
}

}  // namespace

TEST(SparseGrid, ProbesPerThreshold) {
  EXPECT_EQ(grid::probes_for(0.5), 1);
  EXPECT_EQ(grid::probes_for(0.7), 1);
  EXPECT_EQ(grid::probes_for(0.45), 2);
  EXPECT_EQ(grid::probes_for(0.3), 3);
  EXPECT_EQ(grid::probes_for(0.25), 3);
  EXPECT_EQ(grid::probes_for(1.0), 0);
  EXPECT_EQ(grid::probes_for(0.2), 4);
  EXPECT_GT(grid::probes_for(0.19), grid::kMaxProbes);  // the cover mode
  EXPECT_GT(grid::probes_for(0.0), grid::kMaxProbes);
}

TEST(SparseGrid, EveryPairAboveTheThresholdIsFound) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  long long pairs = 0;
  for (double t : {0.2, 0.25, 0.3, 0.45, 0.5, 0.7, 0.9})
    for (float e : {0.f, 1.f})
      for (int i = 0; i < 20000; ++i) {
        const double scale = std::pow(10.0, -3 + 6 * u(rng)), at = std::pow(10.0, -3 + 10 * u(rng));
        const double x = (u(rng) - 0.5) * at, y = (u(rng) - 0.5) * at;
        const Box a{float(x), float(y), float(x + scale * (0.2 + u(rng))), float(y + scale * (0.2 + u(rng)))};
        const bool edge = i % 2;
        const Box b = edge ? inside(a, t, rng) : near(a, t, rng);
        const double side = std::ldexp(1.0, int(std::floor(std::log2(scale))) - int(rng() % 18));  // cells down to 2^-17 boxes: point-sharp
        for (const auto& [p, q] : {std::pair{a, b}, std::pair{b, a}}) {
          if (!(overlap(p, q, Criterion::IoU, e > 0) > float(t))) continue;
          ++pairs;
          ASSERT_TRUE(probe_found(p, q, e, t, side)) << "t " << t << " side " << side << " a " << p.x1 << "," << p.y1
                                                     << "," << p.x2 << "," << p.y2 << " b " << q.x1 << "," << q.y1
                                                     << "," << q.x2 << "," << q.y2;
          ASSERT_GT(double(grid::max_side(q.x1, q.y1, q.x2, q.y2, e)),
                    t * grid::max_side(p.x1, p.y1, p.x2, p.y2, e) * (1 - 1e-5));
          for (Criterion c : {Criterion::IoU, Criterion::OverCandidate}) {
            if (overlap(p, q, c, e > 0) > 0.f) {
              ASSERT_TRUE(meet(grid::cover_span(p.x1, p.y1, p.x2, p.y2, e, side),
                               grid::cover_span(q.x1, q.y1, q.x2, q.y2, e, side)));
            }
          }
        }
      }
  EXPECT_GT(pairs, 50000);  // the near boxes land on both sides of the threshold
}
