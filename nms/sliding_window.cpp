#include "nms/sliding_window.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "nms/sliding_window_box.h"

namespace scenelab::nms {

std::vector<Detection> window_candidates_cpu(const float* prob, int H, int W, int cls,
                                             const WindowHeadOptions& o, const MapGeometry& g,
                                             int image_w, int image_h) {
  // S[(y) * (W + 1) + x]: sum of prob over rows < y, columns < x, in fixed point.
  std::vector<int64_t> S(size_t(H + 1) * (W + 1), 0);
  for (int y = 0; y < H; ++y) {
    int64_t row = 0;
    for (int x = 0; x < W; ++x) {
      row += window_fixed(prob[size_t(y) * W + x]);
      S[size_t(y + 1) * (W + 1) + x + 1] = S[size_t(y) * (W + 1) + x + 1] + row;
    }
  }
  std::vector<Detection> out;
  for (const auto& [h, w] : o.sizes) {
    if (h < 1 || w < 1 || h > H || w > W) continue;
    for (int y = 0; y + h <= H; y += o.stride)
      for (int x = 0; x + w <= W; x += o.stride) {
        const int64_t sum = S[size_t(y + h) * (W + 1) + x + w] - S[size_t(y) * (W + 1) + x + w] -
                            S[size_t(y + h) * (W + 1) + x] + S[size_t(y) * (W + 1) + x];
        const float score = window_score(sum, h, w);
        if (score >= o.threshold)
          out.push_back({window_box(y, x, h, w, g, image_w, image_h), score, cls});
      }
  }
  return out;
}

std::vector<Detection> detect_windows_cpu(const float* prob, int H, int W, int cls,
                                          const WindowHeadOptions& o, const MapGeometry& g,
                                          int image_w, int image_h) {
  auto cand = window_candidates_cpu(prob, H, W, cls, o, g, image_w, image_h);
  std::vector<Detection> out;
  for (int i : greedy_nms(cand, o.nms)) out.push_back(cand[size_t(i)]);
  return out;
}

}  // namespace scenelab::nms
