// NMS on the GPU, on device pointers, stream-ordered, with no host round trip on the exact path.
// Same conventions as nms/nms.h (read those first). Boxes are float4 (x1, y1, x2, y2).
//
//   greedy()   exact greedy NMS: rank (NaN/score-threshold filter + stable radix sort), the
//              Faster R-CNN bitmask kernel (one 64-bit mask per box and 64-box column block,
//              upper triangle only), then a single-block on-device scan. Index for index equal to
//              nms::greedy_nms.
//   oro()      Oro et al. (ICASSP 2016) map/reduce on unsorted input of capacity Dmax: the map
//              kernel fills a Dmax x Dmax boolean matrix, the reduce kernel ANDs each row in k
//              partitions with __syncthreads_and. Equals nms::fast_nms ("Fast NMS"), not greedy.
//   cluster()  Cluster-NMS (Zheng et al. 2020): the Fast-NMS step on the bitmask matrix iterated
//              through the boxes still kept until stable; equals greedy. One host sync per
//              iteration (to test convergence); returns the iteration count.
//
// A GpuNms owns its device workspace, sized by reserve(n) (allocation happens there only):
// calling with n above the reserved capacity throws a clear error.
#pragma once
#include <cstdint>
#include <vector>

#include "nms/nms.h"

#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"

namespace scenelab::nms {

struct DeviceBoxes {
  const float4* boxes = nullptr;  // n boxes
  const float* scores = nullptr;  // n scores
  const int* groups = nullptr;    // optional: boxes suppress only within the same group
                                  // (class, or image * classes + class for batched NMS)
  int n = 0;
};

class GpuNms {
 public:
  explicit GpuNms(int capacity = 0) { reserve(capacity); }
  // Sizes the workspace for up to n boxes (greedy, cluster). Allocates; not for the hot path.
  void reserve(int n);
  // Sizes the Oro boolean matrix for capacity Dmax (Dmax^2 bytes).
  void reserve_oro(int dmax);
  int capacity() const { return capacity_; }
  int oro_capacity() const { return oro_capacity_; }

  // Kept input indices in rank order -> keep_out[0..*count_out); both device pointers.
  void greedy(const DeviceBoxes& in, const Options& o, int* keep_out, int* count_out,
              cudaStream_t stream);
  // Keep flag per input index (1 kept) -> keep_flags[0..n); k partitions per row.
  void oro(const DeviceBoxes& in, const Options& o, int k, uint8_t* keep_flags,
           cudaStream_t stream);
  int cluster(const DeviceBoxes& in, const Options& o, int* keep_out, int* count_out,
              cudaStream_t stream);
  // greedy()'s first two stages: filters and sorts on the device (idx_sorted_, sorted_boxes_,
  // num_valid_) and builds the bitmask matrix; returns in.n. Public for benchmarks (the scan's
  // share of greedy()).
  int rank(const DeviceBoxes& in, const Options& o, cudaStream_t stream);

 private:

  int capacity_ = 0, oro_capacity_ = 0;
  DeviceBuffer idx_in_, keys_in_, idx_sorted_, keys_sorted_, num_valid_;
  DeviceBuffer sorted_boxes_, sorted_groups_, sorted_area_, mask_, cub_temp_, alive_, dead_, changed_;
  DeviceBuffer oro_matrix_;
  size_t cub_temp_bytes_ = 0;
};

// Sparse exact greedy NMS (nms/nms_sparse_cuda.cu): greedy()'s indices for any number of boxes,
// its memory linear in them (about 900 bytes a box reserved), its work the pairs of boxes listed
// in a shared grid cell (nms/sparse_grid.h). Groups (classes, or images of a batch: image *
// classes + class) never suppress each other. One wait for the device (the size of the cell
// lists) per call. Needs threshold >= 0.
class GpuSparseNms {
 public:
  explicit GpuSparseNms(int capacity = 0) { reserve(capacity); }
  void reserve(int n);  // allocates; not for the hot path
  int capacity() const { return capacity_; }
  // Kept input indices in rank order -> keep_out[0..*count_out); both device pointers.
  void greedy(const DeviceBoxes& in, const Options& o, int* keep_out, int* count_out, cudaStream_t stream);
  // The rounds the last greedy() took (waits for the device; for benchmarks).
  int last_rounds() const;
  // For benchmarks: the lanes that scan a box's lists together (8 or 32), and the cell side as
  // the median box's side over 2^cell_shift (0..3). Results never depend on them.
  void tune(int lanes, int cell_shift);

 private:
  int capacity_ = 0, grid8_ = 0, grid32_ = 0, lanes_ = 32, cell_shift_ = 2;
  size_t temp_bytes_ = 0;
  DeviceBuffer keys_in_, keys_sorted_, idx_in_, order_, boxes_, groups_, flags_, listed_, loffsets_, queries_,
      qoffsets_, lists_, state_, lcursor_, blist_[2], lkeys_[2], lranks_[2], heads_, cell_start_, cell_keys_, qcursor_,
      qend_, small_, temp_;
};

// The exact greedy path of nms_on_device and batched_nms_on_device (nms/nms_choice.cu): the dense
// bitmask up to kDenseAlways boxes, the sparse greedy above kDenseGreedyMax (the dense mask's n^2 /
// 64 words); between them the sparse one where the share of boxes no higher-ranked box of their
// group overlaps (Fast NMS's survivors: at most greedy's kept), measured on a sample of 512
// boxes, passes sparse_share_above(n). The dense path's scan grows with the boxes kept, the
// sparse path's work with the overlapping pairs: on an H100 (2026-12-07) 10,000 boxes spread
// anywhere (67% kept) took 0.62 ms dense and 0.41 sparse, 10,000 in clusters (7% kept) 0.25 and
// 0.35; clustered sets break even near 30,000. The rule: 25% at 10,000 boxes, falling as
// n^-1.2 (7% at 30,000).
constexpr int kDenseAlways = 8192;
constexpr int kDenseGreedyMax = 30000;
class GreedyChooser {
 public:
  // True: the sparse path. Between the bounds one sample kernel and one wait for the device (the
  // calls that use it wait for their count anyway); elsewhere nothing runs.
  bool sparse(const DeviceBoxes& in, const Options& o, cudaStream_t stream);
  // The share measured by the last call (-1 where the size alone decided).
  double last_share() const { return share_; }
  static double sparse_share_above(int n);

 private:
  DeviceBuffer counts_;
  double share_ = -1;
};

// Exact greedy NMS on the path GreedyChooser picks for each set, the path's workspace grown to the
// set (it allocates only when a call brings more boxes than any before): the one way
// nms_on_device, batched_nms_on_device and the GPU window head run greedy.
class GpuGreedyNms {
 public:
  // Kept input indices in rank order -> keep_out[0..*count_out); true where the sparse path ran.
  bool greedy(const DeviceBoxes& in, const Options& o, int* keep_out, int* count_out, cudaStream_t stream);
  GpuNms& dense() { return dense_; }  // for the rules that run on the dense mask (Cluster-NMS, Oro)

 private:
  GreedyChooser path_;
  GpuNms dense_;
  GpuSparseNms sparse_;
};

// Host conveniences (copy in, run, copy out): for tests and simple callers.
std::vector<int> greedy_nms_gpu(const std::vector<Detection>& d, const Options& o);
std::vector<int> oro_nms_gpu(const std::vector<Detection>& d, const Options& o, int k,
                             int dmax = 0);  // dmax 0: n rounded up to a multiple of k
std::vector<int> sparse_greedy_nms_gpu(const std::vector<Detection>& d, const Options& o,
                                       GpuSparseNms* nms = nullptr);  // nullptr: one of its own
// Each image of a batch (images[b]) by one sparse call over all of them (groups: image x class).
std::vector<std::vector<int>> batched_greedy_nms_gpu(const std::vector<std::vector<Detection>>& images,
                                                     const Options& o);
std::vector<int> cluster_nms_gpu(const std::vector<Detection>& d, const Options& o,
                                 int* iterations = nullptr);

}  // namespace scenelab::nms
#endif  // SCENELAB_WITH_CUDA
