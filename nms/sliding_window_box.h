// Arithmetic shared verbatim by the CPU and GPU window heads (host and device), so both give
// bit-identical scores and boxes (compiled without FMA contraction on both sides).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"
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

// Sum of the integral image S ((H+1) x (W+1)) over rows [y0, y1), columns [x0, x1).
SL_HD inline int64_t box_sum(const int64_t* S, int W, int y0, int x0, int y1, int x1) {
  return S[size_t(y1) * (W + 1) + x1] - S[size_t(y0) * (W + 1) + x1] - S[size_t(y1) * (W + 1) + x0] +
         S[size_t(y0) * (W + 1) + x0];
}

SL_HD inline int ring_width(float ring, int extent) {
  const int r = int(ring * float(extent) + 0.5f);
  return r < 1 ? 1 : r;
}

// The window's objectness: its mean probability, less (ring > 0) the largest mean over the four
// strips of the ring around it (above, below: the ring's full width; left, right: the window's
// height), each clipped to the map (a strip with nothing left is not counted). The largest side,
// not the ring's mean: a window at one edge of an object has object on one side only.
SL_HD inline float window_objectness(const int64_t* S, int H, int W, int y, int x, int h, int w,
                                     float ring) {
  const int64_t in = box_sum(S, W, y, x, y + h, x + w);
  const double mean_in = double(in) / (kProbScale * double(h) * double(w));
  if (ring <= 0.f) return float(mean_in);
  const int ry = ring_width(ring, h), rx = ring_width(ring, w);
  const int y0 = y - ry < 0 ? 0 : y - ry, x0 = x - rx < 0 ? 0 : x - rx;
  const int y1 = y + h + ry > H ? H : y + h + ry, x1 = x + w + rx > W ? W : x + w + rx;
  double side = 0.0;
  const int strips[4][4] = {{y0, x0, y, x1}, {y + h, x0, y1, x1}, {y, x0, y + h, x}, {y, x + w, y + h, x1}};
  for (const auto& s : strips) {
    const double area = double(s[2] - s[0]) * double(s[3] - s[1]);
    if (area <= 0.0) continue;
    const double m = double(box_sum(S, W, s[0], s[1], s[2], s[3])) / (kProbScale * area);
    if (m > side) side = m;
  }
  return float(mean_in - side);
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
