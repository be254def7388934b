// The sliding-window detection head: windows of several sizes and aspect ratios slide over one
// class's probability map from the labeller; a window's score is an objectness that peaks on the
// object's extent: the mean probability inside the window minus the largest mean of the four
// strips of the ring around it (ring = the window grown by `ring` of its size on each side,
// clipped to the map). A window wholly inside an object, or at one of its edges, scores low (some
// side of its ring is object too); one covering the object and some background scores lower than
// the tight one. Windows scoring at least the threshold become
// candidates, fused by greedy NMS with Oro et al.'s over-candidate criterion (intersection over
// the candidate's area: a box nested in a kept one, or holding it, goes), and are mapped to
// input-image coordinates. ring = 0 gives the plain mean (the first head).
// Window sizes whose box on the input image is smaller than min_area are not slid (an object
// that small is not reported, and a window that small cannot cover one that is larger), and a
// candidate's score is its objectness plus size_weight * ln(box area / min_area): of windows
// that isolate an object equally well the larger is kept, and across images larger objects rank
// first (a small isolated blob is more often a labelling error than a car).
//
// The integral image holds probabilities in fixed point (round(p * 2^20), 64-bit integers), so
// window sums are exact and the CPU and GPU paths give bit-identical scores and detections.
// Candidate order is (size, y, x), the order of the window grid, on both paths.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "nms/nms.h"

namespace scenelab::nms {

// Where map pixel (i) lies on the input image: centre offset + stride * i (in input pixels).
struct MapGeometry {
  double stride_y = 1, stride_x = 1, offset_y = 0, offset_x = 0;
};

struct WindowHeadOptions {
  // The heights (map pixels) and aspect ratios (width / height) `sizes` is made of, kept so that
  // a setting naming one of them (parse_window_spec) keeps the other.
  std::vector<int> heights = default_heights();
  std::vector<float> aspects = default_aspects();
  // Window sizes (height, width) in map pixels. Equal scores keep the earlier candidate. Set
  // directly (a custom set), heights and aspects no longer describe it.
  std::vector<std::pair<int, int>> sizes = sizes_from(heights, aspects);
  int stride = 1;            // in map pixels, when stride_frac is 0
  float stride_frac = 0.15f;  // stride of a size: max(1, round(stride_frac * min(h, w)))
  float ring = 0.25f;        // ring width as a fraction of the window's height and width
  // The defaults of threshold, min_area, size_weight and nms.threshold were chosen together on
  // CamVid sequences 0001TP and 0006R0 (the best mean AP50 of Car and Pedestrian with at most
  // 1.5 boxes per object each; docs/BENCHMARKS.md at fb0dc9a).
  float threshold = 0.3f;    // minimum objectness
  // Smallest box slid, in input pixels (the window's unclamped extent: sizes, not positions,
  // are dropped), and the weight of the size in the score (see above). Pixels of the input as
  // given: for a scene at another resolution than the model's training frames, scale it.
  float min_area = 1000.f;
  float size_weight = 0.01f;
  // Fusion: a candidate whose intersection with a kept (higher-scoring) window covers more than
  // the threshold of its own area is dropped (Oro et al.'s over-candidate criterion).
  Options nms{0.1f, Criterion::OverCandidate, false, -1e30f, 100, false};

  // Heights from 3 to 45 map pixels (a geometric series), each at aspect ratios (width/height)
  // 0.4 (people), 0.7, 1, 1.4, 2 (cars).
  static std::vector<int> default_heights();
  static std::vector<float> default_aspects();
  static std::vector<std::pair<int, int>> default_sizes();
  // A size set from heights and aspect ratios.
  static std::vector<std::pair<int, int>> sizes_from(const std::vector<int>& heights,
                                                     const std::vector<float>& aspects);
  int stride_of(int h, int w) const;
};

// One window size as slid over a map: its stride and score bonus (size_weight * ln(area /
// min_area), computed here in double, once, for the CPU and GPU paths alike).
struct SlidSize {
  int h, w, stride;
  float bonus;
};
// The sizes of o that fit an H x W map and cover at least o.min_area input pixels under g, in
// o.sizes' order. g = nullptr: every size that fits, without bonus (to bound buffer sizes).
std::vector<SlidSize> slid_sizes(int H, int W, const WindowHeadOptions& o, const MapGeometry* g);

// Per-class settings as text, as model files carry them (weights/FORMAT.md):
//   "threshold=0.35 ring=0.25 nms=0.5 heights=4,6,8 aspects=0.7,1,1.4 stride=0.25 min_area=600
//    size_weight=0.03"
// Keys left out keep their values in `o` (heights or aspects alone keep the other); unknown keys,
// bad numbers and values outside the ranges below throw std::invalid_argument and leave `o` as
// it was. The ranges keep the head's integer arithmetic from overflowing whatever a model file
// says: heights whole numbers in [1, kMaxWindowHeight], aspects in [kMinWindowAspect,
// 1 / kMinWindowAspect], at most kMaxWindowList of each; ring and stride in [0, kMaxWindowRing];
// nms in [0, 1]; min_area in [0, 1e12]; threshold and size_weight finite.
constexpr int kMaxWindowList = 64;
constexpr int kMaxWindowHeight = 16384;
constexpr float kMinWindowAspect = 1.f / 1024;
constexpr float kMaxWindowRing = 16.f;
void parse_window_spec(const std::string& spec, WindowHeadOptions& o);

// Window sums in fixed point: exact, order independent.
constexpr double kProbScale = 1048576.0;  // 2^20

// prob: H x W probabilities of one class (row-major). Boxes are clamped to [0, image_w] x
// [0, image_h]; `cls` is copied into the detections. Detections in NMS order.
std::vector<Detection> detect_windows_cpu(const float* prob, int H, int W, int cls,
                                          const WindowHeadOptions& o, const MapGeometry& g,
                                          int image_w, int image_h);

// The candidates before NMS (for tests and tuning), in window-grid order.
std::vector<Detection> window_candidates_cpu(const float* prob, int H, int W, int cls,
                                             const WindowHeadOptions& o, const MapGeometry& g,
                                             int image_w, int image_h);

}  // namespace scenelab::nms

#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "nms/nms_cuda.h"

namespace scenelab::nms {

// The head on the GPU: fixed-point integral image, window scores and ordered compaction of the
// candidates on the device, then exact greedy NMS on the path nms_on_device takes for that many
// candidates (GpuGreedyNms: the dense bitmask, or the sparse greedy for many or spread-out
// candidates; a map slid with a low threshold gives hundreds of thousands). One host sync reads
// the candidate count (to size the NMS launch), one more where the choice samples the density.
// Buffers are sized by reserve(); detect() allocates only when a frame brings more candidates
// than any before.
class GpuWindowHead {
 public:
  void reserve(int H, int W, const WindowHeadOptions& o);
  std::vector<Detection> detect(const float* prob_dev, int H, int W, int cls,
                                const WindowHeadOptions& o, const MapGeometry& g, int image_w,
                                int image_h, cudaStream_t stream);

 private:
  int max_plane_ = 0, max_windows_ = 0;
  DeviceBuffer integral_, flags_, idx_all_, cand_idx_, cand_boxes_, cand_scores_, count_,
      keep_, keep_count_, cub_temp_;
  size_t cub_bytes_ = 0;
  GpuGreedyNms nms_;
};

}  // namespace scenelab::nms
#endif
