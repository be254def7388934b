// Arithmetic of Dalal and Triggs' HOG shared verbatim by the CPU and GPU paths of the HOG layers
// (layers/hog_gradient.cpp, layers/hog_blocks.cpp, kernels/hog_cuda.cu), written to give what
// OpenCV's HOGDescriptor gives (the oracle of tests/tools/peer_hog_test.py):
// - gradient: centred [-1 0 1] differences of the (optionally square-rooted, "gamma") 8-bit
//   values, borders reflected without repeating the edge pixel (OpenCV's BORDER_REFLECT_101);
//   of three channels, the one of largest squared magnitude (ties: the last of R, G, B, as
//   OpenCV 4.6 chooses);
// - orientation: OpenCV's fast atan2 (a degree-7 odd polynomial, about 0.01 degrees), unsigned
//   (0..180) or signed, split linearly between the two nearest of `bins` bin centres;
// - blocks: each pixel of a block votes into the cells around it with bilinear spatial weights
//   (zero outside the block) times a Gaussian of its distance to the block centre;
// - L2-Hys: v / (|v| + 0.1 * len), clipped at `clip`, then v / (|v| + 1e-3).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace scenelab::hog {

// Products and sums rounded one at a time, never fused into an FMA: OpenCV's HOG (SSE, no FMA)
// rounds so, and which channel wins a tie of magnitudes, or which bin a pixel falls in at a bin's
// edge, turns on the last bit. (The host files using this are compiled with -ffp-contract=off.)
SL_HD inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SL_HD inline float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
// dx^2 + dy^2, unfused.
SL_HD inline float sq_mag(float dx, float dy) { return add_rn(mul_rn(dx, dx), mul_rn(dy, dy)); }

// OpenCV's reflect-101 index for i in [-1, n].
SL_HD inline int reflect101(int i, int n) {
  if (n == 1) return 0;
  if (i < 0) return -i;
  if (i >= n) return 2 * n - 2 - i;
  return i;
}

// Angle of (x, y) in degrees, [0, 360), by OpenCV's polynomial.
SL_HD inline float fast_atan2_deg(float y, float x) {
  const float k = 57.295779513082323f;  // 180 / pi
  const float p1 = 0.9997878412794807f * k, p3 = -0.3258083974640975f * k;
  const float p5 = 0.1555786518463281f * k, p7 = -0.04432655554792128f * k;
  const float eps = 2.220446049250313e-16f;
  const float ax = std::fabs(x), ay = std::fabs(y);
  // Written as selects (one division), so loops over pixels vectorise; the same arithmetic as
  // OpenCV's branches.
  const bool flat = ax >= ay;
  const float c = (flat ? ay : ax) / ((flat ? ax : ay) + eps), c2 = mul_rn(c, c);
  const float poly = mul_rn(add_rn(mul_rn(add_rn(mul_rn(add_rn(mul_rn(p7, c2), p5), c2), p3), c2), p1), c);
  float a = flat ? poly : 90.f - poly;
  a = x < 0 ? 180.f - a : a;
  a = y < 0 ? 360.f - a : a;
  return a;
}

// The 8-bit value an input pixel in [0, 1] (a byte / 255) stands for, square-rooted with gamma:
// clamped (NaN -> 0), truncated, in float arithmetic only (so that loops of it vectorise).
SL_HD inline float byte_value(float v, bool gamma) {
  const float s = v * 255.f + 0.5f;
  const float b = truncf(s > 0.f ? (s < 255.f ? s : 255.f) : 0.f);
  return gamma ? sqrtf(b) : b;
}

struct Vote {
  float w0, w1;  // magnitude shares of the lower and upper bin
  int bin;       // the lower bin (the upper is bin + 1, wrapping)
};

// The vote of a gradient (dx, dy): OpenCV's magnitude and bin split.
SL_HD inline Vote vote_of(float dx, float dy, int bins, bool signed_gradient) {
  const float mag = sqrtf(sq_mag(dx, dy));
  const float rad = mul_rn(fast_atan2_deg(dy, dx), 0.017453292519943295f);  // OpenCV: degrees * pi/180
  const float scale = signed_gradient ? float(bins / (2.0 * 3.14159265358979323846))
                                      : float(bins / 3.14159265358979323846);
  float a = add_rn(mul_rn(rad, scale), -0.5f);
  int h = int(floorf(a));
  a -= float(h);
  h = h < 0 ? h + bins : (h >= bins ? h - bins : h);
  return Vote{mul_rn(mag, 1.f - a), mul_rn(mag, a), h};
}

// Spatial weight of pixel coordinate p (0..block_px-1) for cell c (0..cells-1) of a block of cells of
// `cell` pixels: bilinear between cell centres; the share of a cell outside the block is dropped.
SL_HD inline float cell_weight(int p, int c, int cell) {
  float pos = (float(p) + 0.5f) / float(cell) - 0.5f;
  const int c0 = int(floorf(pos));
  pos -= float(c0);
  if (c == c0) return 1.f - pos;  // the cell below (or the last cell, from beyond its centre)
  if (c == c0 + 1) return pos;     // the cell above (or the first, from before its centre)
  return 0.f;
}

// Gaussian weight of block pixel (i, j) (rows, columns) for a block of bh x bw pixels.
SL_HD inline float block_gauss(int i, int j, int bh, int bw, float sigma) {
  const float di = float(i) - float(bh) * 0.5f, dj = float(j) - float(bw) * 0.5f;
  const float scale = 1.f / (sigma * sigma * 2.f);
  return expf(-(di * di + dj * dj) * scale);
}

// L2-Hys in place over len values.
SL_HD inline void l2hys(float* v, int len, float clip) {
  float sum = 0.f;
  for (int i = 0; i < len; ++i) sum += v[i] * v[i];
  float scale = 1.f / (sqrtf(sum) + float(len) * 0.1f);
  sum = 0.f;
  for (int i = 0; i < len; ++i) {
    const float t = v[i] * scale;
    v[i] = t < clip ? t : clip;
    sum += v[i] * v[i];
  }
  scale = 1.f / (sqrtf(sum) + 1e-3f);
  for (int i = 0; i < len; ++i) v[i] *= scale;
}

}  // namespace scenelab::hog
