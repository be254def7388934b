// libFuzzer: the NMS rules on arbitrary boxes and scores (NaN, Inf, denormals, inverted boxes):
// greedy against a plain O(n^2) greedy written here, Cluster-NMS equal to greedy, Fast-NMS a
// subset of greedy, kept boxes never overlapping beyond the threshold.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "nms/nms.h"

using namespace scenelab::nms;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  Options o;
  o.criterion = data[0] & 1 ? Criterion::OverCandidate : Criterion::IoU;
  o.pixel_inclusive = data[0] & 2;
  o.threshold = float(data[1]) / 255.f;
  std::vector<Detection> d;
  for (size_t i = 2; i + 20 <= size && d.size() < 300; i += 20) {
    float v[5];
    std::memcpy(v, data + i, 20);
    d.push_back({{v[0], v[1], v[2], v[3]}, v[4], 0});
  }
  const std::vector<int> g = greedy_nms(d, o);
  // The plain rule: in rank order, keep a box unless a kept one overlaps it beyond the threshold.
  std::vector<int> want;
  for (int i : rank_order(d, o)) {
    bool keep = true;
    for (int k : want)
      if (overlap(d[size_t(i)].box, d[size_t(k)].box, o.criterion, o.pixel_inclusive) > o.threshold) keep = false;
    if (keep) want.push_back(i);
  }
  if (g != want) __builtin_trap();
  if (cluster_nms(d, o) != g) __builtin_trap();
  const std::vector<int> f = fast_nms(d, o);
  for (int i : f)
    if (std::find(g.begin(), g.end(), i) == g.end()) __builtin_trap();
  for (int i : g)
    if (std::isnan(d[size_t(i)].score)) __builtin_trap();
  return 0;
}
