// Bilinear resizing of 8-bit images in fixed point, as OpenCV's INTER_LINEAR_EXACT computes it
// (so a HOG pyramid level equals the one OpenCV's detectMultiScale builds), shared verbatim by
// the CPU backend and the CUDA kernel: source coordinate (d + 0.5) * src/dst - 0.5; weights in
// 8.8 fixed point (the upper one rounded, the lower 256 minus it); beyond the outer pixel
// centres the edge pixel; a row pass to 8.8, a column pass to 16.16, rounded half up to 8 bits.
// (OpenCV takes its area path for an exact 2x shrink; this does not.)
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace scenelab {

struct LinearTap {
  int i0;      // first source index
  int w1;      // weight of i0 + 1 in 1/256 (0: i0 alone)
};

SL_HD inline LinearTap linear_tap(int d, int src_n, int dst_n) {
  const double scale = 1.0 / (double(dst_n) / double(src_n));
  const double f = scale * (double(d) + 0.5) - 0.5;
  const int i = int(floor(f));
  if (i >= 0 && src_n > 1) {
    if (i < src_n - 1) return LinearTap{i, int(nearbyint((f - double(i)) * 256.0))};
    return LinearTap{src_n - 1, 0};
  }
  return LinearTap{0, 0};
}

// The resized value of channel ch at (ty, tx) from interleaved 8-bit pixels (c channels, row
// stride w * c).
SL_HD inline uint8_t linear_sample(const uint8_t* src, int w, int c, int ch, LinearTap ty, LinearTap tx) {
  auto row = [&](int y) -> uint32_t {
    const uint8_t* p = src + (size_t(y) * w + size_t(tx.i0)) * c + ch;
    return tx.w1 ? uint32_t(256 - tx.w1) * p[0] + uint32_t(tx.w1) * p[c] : uint32_t(p[0]) << 8;
  };
  const uint32_t top = row(ty.i0);
  const uint32_t v = ty.w1 ? top * uint32_t(256 - ty.w1) + row(ty.i0 + 1) * uint32_t(ty.w1) : top << 8;
  const uint32_t r = (v + (1u << 15)) >> 16;
  return uint8_t(r > 255u ? 255u : r);
}

}  // namespace scenelab
