#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "nms/nms.h"

namespace scenelab::nms {

float area(const Box& b, bool inc) {
  const float e = inc ? 1.f : 0.f;
  return std::max(0.f, b.x2 - b.x1 + e) * std::max(0.f, b.y2 - b.y1 + e);
}

float overlap(const Box& a, const Box& b, Criterion c, bool inc) {
  const float e = inc ? 1.f : 0.f;
  const float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1) + e;
  const float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1) + e;
  const float aa = area(a, inc), ab = area(b, inc);
  if (iw <= 0 || ih <= 0 || aa <= 0 || ab <= 0) return 0.f;
  const float inter = iw * ih;
  const float den = c == Criterion::IoU ? aa + ab - inter : aa;
  return den > 0 ? inter / den : 0.f;
}

std::vector<int> rank_order(const std::vector<Detection>& d, const Options& o) {
  std::vector<int> idx;
  for (size_t i = 0; i < d.size(); ++i)
    if (!std::isnan(d[i].score) && d[i].score >= o.score_threshold) idx.push_back(int(i));
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int a, int b) { return d[size_t(a)].score > d[size_t(b)].score; });
  return idx;
}

namespace {

bool suppresses(const Detection& higher, const Detection& cand, const Options& o) {
  if (o.per_class && higher.cls != cand.cls) return false;
  return overlap(cand.box, higher.box, o.criterion, o.pixel_inclusive) > o.threshold;
}

void truncate(std::vector<int>& keep, const Options& o) {
  if (o.max_outputs >= 0 && int(keep.size()) > o.max_outputs) keep.resize(size_t(o.max_outputs));
}

}  // namespace

std::vector<int> greedy_nms(const std::vector<Detection>& d, const Options& o) {
  std::vector<int> keep;
  for (int i : rank_order(d, o)) {
    if (o.max_outputs >= 0 && int(keep.size()) >= o.max_outputs) break;
    bool dead = false;
    for (int k : keep)
      if (suppresses(d[size_t(k)], d[size_t(i)], o)) {
        dead = true;
        break;
      }
    if (!dead) keep.push_back(i);
  }
  return keep;
}

std::vector<int> fast_nms(const std::vector<Detection>& d, const Options& o) {
  std::vector<int> order = rank_order(d, o), keep;
  for (size_t r = 0; r < order.size(); ++r) {
    bool dead = false;
    for (size_t q = 0; q < r && !dead; ++q) dead = suppresses(d[size_t(order[q])], d[size_t(order[r])], o);
    if (!dead) keep.push_back(order[r]);
  }
  truncate(keep, o);
  return keep;
}

std::vector<int> cluster_nms(const std::vector<Detection>& d, const Options& o, int* iterations) {
  std::vector<int> order = rank_order(d, o);
  const size_t n = order.size();
  // X[q][r] (q ranked above r): q would suppress r.
  std::vector<uint8_t> X(n * n, 0);
  for (size_t q = 0; q < n; ++q)
    for (size_t r = q + 1; r < n; ++r)
      X[q * n + r] = suppresses(d[size_t(order[q])], d[size_t(order[r])], o);
  std::vector<uint8_t> alive(n, 1), next(n);
  int it = 0;
  while (n > 0) {  // no boxes: no step to run
    ++it;
    for (size_t r = 0; r < n; ++r) {
      bool dead = false;
      for (size_t q = 0; q < r && !dead; ++q) dead = alive[q] && X[q * n + r];
      next[r] = !dead;
    }
    if (next == alive) break;
    alive.swap(next);
  }
  if (iterations) *iterations = it;
  std::vector<int> keep;
  for (size_t r = 0; r < n; ++r)
    if (alive[r]) keep.push_back(order[r]);
  truncate(keep, o);
  return keep;
}

std::vector<Detection> soft_nms(const std::vector<Detection>& d, const Options& o, SoftKind kind,
                                float sigma) {
  std::vector<Detection> pool;
  for (const auto& x : d)
    if (!std::isnan(x.score)) pool.push_back(x);
  std::vector<int> index(pool.size());
  std::iota(index.begin(), index.end(), 0);
  std::vector<Detection> out;
  while (!pool.empty()) {
    // Highest score; ties go to the earlier input.
    size_t best = 0;
    for (size_t i = 1; i < pool.size(); ++i)
      if (pool[i].score > pool[best].score ||
          (pool[i].score == pool[best].score && index[i] < index[best]))
        best = i;
    Detection top = pool[best];
    pool.erase(pool.begin() + long(best));
    index.erase(index.begin() + long(best));
    if (top.score < o.score_threshold) break;  // all the rest are lower
    out.push_back(top);
    if (o.max_outputs >= 0 && int(out.size()) >= o.max_outputs) break;
    for (auto& x : pool) {
      if (o.per_class && x.cls != top.cls) continue;
      const float ov = overlap(x.box, top.box, o.criterion, o.pixel_inclusive);
      if (kind == SoftKind::Linear) {
        if (ov > o.threshold) x.score *= 1.f - ov;
      } else {
        x.score *= std::exp(-ov * ov / sigma);
      }
    }
  }
  return out;
}

std::vector<int> greedy_nms_1d(const std::vector<Segment>& s, const Options& o) {
  // A segment is a box of unit height: the 1-D criteria follow from the 2-D ones.
  std::vector<Detection> d;
  for (const auto& x : s) d.push_back({{x.t1, 0.f, x.t2, 1.f}, x.score, x.cls});
  Options o1 = o;
  o1.pixel_inclusive = false;
  if (o.pixel_inclusive)
    for (auto& x : d) x.box.x2 += 1.f;  // integer frames: inclusive end
  return greedy_nms(d, o1);
}

std::vector<Detection> group_rectangles(const std::vector<Detection>& d, int min_group, float eps) {
  if (min_group <= 0 || d.empty()) return d;
  struct Rect {
    int x, y, w, h;
  };
  auto round_int = [](double v) { return int(std::nearbyint(v)); };  // half to even, as cvRound
  std::vector<Rect> r;
  for (const auto& x : d)
    r.push_back({round_int(x.box.x1), round_int(x.box.y1), round_int(x.box.x2 - x.box.x1),
                 round_int(x.box.y2 - x.box.y1)});
  const size_t n = r.size();
  auto similar = [&](const Rect& a, const Rect& b) {
    const double delta = double(eps) * (std::min(a.w, b.w) + std::min(a.h, b.h)) * 0.5;
    return std::abs(a.x - b.x) <= delta && std::abs(a.y - b.y) <= delta &&
           std::abs(a.x + a.w - b.x - b.w) <= delta && std::abs(a.y + a.h - b.y - b.h) <= delta;
  };
  // Union-find over every similar pair; groups numbered by their first member.
  std::vector<size_t> parent(n);
  for (size_t i = 0; i < n; ++i) parent[i] = i;
  auto find = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (similar(r[i], r[j])) parent[find(i)] = find(j);
  std::vector<int> label(n), group_of_root(n, -1);
  int groups = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t root = find(i);
    if (group_of_root[root] < 0) group_of_root[root] = groups++;
    label[i] = group_of_root[root];
  }
  std::vector<double> sx(size_t(groups), 0), sy(size_t(groups), 0), sw(size_t(groups), 0), sh(size_t(groups), 0);
  std::vector<int> count(size_t(groups), 0);
  std::vector<float> best(size_t(groups), -std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < n; ++i) {
    const size_t g = size_t(label[i]);
    sx[g] += r[i].x, sy[g] += r[i].y, sw[g] += r[i].w, sh[g] += r[i].h;
    ++count[g];
    best[g] = std::max(best[g], d[i].score);
  }
  std::vector<Rect> mean(static_cast<size_t>(groups));
  for (size_t g = 0; g < size_t(groups); ++g) {
    const double s = 1.0 / count[g];
    mean[g] = {round_int(sx[g] * s), round_int(sy[g] * s), round_int(sw[g] * s), round_int(sh[g] * s)};
  }
  std::vector<Detection> out;
  for (size_t i = 0; i < size_t(groups); ++i) {
    const int n1 = count[i];
    if (n1 <= min_group) continue;
    const Rect& a = mean[i];
    bool inside = false;
    for (size_t j = 0; j < size_t(groups) && !inside; ++j) {
      const int n2 = count[j];
      if (j == i || n2 <= min_group) continue;
      const Rect& b = mean[j];
      const int dx = round_int(b.w * double(eps)), dy = round_int(b.h * double(eps));
      inside = a.x >= b.x - dx && a.y >= b.y - dy && a.x + a.w <= b.x + b.w + dx &&
               a.y + a.h <= b.y + b.h + dy && (n2 > std::max(3, n1) || n1 < 3);
    }
    if (!inside)
      out.push_back({{float(a.x), float(a.y), float(a.x + a.w), float(a.y + a.h)}, best[i], d[0].cls});
  }
  return out;
}

#ifndef SCENELAB_WITH_CUDA
int nms_on_device(const float*, const float*, const int64_t*, int, const Options&, Method, int64_t*, void*) {
  throw std::runtime_error("nms_on_device: this build of scenelab has no CUDA");
}
std::vector<int> batched_nms_on_device(const float*, const float*, const int64_t*, const int64_t*, int, int,
                                       const Options&, int64_t*, void*) {
  throw std::runtime_error("batched_nms_on_device: this build of scenelab has no CUDA");
}
#endif

}  // namespace scenelab::nms
