// Source coordinate of output index i for the upsample layer, shared by its CPU and GPU paths.
#pragma once
#include <cmath>

#include "core/host_device.h"

namespace scenelab {

struct UpsampleTap {
  int i0, i1;
  float w1;  // weight of i1; i0 gets 1 - w1
};

// geometry: align=geometry; bilinear: mode; see layers/upsample.cpp for the two conventions.
SL_HD inline UpsampleTap upsample_tap(int i, int in, int out, bool geometry, bool bilinear,
                                      double in_off, double in_stride, double out_off,
                                      double out_stride) {
  const double scale = double(in) / out;
  double src;
  if (geometry)
    src = (out_off + out_stride * i - in_off) / in_stride;
  else if (bilinear)
    src = (i + 0.5) * scale - 0.5;
  else
    src = floor(double(float(i) * float(scale)));  // PyTorch computes this in float
  src = src < 0.0 ? 0.0 : (src > double(in - 1) ? double(in - 1) : src);
  if (!bilinear) {
    int k = geometry ? int(floor(src + 0.5)) : int(src);
    k = k < in - 1 ? k : in - 1;
    return {k, k, 0.f};
  }
  const int i0 = int(floor(src));
  const int i1 = i0 + 1 < in - 1 ? i0 + 1 : in - 1;
  return {i0, i1, float(src - i0)};
}

}  // namespace scenelab
