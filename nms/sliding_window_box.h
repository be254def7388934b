// Arithmetic shared verbatim by the CPU and GPU window heads (host and device), so both give
// bit-identical scores and boxes (compiled without FMA contraction on both sides).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"
#include "nms/sliding_window.h"

namespace scenelab::nms {

SL_HD inline int64_t window_fixed(float p) {
  // Probabilities outside [0, 1] (or NaN) are clamped: NaN counts as 0.
  const float q = p > 0.f ? (p < 1.f ? p : 1.f) : 0.f;
  return int64_t(double(q) * kProbScale + 0.5);
}

SL_HD inline float window_score(int64_t sum, int h, int w) {
  return float(double(sum) / (kProbScale * double(h) * double(w)));
}

// Map window rows [y, y+h), columns [x, x+w) -> input box covering those pixels' extents.
SL_HD inline double window_clamp(double v, double hi) { return v < 0.0 ? 0.0 : (v > hi ? hi : v); }

SL_HD inline Box window_box(int y, int x, int h, int w, const MapGeometry& g, int image_w,
                            int image_h) {
  const auto clampd = window_clamp;
  Box b;
  b.x1 = float(clampd(g.offset_x + g.stride_x * (double(x) - 0.5), image_w));
  b.y1 = float(clampd(g.offset_y + g.stride_y * (double(y) - 0.5), image_h));
  b.x2 = float(clampd(g.offset_x + g.stride_x * (double(x + w) - 0.5), image_w));
  b.y2 = float(clampd(g.offset_y + g.stride_y * (double(y + h) - 0.5), image_h));
  return b;
}

}  // namespace scenelab::nms
