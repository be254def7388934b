#include "job/pyramid_detector.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <sstream>

#include "core/error.h"
#include "engine/graph.h"
#include "core/parallel.h"
#include "core/parse_number.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "nms/window_candidates.h"
#else
namespace scenelab::nms {
class GpuWindowCandidates {};  // no GPU fusion without CUDA
}
#endif

namespace scenelab {
namespace {

double parse_double(const std::string& key, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  SL_REQUIRE(!v.empty() && *end == '\0' && std::isfinite(x), "pyramid spec: ", key, "=", v, " is not a number");
  return x;
}

double seconds_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// OpenCV's cvRound on doubles: to nearest, ties to even.
int round_int(double v) { return int(std::nearbyint(v)); }

// A window's corner in image pixels (left from its column, top from its row): its top-left in
// level pixels from its centre (the score node's geometry), then scaled to the image, as OpenCV.
int window_corner(double offset, double stride, int i, int window, double scale) {
  const double level = offset + i * stride - (window - 1) / 2.0;
  return round_int(round_int(level) * scale);
}

}  // namespace

Fusion parse_fusion(const std::string& name) {
  if (name == "none") return Fusion::None;
  if (name == "greedy") return Fusion::Greedy;
  if (name == "oro") return Fusion::Oro;
  if (name == "group") return Fusion::Group;
  throw_error("unknown fusion '", name, "' (expected none, greedy, oro or group)");
}

const char* fusion_name(Fusion f) {
  switch (f) {
    case Fusion::None: return "none";
    case Fusion::Greedy: return "greedy";
    case Fusion::Oro: return "oro";
    case Fusion::Group: return "group";
  }
  return "?";
}

void parse_pyramid_spec(const std::string& spec, PyramidOptions& out) {
  PyramidOptions o = out;  // `out` changes only when the whole text is valid
  // Ranges (a model file is untrusted input): every level is a planned graph, so the number of
  // levels is bounded, and every count fits the int arithmetic that uses it.
  auto integer = [](const std::string& key, const std::string& v, long lo, long hi) {
    bool integer = false;
    const auto x = parse_long(v, lo, hi, &integer);
    SL_REQUIRE(integer, "pyramid spec: ", key, "=", v, " is not an integer");
    SL_REQUIRE(x, "pyramid spec: ", key, "=", v, " is outside [", lo, ", ", hi, "]");
    return int(*x);
  };
  auto real = [](const std::string& key, const std::string& v, double lo, double hi, bool open_lo) {
    const double x = parse_double(key, v);
    SL_REQUIRE(open_lo ? x > lo && x <= hi : x >= lo && x <= hi, "pyramid spec: ", key, "=", v, " is outside ",
               open_lo ? "(" : "[", lo, ", ", hi, "]");
    return x;
  };
  std::stringstream ss(spec);
  std::string item;
  while (ss >> item) {
    const size_t eq = item.find('=');
    SL_REQUIRE(eq != std::string::npos && eq > 0, "pyramid spec: expected key=value, got '", item, "'");
    const std::string key = item.substr(0, eq), v = item.substr(eq + 1);
    if (key == "window") {
      const size_t x = v.find('x');
      SL_REQUIRE(x != std::string::npos, "pyramid spec: window=", v, " is not WxH");
      o.window_w = integer(key, v.substr(0, x), 1, kMaxPyramidWindow);
      o.window_h = integer(key, v.substr(x + 1), 1, kMaxPyramidWindow);
    } else if (key == "scale") {
      o.scale = real(key, v, 1.0, 16.0, /*open_lo=*/true);
    } else if (key == "levels") {
      o.levels = integer(key, v, 1, kMaxPyramidLevels);
    } else if (key == "threshold") {
      o.threshold = float(real(key, v, -1e30, 1e30, false));
    } else if (key == "fusion") {
      o.fusion = parse_fusion(v);
    } else if (key == "overlap") {
      o.overlap = float(real(key, v, 0.0, 1.0, false));
    } else if (key == "group") {
      o.min_group = integer(key, v, 0, 1 << 20);
    } else if (key == "candidates") {
      o.candidates = integer(key, v, 1, kMaxPyramidCandidates);
    } else if (key == "eps") {
      o.group_eps = float(real(key, v, 0.0, 16.0, /*open_lo=*/true));
    } else {
      throw_error("pyramid spec: unknown key '", key,
                  "' (expected window, scale, levels, threshold, fusion, overlap, group, eps, candidates)");
    }
  }
  out = o;
}

struct PyramidDetector::Level {
  double scale;
  int h, w;
  Graph* graph = nullptr;  // planned by plans_
  Tensor scores;  // host copy of the last run, allocated when planned
};

PyramidDetector::PyramidDetector(const Model& model, const Backend& backend, const std::string& overrides)
    : model_(model), backend_(backend), plans_(model, backend, Plans::Options{nullptr, "", 0}) {
  SL_REQUIRE(!model.pyramid.empty(), "model '", model.name,
             "' is no sliding-window detector (it has no 'pyramid' attribute)");
  try {
    parse_pyramid_spec(model.pyramid, opt_);
  } catch (const Error& e) {
    throw_error("model '", model.name, "': ", e.what());
  }
  parse_pyramid_spec(overrides, opt_);
  SL_REQUIRE(model.graph.outputs.size() == 1, "model '", model.name,
             "': a sliding-window detector has one output (the window scores), it has ",
             model.graph.outputs.size());
  SL_REQUIRE(model.graph.input_channels == 3, "model '", model.name, "': a pyramid detector reads RGB, the model takes ",
             model.graph.input_channels, " channels");
  score_node_ = model.graph.outputs[0];
}

PyramidDetector::~PyramidDetector() = default;

std::vector<double> PyramidDetector::level_scales(int h, int w) const {
  // detectMultiScale's rule: a level is kept while its rounded size holds the window.
  std::vector<double> s;
  double scale = 1.0;
  for (int l = 0; l < opt_.levels; ++l) {
    if (round_int(w / scale) < opt_.window_w || round_int(h / scale) < opt_.window_h) break;
    s.push_back(scale);
    scale *= opt_.scale;
  }
  if (s.empty()) s.push_back(1.0);
  return s;
}

void PyramidDetector::plan_for(int h, int w) {
  if (h == planned_h_ && w == planned_w_) return;
  for (auto& r : replays_) r = nullptr;
  warm_ = capture_failed_ = false;
  gpu_.reset();
  levels_.clear();
  plans_.clear();
  planned_h_ = planned_w_ = 0;
  for (double s : level_scales(h, w)) {
    auto lv = std::make_unique<Level>();
    lv->scale = s;
    lv->h = round_int(h / s);
    lv->w = round_int(w / s);
    if (lv->h < opt_.window_h || lv->w < opt_.window_w) break;  // smaller than one window
    PlanIO io;
    io.u8_input = true;
    io.source_h = h;
    io.source_w = w;
    io.u8_shared = !levels_.empty() && backend_.cuda();  // the first level's upload, on the GPU
    try {
      lv->graph = &plans_.get(1, lv->h, lv->w, io).graph;
      lv->graph->set_profiling(profiling_);
    } catch (const Error& e) {
      throw_error("model '", model_.name, "' at pyramid level ", levels_.size(), " (", lv->w, "x", lv->h,
                  " of a ", w, "x", h, " image): ", e.what());
    }
    // The score map must be one score per window position: (size - window) / stride + 1.
    const Shape sh = lv->graph->shape_of(score_node_);
    const Geometry g = lv->graph->geometry_of(score_node_);
    const int sx = int(g.stride_x), sy = int(g.stride_y);
    SL_REQUIRE(sh.c == 1 && sx >= 1 && sy >= 1 && sh.w == (lv->w - opt_.window_w) / sx + 1 &&
                   sh.h == (lv->h - opt_.window_h) / sy + 1,
               "model '", model_.name, "': its score map at ", lv->w, "x", lv->h, " is ", sh.str(), " at stride ",
               g.stride_x, ", which is not one score per ", opt_.window_w, "x", opt_.window_h,
               " window: the pyramid's window does not match the classifier");
    lv->scores = Tensor(sh);
    levels_.push_back(std::move(lv));
  }
#ifdef SCENELAB_WITH_CUDA
  bool f32_scores = true;  // else (a model scoring in another format) the host collects the hits
  for (const auto& lv : levels_) f32_scores = f32_scores && lv->graph->format_of(score_node_) == Format{};
  if (backend_.cuda() && f32_scores) {
    // The hits compacted and fused on the GPU from every level's score map (planned buffers).
    std::vector<nms::ScoreMap> maps;
    for (const auto& lv : levels_) {
      const Geometry g = lv->graph->geometry_of(score_node_);
      const TensorView v = lv->graph->output(score_node_);
      nms::ScoreMap m;
      m.scores = v.f32();
      m.rows = v.shape.h;
      m.cols = v.shape.w;
      for (int c = 0; c < m.cols; ++c) m.left.push_back(window_corner(g.offset_x, g.stride_x, c, opt_.window_w, lv->scale));
      for (int r = 0; r < m.rows; ++r) m.top.push_back(window_corner(g.offset_y, g.stride_y, r, opt_.window_h, lv->scale));
      m.box_w = round_int(opt_.window_w * lv->scale);
      m.box_h = round_int(opt_.window_h * lv->scale);
      maps.push_back(std::move(m));
    }
    gpu_ = std::make_unique<nms::GpuWindowCandidates>();
    gpu_->plan(maps, opt_.candidates, opt_.fusion == Fusion::Oro);
  }
#endif
  planned_h_ = h;
  planned_w_ = w;
}

void PyramidDetector::set_profiling(bool on) {
  profiling_ = on;
  for (auto& lv : levels_) lv->graph->set_profiling(on);
}

std::vector<std::pair<std::string, double>> PyramidDetector::stage_ms() const {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& lv : levels_)
    for (const auto& st : lv->graph->stats()) {
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == st.type; });
      if (it == out.end()) out.emplace_back(st.type, st.time_ms);
      else it->second += st.time_ms;
    }
  return out;
}

void PyramidDetector::run_levels(const uint8_t* pixels, int h, int w, int channels,
                                 [[maybe_unused]] Fusion rule) {  // used by the CUDA path
  SL_REQUIRE(h >= 1 && w >= 1, "detect: empty image ", w, "x", h);
  SL_REQUIRE(channels == 1 || channels == 3 || channels == 4, "detect: images of 1, 3 or 4 channels, got ",
             channels);
  plan_for(h, w);
  if (channels != 3) {  // grey or RGBA as RGB (a grey image's three equal channels give its gradient)
    rgb_.resize(size_t(h) * w * 3);
    for (size_t i = 0; i < size_t(h) * w; ++i)
      for (int k = 0; k < 3; ++k) rgb_[i * 3 + size_t(k)] = pixels[i * size_t(channels) + (channels == 1 ? 0 : size_t(k))];
    pixels = rgb_.data();
  }
  if (!mark_uploaded_) mark_uploaded_ = backend_.make_mark(), mark_done_ = backend_.make_mark();
  if (levels_.empty()) backend_.record_mark(mark_uploaded_);  // no level: nothing to upload
  if (!backend_.cuda() && backend_.threads() > 1 && levels_.size() > 1) {
    // The CPU: the levels side by side, a thread each (the largest first), each level's layers on
    // its thread alone: no hand-over between threads inside a level, which at small levels costs
    // more than their work.
    backend_.record_mark(mark_uploaded_);
    std::vector<size_t> order(levels_.size());
    for (size_t l = 0; l < order.size(); ++l) order[l] = l;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return size_t(levels_[a]->h) * levels_[a]->w > size_t(levels_[b]->h) * levels_[b]->w;
    });
    std::vector<std::exception_ptr> failed(levels_.size());
    parallel_for(int64_t(order.size()), backend_.threads(), [&](int64_t i) {
      try {
        Graph& g = *levels_[order[size_t(i)]]->graph;
        g.run_u8(pixels);
      } catch (...) {
        failed[size_t(i)] = std::current_exception();
      }
    });
    for (const auto& e : failed)
      if (e) std::rethrow_exception(e);
    return;
  }
  if (!gpu_) {  // one thread, or scores the host collects: each level's graph as it runs alone
    for (size_t l = 0; l < levels_.size(); ++l) {
      Graph& g = *levels_[l]->graph;
      if (l == 0 || !backend_.cuda()) g.feed_u8(pixels);
      else g.feed_u8(levels_[0]->graph->u8_input_in_backend(), Graph::Pixels::Backend);
      if (l == 0) backend_.record_mark(mark_uploaded_);
      g.run();
    }
    return;
  }
#ifdef SCENELAB_WITH_CUDA
  // The GPU: the image goes up to the first level's graph, every level reads it there. The
  // levels, then the hits' compaction and fusion, are recorded as one CUDA graph on the second
  // run (the first runs them as they come), the levels side by side on several streams, and
  // replayed from then on: one launch a frame.
  if (!levels_.empty()) {
    levels_[0]->graph->feed_u8(pixels);
    backend_.record_mark(mark_uploaded_);
  }
  const nms::WindowFusion r = rule == Fusion::Greedy ? nms::WindowFusion::Greedy
                              : rule == Fusion::Oro  ? nms::WindowFusion::Oro
                                                     : nms::WindowFusion::None;
  const nms::Options o = nms_options();
  const cudaStream_t* stream = &backend_.cuda()->stream;  // read at each launch: branches move it
  auto fuse = [this, r, o, stream] { gpu_->run(opt_.threshold, r, o, *stream); };
  BackendMemory& replay = replays_[int(r)];
  if (!replay && warm_ && !profiling_ && !capture_failed_) {
    std::vector<std::function<void()>> branches;
    std::vector<double> weights;
    for (auto& lv : levels_) {
      Graph* g = lv->graph;
      branches.push_back([g] { g->enqueue(); });
      weights.push_back(double(lv->h) * lv->w);
    }
    try {
      replay = backend_.capture_branches(branches, weights, fuse);
    } catch (const Error&) {
      replay = nullptr;  // not recordable here: run as it comes, from now on
    }
    capture_failed_ = !replay;
  }
  if (replay && !profiling_) {
    backend_.replay(replay);
    return;
  }
  for (size_t l = 0; l < levels_.size(); ++l) {
    Graph& g = *levels_[l]->graph;
    if (l > 0) g.feed_u8(levels_[0]->graph->u8_input_in_backend(), Graph::Pixels::Backend);
    g.enqueue();
  }
  fuse();
  warm_ = true;
#endif
}

nms::Options PyramidDetector::nms_options() const {
  nms::Options o;
  o.threshold = opt_.overlap;
  if (opt_.fusion == Fusion::Oro) o.criterion = nms::Criterion::OverCandidate;
  return o;
}

bool PyramidDetector::fuse_on_device(std::vector<PyramidHit>& out) {
#ifdef SCENELAB_WITH_CUDA
  if (!gpu_) return false;
  backend_.record_mark(mark_done_);
  backend_.synchronize();
  device_ms_ = backend_.mark_ms(mark_uploaded_, mark_done_);
  last_hits_ = gpu_->hits();
  if (last_hits_ > gpu_->capacity()) return false;  // more than the device keeps: the host fuses
  std::vector<nms::Detection> d;
  std::vector<int> lv;
  gpu_->kept(d, lv);
  out.clear();
  for (size_t i = 0; i < d.size(); ++i) out.push_back({d[i], lv[i]});
  return true;
#else
  (void)out;
  return false;
#endif
}

std::vector<PyramidHit> PyramidDetector::hits_on_host() {
  // Into the buffers planned for them; one wait for all the levels.
  backend_.record_mark(mark_done_);
  for (auto& lv : levels_) lv->graph->fetch_async(score_node_, lv->scores.data());
  backend_.synchronize();
  device_ms_ = backend_.mark_ms(mark_uploaded_, mark_done_);
  std::vector<PyramidHit> out;
  for (size_t l = 0; l < levels_.size(); ++l) {
    const Level& lv = *levels_[l];
    const Geometry geo = lv.graph->geometry_of(score_node_);
    const Shape& sh = lv.scores.shape();
    const int bw = round_int(opt_.window_w * lv.scale), bh = round_int(opt_.window_h * lv.scale);
    for (int r = 0; r < sh.h; ++r)
      for (int c = 0; c < sh.w; ++c) {
        const float s = lv.scores[size_t(r) * sh.w + c];
        if (!(s >= opt_.threshold)) continue;
        const int x = window_corner(geo.offset_x, geo.stride_x, c, opt_.window_w, lv.scale);
        const int y = window_corner(geo.offset_y, geo.stride_y, r, opt_.window_h, lv.scale);
        out.push_back({nms::Detection{{float(x), float(y), float(x + bw), float(y + bh)}, s, 0}, int(l)});
      }
  }
  last_hits_ = int(out.size());
  return out;
}

PyramidTimes PyramidDetector::times_of(double run_ms, double fuse_ms, bool on_device) const {
  PyramidTimes t;
  t.run_ms = run_ms;
  t.fuse_ms = fuse_ms;
  t.device_ms = device_ms_;
  t.levels = int(levels_.size());
  t.hits = last_hits_;
  t.on_device = on_device;
  return t;
}

std::vector<PyramidHit> PyramidDetector::hits(const uint8_t* pixels, int h, int w, int channels,
                                              PyramidTimes* times) {
  const auto t0 = std::chrono::steady_clock::now();
  run_levels(pixels, h, w, channels, Fusion::None);
  std::vector<PyramidHit> out;
  const bool device = fuse_on_device(out);
  if (!device) out = hits_on_host();
  if (times) *times = times_of(seconds_ms(t0), 0, device);
  return out;
}

std::vector<nms::Detection> PyramidDetector::fuse(const std::vector<PyramidHit>& hits, int h, int w) const {
  std::vector<nms::Detection> d;
  d.reserve(hits.size());
  for (const auto& x : hits) d.push_back(x.det);
  std::vector<nms::Detection> out;
  const nms::Options o = nms_options();
  switch (opt_.fusion) {
    case Fusion::None:
      out = d;
      break;
    case Fusion::Greedy:
      for (int i : nms::greedy_nms_auto(d, o)) out.push_back(d[size_t(i)]);
      break;
    case Fusion::Oro:
      for (int i : nms::fast_nms(d, o)) out.push_back(d[size_t(i)]);
      break;
    case Fusion::Group:
      out = nms::group_rectangles(d, opt_.min_group, opt_.group_eps);
      break;
  }
  return clip(out, h, w);
}

std::vector<nms::Detection> PyramidDetector::clip(const std::vector<nms::Detection>& d, int h, int w) {
  // Clipped to the image; boxes left empty dropped (as OpenCV's clipObjects).
  std::vector<nms::Detection> clipped;
  for (auto x : d) {
    x.box.x1 = std::max(x.box.x1, 0.f), x.box.y1 = std::max(x.box.y1, 0.f);
    x.box.x2 = std::min(x.box.x2, float(w)), x.box.y2 = std::min(x.box.y2, float(h));
    if (x.box.x2 > x.box.x1 && x.box.y2 > x.box.y1) clipped.push_back(x);
  }
  return clipped;
}

std::vector<nms::Detection> PyramidDetector::detect(const uint8_t* pixels, int h, int w, int channels,
                                                    PyramidTimes* times) {
  const auto t0 = std::chrono::steady_clock::now();
  run_levels(pixels, h, w, channels, opt_.fusion);
  // On the GPU the hits are compacted and fused there (groupRectangles: compacted there, grouped
  // here); beyond the device's capacity, or on the CPU, every level's scores come here.
  std::vector<PyramidHit> found;
  const bool device = fuse_on_device(found);
  if (!device) found = hits_on_host();
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<nms::Detection> out;
  if (device && opt_.fusion != Fusion::Group) {
    for (const auto& x : found) out.push_back(x.det);
    out = clip(out, h, w);
  } else {
    out = fuse(found, h, w);
  }
  if (times) *times = times_of(std::chrono::duration<double, std::milli>(t1 - t0).count(), seconds_ms(t1), device);
  return out;
}

}  // namespace scenelab
