// Detection ground truth from label maps and its scoring. Ground truth: the 8-connected
// components of one class in a label image with at least `min_area` pixels, each a box over its
// pixels' extents (so objects of one class that touch, such as parked cars, form one object).
// Scores: average precision as COCO computes it (detections matched greedily by score to the
// unmatched ground truth of highest IoU at or above the threshold; precision interpolated at 101
// recall points), at IoU 0.5 and averaged over 0.5:0.95, and the 11-point AP at 0.5 of PASCAL VOC
// 2007 for comparison with earlier figures.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nms/nms.h"

namespace scenelab {

struct Component {
  nms::Box box;  // [x1, x2) x [y1, y2) in pixels
  int area = 0;
};

std::vector<Component> label_components(const uint8_t* labels, int w, int h, int cls, int min_area);

class DetectionEvaluator {
 public:
  struct Result {
    double ap50 = 0, ap75 = 0, ap = 0, ap50_11pt = 0;  // ap: mean over IoU 0.5:0.05:0.95
    double recall50 = 0;                                // of all truth, found at IoU 0.5
    size_t truth = 0, detections = 0, images = 0;
  };
  // One image's truth and detections of one class (boxes in the same coordinates).
  void add(const std::vector<nms::Box>& truth, const std::vector<nms::Detection>& dets);
  Result result() const;

 private:
  struct Scored {
    float score;
    uint16_t tp;  // bit t: a true positive at IoU threshold 0.5 + 0.05 t
  };
  std::vector<Scored> dets_;
  size_t truth_ = 0, images_ = 0;
};

}  // namespace scenelab
