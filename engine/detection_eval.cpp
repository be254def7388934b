#include "engine/detection_eval.h"

#include <algorithm>
#include <numeric>

namespace scenelab {

std::vector<Component> label_components(const uint8_t* labels, int w, int h, int cls, int min_area) {
  std::vector<int> seen(size_t(w) * h, 0);
  std::vector<int> stack;
  std::vector<Component> out;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const size_t i = size_t(y) * w + x;
      if (labels[i] != cls || seen[i]) continue;
      int x0 = x, x1 = x, y0 = y, y1 = y, area = 0;
      seen[i] = 1;
      stack.assign(1, int(i));
      while (!stack.empty()) {
        const int j = stack.back();
        stack.pop_back();
        const int jy = j / w, jx = j % w;
        ++area;
        x0 = std::min(x0, jx), x1 = std::max(x1, jx), y0 = std::min(y0, jy), y1 = std::max(y1, jy);
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            const int ny = jy + dy, nx = jx + dx;
            if (ny < 0 || nx < 0 || ny >= h || nx >= w) continue;
            const size_t k = size_t(ny) * w + nx;
            if (labels[k] == cls && !seen[k]) seen[k] = 1, stack.push_back(int(k));
          }
      }
      if (area >= min_area)
        out.push_back({{float(x0), float(y0), float(x1 + 1), float(y1 + 1)}, area});
    }
  return out;
}

void DetectionEvaluator::add(const std::vector<nms::Box>& truth, const std::vector<nms::Detection>& dets) {
  ++images_;
  truth_ += truth.size();
  std::vector<size_t> order(dets.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dets[a].score > dets[b].score; });
  std::vector<uint16_t> flags(dets.size(), 0);
  for (int t = 0; t < 10; ++t) {
    const float thr = 0.5f + 0.05f * t;
    std::vector<bool> used(truth.size(), false);
    for (size_t k : order) {
      float best = thr;
      int match = -1;
      for (size_t g = 0; g < truth.size(); ++g) {
        if (used[g]) continue;
        const float iou = nms::overlap(dets[k].box, truth[g], nms::Criterion::IoU);
        if (iou >= best) best = iou, match = int(g);
      }
      if (match >= 0) used[size_t(match)] = true, flags[k] |= uint16_t(1u << t);
    }
  }
  for (size_t k = 0; k < dets.size(); ++k) dets_.push_back({dets[k].score, flags[k]});
}

DetectionEvaluator::Result DetectionEvaluator::result() const {
  Result r;
  r.truth = truth_;
  r.detections = dets_.size();
  r.images = images_;
  if (truth_ == 0) return r;
  std::vector<Scored> d = dets_;
  std::stable_sort(d.begin(), d.end(), [](const Scored& a, const Scored& b) { return a.score > b.score; });
  auto ap_at = [&](int t, int points, double* recall) {
    std::vector<double> prec, rec;
    size_t tp = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      tp += (d[i].tp >> t) & 1;
      prec.push_back(double(tp) / double(i + 1));
      rec.push_back(double(tp) / double(truth_));
    }
    if (recall) *recall = rec.empty() ? 0 : rec.back();
    for (size_t i = prec.size(); i-- > 1;) prec[i - 1] = std::max(prec[i - 1], prec[i]);  // envelope
    double sum = 0;
    for (int k = 0; k < points; ++k) {
      const double r0 = double(k) / (points - 1);
      const auto it = std::lower_bound(rec.begin(), rec.end(), r0 - 1e-12);
      sum += it == rec.end() ? 0 : prec[size_t(it - rec.begin())];
    }
    return sum / points;
  };
  double all = 0;
  for (int t = 0; t < 10; ++t) all += ap_at(t, 101, nullptr);
  r.ap = all / 10;
  r.ap50 = ap_at(0, 101, &r.recall50);
  r.ap75 = ap_at(5, 101, nullptr);
  r.ap50_11pt = ap_at(0, 11, nullptr);
  return r;
}

}  // namespace scenelab
