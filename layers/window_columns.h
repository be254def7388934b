// Which output columns of a strided window read inside the input row: the columns ox in [lo, hi)
// with ix = ox * stride + off in [0, in_w), of out_w columns (the convolutions' im2col and the
// CPU pooling, layers/conv.cpp and layers/pool.cpp).
#pragma once
#include <algorithm>

namespace scenelab {

inline void inside_columns(int off, int stride, int in_w, int out_w, int& lo, int& hi) {
  lo = std::min(out_w, off >= 0 ? 0 : (-off + stride - 1) / stride);
  hi = std::max(lo, std::min(out_w, in_w - off <= 0 ? 0 : (in_w - off - 1) / stride + 1));
}

}  // namespace scenelab
