// libFuzzer: the settings texts a model file's attributes or a command line carry - the
// detection head's (nms::parse_window_spec: a model's `detect`, --spec) and the HOG pyramid's
// (parse_pyramid_spec: a model's `pyramid`, --pyramid). A refused text leaves the options as they
// were; accepted settings lie in their documented ranges, and the head's settings then drive the
// CPU window head over a small map (its int arithmetic under UBSan): every box inside the image,
// no NaN score.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "job/pyramid_detector.h"
#include "nms/sliding_window.h"

using namespace scenelab;

namespace {

bool same(const nms::WindowHeadOptions& a, const nms::WindowHeadOptions& b) {
  return a.heights == b.heights && a.aspects == b.aspects && a.sizes == b.sizes && a.stride == b.stride &&
         a.stride_frac == b.stride_frac && a.ring == b.ring && a.threshold == b.threshold &&
         a.min_area == b.min_area && a.size_weight == b.size_weight && a.nms.threshold == b.nms.threshold;
}

bool same(const PyramidOptions& a, const PyramidOptions& b) {
  return a.window_w == b.window_w && a.window_h == b.window_h && a.scale == b.scale && a.levels == b.levels &&
         a.threshold == b.threshold && a.fusion == b.fusion && a.overlap == b.overlap &&
         a.min_group == b.min_group && a.group_eps == b.group_eps && a.candidates == b.candidates;
}

void check(bool ok) {
  if (!ok) std::abort();
}

void window_head(const std::string& text) {
  nms::WindowHeadOptions o;
  o.heights = {3, 5};  // a starting point unlike the defaults, so that "unchanged" means something
  o.sizes = nms::WindowHeadOptions::sizes_from(o.heights, o.aspects);
  const nms::WindowHeadOptions before = o;
  try {
    nms::parse_window_spec(text, o);
  } catch (const std::invalid_argument&) {
    check(same(o, before));
    return;
  }
  check(o.heights.size() <= size_t(nms::kMaxWindowList) && o.aspects.size() <= size_t(nms::kMaxWindowList));
  for (int h : o.heights) check(h >= 1 && h <= nms::kMaxWindowHeight);
  for (float a : o.aspects) check(a >= nms::kMinWindowAspect && a <= 1.f / nms::kMinWindowAspect);
  check(o.ring >= 0 && o.ring <= nms::kMaxWindowRing && o.stride_frac >= 0 && o.stride_frac <= nms::kMaxWindowRing);
  check(o.nms.threshold >= 0 && o.nms.threshold <= 1 && std::isfinite(o.threshold) && std::isfinite(o.size_weight));
  // A 19 x 27 map of a blob on a ramp, at a stride of 4.5 input pixels.
  const int H = 19, W = 27, image_w = 121, image_h = 86;
  std::vector<float> prob(size_t(H) * W);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      prob[size_t(y) * W + x] = (y > 4 && y < 13 && x > 6 && x < 20) ? 0.9f : float(x) / W * 0.3f;
  const nms::MapGeometry g{4.5, 4.5, 2.0, 2.0};
  for (const auto& d : nms::detect_windows_cpu(prob.data(), H, W, 1, o, g, image_w, image_h)) {
    check(!std::isnan(d.score));
    check(d.box.x1 >= 0 && d.box.x1 <= d.box.x2 && d.box.x2 <= image_w);
    check(d.box.y1 >= 0 && d.box.y1 <= d.box.y2 && d.box.y2 <= image_h);
  }
}

void pyramid(const std::string& text) {
  PyramidOptions o;
  o.levels = 17;
  const PyramidOptions before = o;
  try {
    parse_pyramid_spec(text, o);
  } catch (const Error&) {
    check(same(o, before));
    return;
  }
  check(o.window_w >= 1 && o.window_w <= kMaxPyramidWindow && o.window_h >= 1 && o.window_h <= kMaxPyramidWindow);
  check(o.scale > 1 && o.scale <= 16 && o.levels >= 1 && o.levels <= kMaxPyramidLevels);
  check(o.candidates >= 1 && o.candidates <= kMaxPyramidCandidates && o.min_group >= 0 && o.group_eps > 0);
  check(o.overlap >= 0 && o.overlap <= 1 && std::isfinite(o.threshold));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  window_head(text);
  pyramid(text);
  return 0;
}
