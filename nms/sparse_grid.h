// The grid geometry of the GPU's sparse exact greedy NMS (nms_sparse_cuda.cu), host and device
// code alike so that the CPU tests check it (tests/nms/sparse_grid_test.cpp).
//
// Two ways to find, for a box a, every higher-ranked box b that can suppress it:
// - Probe mode (IoU with a threshold t >= 0.2). IoU(a, b) > t gives |a n b| > t |b|, so the
//   x-interval a and b share is longer than t times b's width (and the same in y). An interval
//   that long inside b's holds one of b's "probe points" x1 + k t w (k = 1..m, k t < 1; m <= 4). So a
//   holds one of b's m x m probe points: b is listed in the cells of its probe points (one cell
//   at t >= 0.5: its centre), and a looks through the cells its extent covers. Both also give
//   max side(b) > t max side(a), which bounds whom a box too wide for the grid must look at.
// - Cover mode (any other threshold, and the over-candidate criterion): b is listed in every
//   cell it covers, a looks through the cells it covers (a shared cell for any pair that meets).
// The extents are widened by a margin above the float rounding of the overlap (relative to the
// coordinates and to the box's size), so that the float test can never find a pair the grid
// did not. The margin only adds candidates; it never decides.
#pragma once
#include <cmath>

#if defined(__CUDACC__)
#define SL_GRID_FN __host__ __device__ __forceinline__
#else
#define SL_GRID_FN inline
#endif

namespace scenelab::nms::grid {

constexpr double kMaxCell = 1099511627776.0;  // 2^40: cell indices beyond are not binned
constexpr int kMaxProbes = 4;                  // probe points along an axis (t > 0.2)

// Cells [x1, x2] x [y1, y2] of a box's widened extent; ok false where the grid cannot index it.
struct Span {
  long long x1, y1, x2, y2;
  bool ok;
};

// Probe points along an axis for threshold t: the k >= 1 with k t < 1 (0 when t >= 1: nothing
// suppresses). Above kMaxProbes (t < 0.2) the probe mode is not used.
SL_GRID_FN int probes_for(double t) {
  int m = 0;
  while (m <= kMaxProbes && (m + 1) * t < 1.0) ++m;
  return m;
}

SL_GRID_FN bool indexable(double c) { return fabs(c) < kMaxCell; }

// The cells a box's extent [x1, x2 + e] x [y1, y2 + e] covers, widened by the margin.
SL_GRID_FN Span cover_span(float x1, float y1, float x2, float y2, float e, double side) {
  const double w = fabs(double(x2) - x1 + e), h = fabs(double(y2) - y1 + e);
  const double mx = (fabs(double(x1)) + fabs(double(x2))) * 1e-6 + w * 1e-4 + 1e-30;
  const double my = (fabs(double(y1)) + fabs(double(y2))) * 1e-6 + h * 1e-4 + 1e-30;
  const double fx1 = floor((x1 - mx) / side), fy1 = floor((y1 - my) / side);
  const double fx2 = floor((double(x2) + e + mx) / side), fy2 = floor((double(y2) + e + my) / side);
  Span s{0, 0, 0, 0, false};
  if (!(indexable(fx1) && indexable(fy1) && indexable(fx2) && indexable(fy2))) return s;
  s = {(long long)fx1, (long long)fy1, (long long)fx2, (long long)fy2, true};
  return s;
}

// Probe point k (1..m) along one axis of the extent [lo, hi + e], as a cell index; false where
// the grid cannot index it.
SL_GRID_FN bool probe_cell(float lo, float hi, float e, double t, int k, double side, long long& cell) {
  const double w = double(hi) - lo + e;
  const double c = floor((double(lo) + k * t * w) / side);
  if (!indexable(c)) return false;
  cell = (long long)c;
  return true;
}

// The larger side as the overlap test computes the sides (float, the same operations).
SL_GRID_FN float max_side(float x1, float y1, float x2, float y2, float e) {
  return fmaxf(x2 - x1 + e, y2 - y1 + e);
}

}  // namespace scenelab::nms::grid
