#include "nms/sliding_window.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <utility>

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
  for (const SlidSize& z : slid_sizes(H, W, o, &g))
    for (int y = 0; y + z.h <= H; y += z.stride)
      for (int x = 0; x + z.w <= W; x += z.stride) {
        const float obj = window_objectness(S.data(), H, W, y, x, z.h, z.w, o.ring);
        if (obj >= o.threshold)
          out.push_back({window_box(y, x, z.h, z.w, g, image_w, image_h), obj + z.bonus, cls});
      }
  return out;
}

std::vector<SlidSize> slid_sizes(int H, int W, const WindowHeadOptions& o, const MapGeometry* g) {
  std::vector<SlidSize> out;
  const double ref = std::max(1.0, double(o.min_area));
  for (const auto& [h, w] : o.sizes) {
    if (h < 1 || w < 1 || h > H || w > W) continue;
    float bonus = 0.f;
    if (g) {
      const double area = double(h) * std::abs(g->stride_y) * double(w) * std::abs(g->stride_x);
      if (area < double(o.min_area)) continue;
      bonus = float(double(o.size_weight) * std::log(area / ref));
    }
    out.push_back({h, w, o.stride_of(h, w), bonus});
  }
  return out;
}

std::vector<int> WindowHeadOptions::default_heights() { return {3, 4, 6, 8, 11, 16, 22, 32, 45}; }
std::vector<float> WindowHeadOptions::default_aspects() { return {0.4f, 0.7f, 1.f, 1.4f, 2.f}; }
std::vector<std::pair<int, int>> WindowHeadOptions::default_sizes() {
  return sizes_from(default_heights(), default_aspects());
}

std::vector<std::pair<int, int>> WindowHeadOptions::sizes_from(const std::vector<int>& heights,
                                                               const std::vector<float>& aspects) {
  std::vector<std::pair<int, int>> s;
  // Larger first: an object filled by many windows of equal score is reported by the largest.
  std::vector<int> hs = heights;
  std::sort(hs.rbegin(), hs.rend());
  for (int h : hs)
    for (float a : aspects) {
      const int w = std::max(1, int(std::lround(h * a)));
      if (std::find(s.begin(), s.end(), std::make_pair(h, w)) == s.end()) s.emplace_back(h, w);
    }
  return s;
}

int WindowHeadOptions::stride_of(int h, int w) const {
  if (stride_frac <= 0.f) return std::max(1, stride);
  return std::max(1, int(std::lround(stride_frac * std::min(h, w))));
}

namespace {
std::string short_number(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(f));
  return buf;
}
}  // namespace

void parse_window_spec(const std::string& spec, WindowHeadOptions& out) {
  WindowHeadOptions o = out;  // `out` changes only when the whole text is valid
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("detection settings '" + spec + "': " + why);
  };
  auto number = [&](const std::string& v) {
    char* end = nullptr;
    const float f = std::strtof(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(f)) fail("'" + v + "' is not a number");
    return f;
  };
  // Each setting within the range where the head's integer arithmetic (window sizes, rings,
  // strides and their sums, in int) cannot overflow; a model file is untrusted input.
  auto in_range = [&](const std::string& k, const std::string& v, float lo, float hi) {
    const float f = number(v);
    if (!(f >= lo && f <= hi)) fail(k + "=" + v + " is outside [" + short_number(lo) + ", " + short_number(hi) + "]");
    return f;
  };
  auto list = [&](const std::string& k, const std::string& v, float lo, float hi) {
    std::vector<float> out;
    size_t a = 0;
    while (a <= v.size()) {
      const size_t b = std::min(v.find(',', a), v.size());
      out.push_back(in_range(k, v.substr(a, b - a), lo, hi));
      if (out.size() > size_t(kMaxWindowList))
        fail(k + " lists more than " + std::to_string(kMaxWindowList) + " values");
      a = b + 1;
    }
    return out;
  };
  std::vector<int> heights;
  std::vector<float> aspects;
  size_t a = 0;
  while (a < spec.size()) {
    while (a < spec.size() && spec[a] == ' ') ++a;
    if (a >= spec.size()) break;
    size_t b = spec.find(' ', a);
    if (b == std::string::npos) b = spec.size();
    const std::string item = spec.substr(a, b - a);
    a = b;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) fail("'" + item + "' is not key=value");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "threshold") o.threshold = number(v);
    else if (k == "ring") o.ring = in_range(k, v, 0.f, kMaxWindowRing);
    else if (k == "nms") o.nms.threshold = in_range(k, v, 0.f, 1.f);
    else if (k == "stride") o.stride_frac = in_range(k, v, 0.f, kMaxWindowRing);
    else if (k == "min_area") o.min_area = in_range(k, v, 0.f, 1e12f);
    else if (k == "size_weight") o.size_weight = number(v);
    else if (k == "heights") {
      heights.clear();
      for (float f : list(k, v, 1.f, float(kMaxWindowHeight))) {
        if (f != std::floor(f)) fail("heights=" + v + ": " + short_number(f) + " is not a whole number");
        heights.push_back(int(f));
      }
    } else if (k == "aspects") aspects = list(k, v, kMinWindowAspect, 1.f / kMinWindowAspect);
    else fail("unknown key '" + k + "' (threshold, ring, nms, stride, heights, aspects, min_area, size_weight)");
  }
  if (!heights.empty() || !aspects.empty()) {  // the one not named keeps its value in `o`
    if (heights.empty()) heights = o.heights;
    if (aspects.empty()) aspects = o.aspects;
    o.heights = heights;
    o.aspects = aspects;
    o.sizes = WindowHeadOptions::sizes_from(heights, aspects);
  }
  out = std::move(o);
}

std::vector<Detection> detect_windows_cpu(const float* prob, int H, int W, int cls,
                                          const WindowHeadOptions& o, const MapGeometry& g,
                                          int image_w, int image_h) {
  auto cand = window_candidates_cpu(prob, H, W, cls, o, g, image_w, image_h);
  std::vector<Detection> out;
  for (int i : greedy_nms_auto(cand, o.nms)) out.push_back(cand[size_t(i)]);
  return out;
}

}  // namespace scenelab::nms
