// The sliding-window detection head: windows of several sizes slide with a stride over one
// class's probability map from the labeller; a window's score is the mean probability inside it
// (box sums from an integral image); windows scoring at least the threshold become candidates,
// are fused by greedy NMS, and are mapped to input-image coordinates.
//
// The integral image holds probabilities in fixed point (round(p * 2^20), 64-bit integers), so
// window sums are exact and the CPU and GPU paths give bit-identical scores and detections.
// Candidate order is (size, y, x), the order of the window grid, on both paths.
#pragma once
#include <vector>

#include "nms/nms.h"

namespace scenelab::nms {

// Where map pixel (i) lies on the input image: centre offset + stride * i (in input pixels).
struct MapGeometry {
  double stride_y = 1, stride_x = 1, offset_y = 0, offset_x = 0;
};

struct WindowHeadOptions {
  // Window sizes (height, width) in map pixels, larger first: equal scores keep the earlier
  // candidate, so an object filled by many windows is reported by the largest that fits it.
  // Square, wide (cars) and tall (people) shapes.
  std::vector<std::pair<int, int>> sizes{{24, 24}, {12, 24}, {24, 12}, {12, 12},
                                         {6, 12},  {12, 6},  {6, 6}};
  int stride = 2;          // in map pixels
  float threshold = 0.6f;  // minimum mean probability
  // Fusion: a candidate mostly inside a kept (higher-scoring) window is dropped
  // (intersection over the candidate's area, as Oro et al.).
  Options nms{0.3f, Criterion::OverCandidate, false, -1e30f, 100, false};
};

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

#include "kernels/cuda_check.h"
#include "nms/nms_cuda.h"

namespace scenelab::nms {

// The head on the GPU: fixed-point integral image, window scores and ordered compaction of the
// candidates on the device, then GpuNms::greedy. One host sync reads the candidate count (to
// size the NMS launch). Buffers are sized by reserve(); detect() allocates nothing.
class GpuWindowHead {
 public:
  void reserve(int H, int W, const WindowHeadOptions& o);
  std::vector<Detection> detect(const float* prob_dev, int H, int W, int cls,
                                const WindowHeadOptions& o, const MapGeometry& g, int image_w,
                                int image_h, cudaStream_t stream);

 private:
  int max_plane_ = 0, max_windows_ = 0;
  DeviceBuffer fixed_, integral_, flags_, idx_all_, cand_idx_, cand_boxes_, cand_scores_, count_,
      keep_, keep_count_, cub_temp_;
  size_t cub_bytes_ = 0;
  GpuNms nms_;
};

}  // namespace scenelab::nms
#endif
