#include "engine/label_metrics.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace scenelab {

void ConfusionMatrix::add(const std::vector<uint8_t>& truth, const std::vector<uint8_t>& pred) {
  SL_REQUIRE(truth.size() == pred.size(), "confusion matrix: ", truth.size(), " truth pixels vs ",
             pred.size(), " predicted");
  for (size_t i = 0; i < truth.size(); ++i) {
    if (truth[i] >= n_) continue;
    SL_REQUIRE(pred[i] < n_, "confusion matrix: predicted class ", int(pred[i]), " >= ", n_);
    m_[size_t(truth[i]) * n_ + pred[i]]++;
  }
}

ConfusionMatrix& ConfusionMatrix::operator+=(const ConfusionMatrix& o) {
  SL_REQUIRE(o.n_ == n_, "confusion matrix: adding ", o.n_, " classes to ", n_);
  for (size_t i = 0; i < m_.size(); ++i) m_[i] += o.m_[i];
  return *this;
}

uint64_t ConfusionMatrix::total() const {
  uint64_t t = 0;
  for (auto v : m_) t += v;
  return t;
}

double ConfusionMatrix::global_accuracy() const {
  uint64_t tp = 0;
  for (int c = 0; c < n_; ++c) tp += at(c, c);
  return total() ? double(tp) / double(total()) : 0.0;
}

double ConfusionMatrix::class_accuracy() const {
  double s = 0;
  int k = 0;
  for (int c = 0; c < n_; ++c) {
    uint64_t row = 0;
    for (int p = 0; p < n_; ++p) row += at(c, p);
    if (row) s += double(at(c, c)) / double(row), ++k;
  }
  return k ? s / k : 0.0;
}

std::vector<double> ConfusionMatrix::class_iou() const {
  std::vector<double> iou(static_cast<size_t>(n_));
  for (int c = 0; c < n_; ++c) {
    uint64_t row = 0, col = 0;
    for (int p = 0; p < n_; ++p) row += at(c, p), col += at(p, c);
    uint64_t uni = row + col - at(c, c);
    iou[size_t(c)] = uni ? double(at(c, c)) / double(uni) : std::numeric_limits<double>::quiet_NaN();
  }
  return iou;
}

double ConfusionMatrix::mean_iou() const {
  auto iou = class_iou();
  double s = 0;
  int k = 0;
  for (int c = 0; c < n_; ++c) {
    uint64_t row = 0;
    for (int p = 0; p < n_; ++p) row += at(c, p);
    if (row) s += iou[size_t(c)], ++k;
  }
  return k ? s / k : 0.0;
}

}  // namespace scenelab
