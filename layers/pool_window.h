// The pool layer's window, and its mean or largest value, one definition for its CPU path and
// its kernel (layers/pool.cpp, kernels/pool.cu).
#pragma once
#include <cstddef>

#include "core/host_device.h"

namespace scenelab {

struct PoolWindow {
  int kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  bool count_pad = false;  // divide by the whole window (padding as zeros), else by its pixels inside
  bool max = false;        // the largest of the window's pixels inside the map (padding never wins)
};

// What the mean of output pixel (oy, ox)'s window divides by: its pixels inside the h x w map, or
// with count_pad the window clipped to the padded map (PyTorch's and ONNX's divisor).
SL_HD inline int pool_count(int h, int w, int oy, int ox, const PoolWindow& p) {
  const int y0 = oy * p.sh - p.pt, x0 = ox * p.sw - p.pl;
  if (p.count_pad) {
    const int ylo = y0 < -p.pt ? -p.pt : y0, yhi = y0 + p.kh > h + p.pb ? h + p.pb : y0 + p.kh;
    const int xlo = x0 < -p.pl ? -p.pl : x0, xhi = x0 + p.kw > w + p.pr ? w + p.pr : x0 + p.kw;
    return (yhi - ylo) * (xhi - xlo);
  }
  const int rows = (y0 + p.kh < h ? y0 + p.kh : h) - (y0 > 0 ? y0 : 0);
  const int cols = (x0 + p.kw < w ? x0 + p.kw : w) - (x0 > 0 ? x0 : 0);
  return rows > 0 && cols > 0 ? rows * cols : 0;
}

// The mean (or, with max, the largest value) of output pixel (oy, ox)'s window over a plane of
// h x w values, at(i, j) the one at row i, column j as a float; the sum in float, in row order.
template <typename At>
SL_HD inline float pool_value_at(const At& at, int h, int w, int oy, int ox, const PoolWindow& p) {
  const int y0 = oy * p.sh - p.pt, x0 = ox * p.sw - p.pl;
  if (p.max) {  // pads below the window: at least one pixel is inside
    float m = -3.402823466e38f;
    for (int i = y0 < 0 ? 0 : y0; i < y0 + p.kh && i < h; ++i)
      for (int j = x0 < 0 ? 0 : x0; j < x0 + p.kw && j < w; ++j) {
        const float v = at(i, j);
        m = v > m || v != v ? v : m;  // NaN wins, as in max pooling everywhere
      }
    return m;
  }
  float sum = 0.f;
  for (int i = y0; i < y0 + p.kh; ++i) {
    if (i < 0 || i >= h) continue;
    for (int j = x0; j < x0 + p.kw; ++j) {
      if (j < 0 || j >= w) continue;
      sum += at(i, j);
    }
  }
  const int count = pool_count(h, w, oy, ox, p);
  return count > 0 ? sum / float(count) : 0.f;
}

// A plane of h x w floats, row after row (f32 NCHW).
struct PlaneAt {
  const float* s;
  int w;
  SL_HD float operator()(int i, int j) const { return s[size_t(i) * w + j]; }
};

SL_HD inline float pool_value(const float* s, int h, int w, int oy, int ox, const PoolWindow& p) {
  return pool_value_at(PlaneAt{s, w}, h, w, oy, ox, p);
}

}  // namespace scenelab
