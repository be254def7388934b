// Exact greedy NMS over many boxes on the CPU, testing only the pairs that can overlap, and the
// batched per-image form. The rule is greedy_nms's (nms_cpu.cpp), decided by the same
// suppression test, so the kept indices are the same index for index; what changes is which
// pairs are tested. With a threshold >= 0 a box suppresses another only where their
// intersection has positive width and height, so boxes are binned on a grid of square cells
// (the side: the median box's larger side), and in rank order each box is tested against the
// kept boxes sharing a cell with it: greedy_nms's loop, restricted to the neighbours. A box
// spanning more than kMaxSpan cells along an axis, or with coordinates the grid cannot index (not
// finite, beyond 2^40 cells), is tested against every kept box, and once kept every box is
// tested against it. The cost is the kept neighbours a box has, not the kept boxes in all.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>

#include "nms/nms.h"

namespace scenelab::nms {
namespace {

constexpr int kMaxSpan = 8;            // cells along an axis before a box is tested with all
constexpr double kMaxCell = 1099511627776.0;  // 2^40: cell indices beyond are not binned
constexpr int kDenseBelow = 2048;      // below this many boxes the plain loop is as fast

bool suppresses(const Detection& higher, const Detection& cand, const Options& o) {
  if (o.per_class && higher.cls != cand.cls) return false;
  return overlap(cand.box, higher.box, o.criterion, o.pixel_inclusive) > o.threshold;
}

// A box's extent widened by a relative 1e-6 (and 1e-30) on each side, so that float rounding in
// the overlap test cannot find an intersection the grid did not.
struct Extent {
  double x1, y1, x2, y2;
};
Extent extent_of(const Box& b, bool inc) {
  const double e = inc ? 1.0 : 0.0;
  auto lo = [](double v) { return v - std::fabs(v) * 1e-6 - 1e-30; };
  auto hi = [](double v) { return v + std::fabs(v) * 1e-6 + 1e-30; };
  return {lo(b.x1), lo(b.y1), hi(double(b.x2) + e), hi(double(b.y2) + e)};
}

}  // namespace

std::vector<int> greedy_nms_sparse(const std::vector<Detection>& d, const Options& o) {
  // A negative threshold makes every pair of a class suppress (overlap 0 > threshold): the plain
  // loop keeps one box a class and is quick.
  if (!(o.threshold >= 0)) return greedy_nms(d, o);
  const std::vector<int> order = rank_order(d, o);
  const size_t n = order.size();
  std::vector<Extent> ext(n);
  std::vector<uint8_t> live(n);  // positive area: can suppress or be suppressed at all
  std::vector<double> sides;
  sides.reserve(n);
  double ox = INFINITY, oy = INFINITY;
  for (size_t r = 0; r < n; ++r) {
    const Box& b = d[size_t(order[r])].box;
    live[r] = area(b, o.pixel_inclusive) > 0;
    if (!live[r]) continue;
    ext[r] = extent_of(b, o.pixel_inclusive);
    const double s = std::max(ext[r].x2 - ext[r].x1, ext[r].y2 - ext[r].y1);
    if (std::isfinite(s)) sides.push_back(s);
    if (std::isfinite(ext[r].x1)) ox = std::min(ox, ext[r].x1);
    if (std::isfinite(ext[r].y1)) oy = std::min(oy, ext[r].y1);
  }
  // The cell side: the median of the live boxes' larger sides.
  double side = 1.0;
  if (!sides.empty()) {
    std::nth_element(sides.begin(), sides.begin() + long(sides.size() / 2), sides.end());
    side = sides[sides.size() / 2];
  }
  if (!(side > 0) || !std::isfinite(side)) side = 1.0;
  // Greedy in rank order, each box tested against the kept boxes of its cells and the kept wide
  // ones (a wide box: against every kept box). A cell is keyed by a hash of its indices: two
  // cells of one key only add tests, never lose one.
  std::unordered_map<uint64_t, std::vector<int>> cells;  // cell key -> kept ranks
  cells.reserve(n);
  std::vector<int> kept_wide, kept_all;
  std::vector<int> keep;
  auto key = [](uint64_t x, uint64_t y) { return x * 0x9E3779B97F4A7C15ULL ^ (y + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL; };
  std::vector<uint64_t> mine;
  for (size_t r = 0; r < n; ++r) {
    if (o.max_outputs >= 0 && int(keep.size()) >= o.max_outputs) break;
    const Detection& cand = d[size_t(order[r])];
    if (!live[r]) {  // overlaps nothing: kept, suppresses nothing
      keep.push_back(order[r]);
      continue;
    }
    const Extent& e = ext[r];
    const double cx1 = std::floor((e.x1 - ox) / side), cx2 = std::floor((e.x2 - ox) / side);
    const double cy1 = std::floor((e.y1 - oy) / side), cy2 = std::floor((e.y2 - oy) / side);
    const bool binned = std::isfinite(cx1) && std::isfinite(cx2) && std::isfinite(cy1) && std::isfinite(cy2) &&
                        cx1 >= 0 && cy1 >= 0 && cx2 < kMaxCell && cy2 < kMaxCell && cx2 - cx1 < kMaxSpan &&
                        cy2 - cy1 < kMaxSpan;
    auto hit = [&](const std::vector<int>& ranks) {
      for (int q : ranks)
        if (suppresses(d[size_t(order[size_t(q)])], cand, o)) return true;
      return false;
    };
    bool dead = hit(kept_wide);
    mine.clear();
    if (binned) {
      for (uint64_t y = uint64_t(cy1); y <= uint64_t(cy2); ++y)
        for (uint64_t x = uint64_t(cx1); x <= uint64_t(cx2); ++x) mine.push_back(key(x, y));
      for (size_t k = 0; k < mine.size() && !dead; ++k) {
        const auto it = cells.find(mine[k]);
        if (it != cells.end()) dead = hit(it->second);
      }
    } else if (!dead) {
      dead = hit(kept_all);
    }
    if (dead) continue;
    keep.push_back(order[r]);
    kept_all.push_back(int(r));
    if (!binned) kept_wide.push_back(int(r));
    for (uint64_t k : mine) cells[k].push_back(int(r));
  }
  return keep;
}

std::vector<int> greedy_nms_auto(const std::vector<Detection>& d, const Options& o) {
  return d.size() < size_t(kDenseBelow) ? greedy_nms(d, o) : greedy_nms_sparse(d, o);
}

std::vector<std::vector<int>> batched_greedy_nms(const float* boxes, const float* scores, const int64_t* classes,
                                                 const int64_t* valid, int batch, int n, const Options& o,
                                                 int threads) {
  if (batch < 0 || n < 0) throw std::invalid_argument("batched_greedy_nms: negative batch or box count");
  if (batch > 0 && n > 0 && (!boxes || !scores))
    throw std::invalid_argument("batched_greedy_nms: null boxes or scores");
  std::vector<std::vector<int>> keep(static_cast<size_t>(batch));
  for (int b = 0; b < batch; ++b)
    if (valid && (valid[b] < 0 || valid[b] > n))
      throw std::invalid_argument("batched_greedy_nms: image " + std::to_string(b) + " has " +
                                  std::to_string(valid[b]) + " valid boxes, expected 0.." + std::to_string(n));
  auto one = [&](int b) {
    const int64_t m = valid ? valid[b] : n;
    std::vector<Detection> d(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      const size_t k = size_t(b) * size_t(n) + size_t(i);
      d[size_t(i)] = Detection{{boxes[4 * k], boxes[4 * k + 1], boxes[4 * k + 2], boxes[4 * k + 3]}, scores[k],
                               classes ? int(classes[k]) : 0};
    }
    keep[size_t(b)] = greedy_nms_auto(d, o);
  };
  const int t = std::max(1, std::min(threads > 0 ? threads : int(std::thread::hardware_concurrency()), batch));
  if (t <= 1) {
    for (int b = 0; b < batch; ++b) one(b);
    return keep;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> failed(static_cast<size_t>(t));
  for (int w = 0; w < t; ++w)
    pool.emplace_back([&, w] {
      try {
        for (int b = w; b < batch; b += t) one(b);
      } catch (...) {
        failed[size_t(w)] = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  for (const auto& f : failed)
    if (f) std::rethrow_exception(f);
  return keep;
}

}  // namespace scenelab::nms
