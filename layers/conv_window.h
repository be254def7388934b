// The conv_transpose layer's window and sum, one definition for its CPU path and its kernel
// (layers/conv_transpose.cpp, kernels/conv_transpose.cu).
#pragma once
#include <cstddef>

#include "core/host_device.h"

namespace scenelab {

struct ConvTWindow {
  int kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, groups = 1;
};

// Output (n, o, oy, ox) of a transposed convolution before bias: the sum over the group's input
// channels c and kernel taps (i, j) with iy = (oy + pt - i dh) / sh whole and inside (and so for
// x) of x[n, c, iy, ix] w[c, o - group's first, i, j]; w is [cin, cout / groups, kh, kw]. In float,
// channel by channel, taps in row order.
SL_HD inline float conv_transpose_at(const float* x, int cin, int h, int w, int cout, int n, int o, int oy, int ox,
                                     const float* wt, const ConvTWindow& c) {
  const int cin_g = cin / c.groups, cout_g = cout / c.groups, g = o / cout_g, og = o % cout_g;
  float sum = 0.f;
  for (int ci = g * cin_g; ci < (g + 1) * cin_g; ++ci) {
    const float* src = x + (size_t(n) * cin + ci) * size_t(h) * w;
    const float* k = wt + (size_t(ci) * cout_g + og) * size_t(c.kh) * c.kw;
    for (int i = 0; i < c.kh; ++i) {
      const int ty = oy + c.pt - i * c.dh;
      if (ty < 0 || ty % c.sh) continue;
      const int iy = ty / c.sh;
      if (iy >= h) continue;
      for (int j = 0; j < c.kw; ++j) {
        const int tx = ox + c.pl - j * c.dw;
        if (tx < 0 || tx % c.sw) continue;
        const int ix = tx / c.sw;
        if (ix < w) sum += k[i * c.kw + j] * src[size_t(iy) * w + ix];
      }
    }
  }
  return sum;
}

}  // namespace scenelab
