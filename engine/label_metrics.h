// Segmentation metrics from a confusion matrix: global pixel accuracy, class-average accuracy,
// per-class and mean IoU; void pixels (ground truth == void index) excluded everywhere.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace scenelab {

class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(int classes) : n_(classes), m_(size_t(classes) * classes, 0) {}
  // Adds one image; pixels whose truth is >= classes (void) are skipped. Predictions >= classes
  // are an error.
  void add(const std::vector<uint8_t>& truth, const std::vector<uint8_t>& pred);
  // Adds another matrix of the same classes (e.g. one image's, counted on another thread).
  ConfusionMatrix& operator+=(const ConfusionMatrix& o);
  int classes() const { return n_; }
  uint64_t at(int truth, int pred) const { return m_[size_t(truth) * n_ + pred]; }
  uint64_t total() const;
  double global_accuracy() const;
  double class_accuracy() const;        // mean over classes present in the truth
  std::vector<double> class_iou() const;  // NaN for classes absent from truth and prediction
  double mean_iou() const;              // mean over classes present in the truth

 private:
  int n_;
  std::vector<uint64_t> m_;
};

}  // namespace scenelab
