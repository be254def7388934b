// Sliding-window candidates on the GPU, fused with no host round trip: the hits (score >=
// threshold) of several score maps (an image pyramid's levels, one map each) compacted on the
// device in map order, then row-major -- a deterministic count, scan and write, the order the
// CPU path collects them in -- as boxes in image pixels (a corner per column and per row, tables
// made by the caller), then fused by GpuNms (exact greedy, or Oro's map/reduce), and the result
// brought back with one copy into page-locked memory.
//
// At most `capacity` hits are kept on the device (the fusion's cost grows with it); hits() says
// how many there were, so a caller seeing more can fuse on the host instead.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include <vector>

#include "nms/nms.h"
#include "nms/nms_cuda.h"

namespace scenelab::nms {

struct ScoreMap {
  const float* scores = nullptr;  // device memory, rows x cols, row-major; fixed once planned
  int rows = 0, cols = 0;
  std::vector<int> left, top;     // box corner of each column (cols) and row (rows), image pixels
  int box_w = 0, box_h = 0;
};

enum class WindowFusion { None, Greedy, Oro };

class GpuWindowCandidates {
 public:
  GpuWindowCandidates() = default;
  // Plans for these maps and up to `capacity` hits: tables uploaded, workspace sized (with
  // `oro`, Oro's capacity^2 matrix too). Allocates: not for the hot path, never while a CUDA
  // graph records.
  void plan(const std::vector<ScoreMap>& maps, int capacity, bool oro = false);
  int capacity() const { return capacity_; }
  // Enqueues on `stream` the compaction of the hits, their fusion by `rule` (options `o`; Oro
  // needs a plan with `oro`) and one copy of the result to the host. No allocation, no
  // synchronisation (it may be recorded into a CUDA graph): wait for the stream, then read
  // hits() and kept().
  void run(float threshold, WindowFusion rule, const Options& o, cudaStream_t stream);
  // Hits of the last run, all of them (beyond capacity(): kept() throws).
  int hits() const;
  // The detections kept by the last run's rule and each one's map: exact greedy in rank order
  // (as nms::greedy_nms), Oro in rank order (as nms::fast_nms), None every hit in compaction order.
  void kept(std::vector<Detection>& out, std::vector<int>& maps) const;

 private:
  int capacity_ = 0, chunks_ = 0, maps_ = 0;
  bool oro_ = false;
  DeviceBuffer levels_, chunk_level_, tables_, counts_, offsets_;
  DeviceBuffer boxes_, scores_, map_of_, keep_, keep_count_, flags_, result_;
  PinnedBuffer host_;
  GpuNms nms_;
};

}  // namespace scenelab::nms
#endif  // SCENELAB_WITH_CUDA
