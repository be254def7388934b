#include "job/report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/error.h"
#include "core/json.h"

namespace scenelab {

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

Json times_json(const StageTimes& t) {
  return Json{{"decode", json_number(t.decode_ms)},     {"upload", json_number(t.upload_ms)},
              {"forward", json_number(t.forward_ms)},   {"download", json_number(t.download_ms)},
              {"finish", json_number(t.finish_ms)},     {"detect", json_number(t.detect_ms)}};
}

Json histogram_json(const std::vector<size_t>& hist, const std::vector<std::string>& classes) {
  Json h = Json::object();
  for (size_t c = 0; c < classes.size(); ++c) h[classes[c]] = hist[c];
  return h;
}

Json detections_json(const std::vector<Found>& dets) {
  Json list = Json::array();
  for (const auto& d : dets)
    list.push_back({{"class", d.name},
                    {"score", json_number(d.score)},
                    {"box", {json_number(d.box.x1), json_number(d.box.y1), json_number(d.box.x2), json_number(d.box.y2)}}});
  return list;
}

// The members of `fields` as they continue an object already open: `, "key": value` each,
// `sep` before each ("\n  " puts one a line).
std::string members(const Json& fields, const char* sep) {
  std::string s;
  for (const auto& [k, v] : fields.items()) s += str_cat(",", sep, json_text(k), ": ", json_text(v));
  return s;
}

// Frames labelled: images and video frames; a failed input is in no rate or mean.
size_t labelled(const JobSummary& s) { return s.ok + s.video_frames; }
// What a run's means are over (at least 1).
double frames_of(const JobSummary& s) { return double(std::max<size_t>(1, labelled(s))); }
double rate_of(const JobSummary& s) { return s.wall_s > 0 ? double(labelled(s)) / s.wall_s : 0; }

}  // namespace

// ---- JSON ----

void JsonReport::started(const JobStart& s) {
  start_ = s;
  const Json head = s.detect_only ? Json{{"detector", s.detector_name}, {"device", s.device}}
                                  : Json{{"model", s.model_path},
                                         {"model_name", s.model_name},
                                         {"device", s.device},
                                         {"classes", s.classes}};
  os_ << "{" << members(head, "\n  ").substr(1) << ",\n  \"images\": [";
}

void JsonReport::image(const ImageResult& r) {
  Json e{{"file", r.file}, {"ok", r.ok}};
  if (!r.ok) {
    e["error"] = r.error;
  } else if (start_.detect_only) {
    e.update(Json{{"width", r.width}, {"height", r.height}, {"levels", r.levels}, {"ms", json_number(r.detect_ms)},
                  {"detections", detections_json(r.detections)}, {"outputs", r.outputs}});
  } else {
    const double ms = r.times.forward_ms, gop = r.ops * 1e-9;
    e.update(Json{{"width", r.width},
                  {"height", r.height},
                  {"batch", r.batch},
                  {"ms", json_number(ms)},
                  {"gop", json_number(gop)},
                  {"gops", json_number(gop / (ms * 1e-3))},
                  {"times_ms", times_json(r.times)},
                  {"encode_ms", json_number(r.encode_ms)},
                  {"write_ms", json_number(r.write_ms)},
                  {"histogram", histogram_json(r.histogram, start_.classes)},
                  {"detections", detections_json(r.detections)},
                  {"outputs", r.outputs}});
  }
  os_ << (entries_++ ? "," : "") << "\n    " << json_text(e);
}

void JsonReport::close_images() {
  if (!images_closed_) os_ << "\n  ],\n  \"videos\": [";
  images_closed_ = true;
}

void JsonReport::video_started(const std::string& file, size_t) {
  close_images();
  os_ << (videos_++ ? "," : "") << "\n    {\"file\": " << json_text(file) << ", \"frames\": [";
  frames_ = 0;
}

void JsonReport::video_frame(const VideoFrameResult& r) {
  const Json f{{"frame", r.frame},
               {"times_ms", times_json(r.times)},
               {"histogram", histogram_json(r.histogram, start_.classes)},
               {"detections", detections_json(r.detections)}};
  os_ << (frames_++ ? "," : "") << "\n      " << json_text(f);
}

void JsonReport::video(const VideoResult& r) {
  close_images();
  if (r.opened) {
    const Json rest{{"ok", r.error.empty()},
                    {"frames_labelled", r.frames},
                    {"frames_failed", r.frames_failed},
                    {"frames_per_s", json_number(r.frames_per_s)},
                    {"stopped", r.stopped},
                    {"error", r.error},
                    {"outputs", r.outputs}};
    os_ << "\n    ]" << members(rest, " ") << "}";
  } else {
    os_ << (videos_++ ? "," : "") << "\n    " << json_text(Json{{"file", r.file}, {"ok", false}, {"error", r.error}});
  }
}

void JsonReport::finished(const JobSummary& s) {
  Json tail;
  if (start_.detect_only) {
    tail = Json{{"ok", s.ok}, {"failed", s.failed}, {"wall_s", json_number(s.wall_s)},
                {"images_per_s", json_number(rate_of(s))}};
  } else {
    close_images();
    const double per = frames_of(s);
    const StageTimes& t = s.total;
    tail = Json{{"ok", s.ok},
                {"failed", s.failed},
                {"videos_ok", s.videos_ok},
                {"videos_failed", s.videos_failed},
                {"skipped", s.skipped},
                {"interrupted", s.interrupted},
                {"wall_s", json_number(s.wall_s)},
                {"images_per_s", json_number(rate_of(s))},
                {"stage_ms_per_image", times_json(StageTimes{t.decode_ms / per, t.upload_ms / per, t.forward_ms / per,
                                                             t.download_ms / per, t.finish_ms / per, t.detect_ms / per})},
                {"encode_ms_per_image", json_number(s.encode_ms / per)},
                {"write_ms_per_image", json_number(s.write_ms / per)},
                {"planning_ms", json_number(s.planning_ms)},
                {"first_pass_ms", json_number(s.first_pass_ms)},
                {"plans", s.plans},
                {"plans_from_cache", s.plans_from_cache}};
  }
  os_ << "\n  ]" << members(tail, "\n  ") << "\n}\n";
  os_.flush();
}

JsonReportFile::JsonReportFile(std::string path) : path_(std::move(path)) {
  if (path_ == "-") {
    report_ = std::make_unique<JsonReport>(std::cout);
    return;
  }
  tmp_ = path_ + ".tmp";
  file_ = std::make_unique<std::ofstream>(tmp_);
  SL_REQUIRE(*file_, path_, ": cannot write JSON report");
  report_ = std::make_unique<JsonReport>(*file_);
}

JsonReportFile::~JsonReportFile() = default;

bool JsonReportFile::close(const char* program) {
  if (!file_) {
    std::cout.flush();
    return true;
  }
  const bool good = bool(*file_);
  file_.reset();
  std::error_code ec;
  if (!good || (std::filesystem::rename(tmp_, path_, ec), ec)) {
    std::fprintf(stderr, "%s: %s: cannot write JSON report\n", program, path_.c_str());
    return false;
  }
  return true;
}

// ---- Console ----

void Progress::update(size_t done) {
  if (!on_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  const double s = std::chrono::duration<double>(now - t0_).count();
  const double rate = s > 0 ? done / s : 0;
  const int width = 30;
  const int filled = total_ ? int(width * std::min(done, total_) / total_) : 0;
  std::string eta = total_ && rate > 0 ? fmt("ETA %.1fs", double(total_ - std::min(done, total_)) / rate) : "";
  std::fprintf(stderr, "\r[%s%s] %zu/%zu  %.1f img/s  %s   ", std::string(size_t(filled), '#').c_str(),
               std::string(size_t(width - filled), '.').c_str(), done, total_, rate, eta.c_str());
  if (total_ && done >= total_) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

void Progress::clear_line() {
  if (on_) std::fprintf(stderr, "\r%90s\r", "");
}

void ConsoleReport::started(const JobStart& s) {
  start_ = s;
  if (s.detect_only) return;
  if (!quiet_)
    std::fprintf(human_, "model %s (%s), %s, %zu image(s)%s\n", s.model_path.c_str(), s.model_name.c_str(),
                 s.device.c_str(), s.images, s.videos ? str_cat(", ", s.videos, " video(s)").c_str() : "");
  if (s.skipped && !quiet_) std::fprintf(human_, "skipped %zu image(s) whose outputs exist\n", s.skipped);
  progress_ = std::make_unique<Progress>(s.images > 4 && terminal_, s.images);
}

void ConsoleReport::failed(const std::string& what) {
  if (progress_) progress_->clear_line();
  std::fprintf(stderr, "%s: FAILED %s\n", program_.c_str(), what.c_str());
}

std::string ConsoleReport::histogram_text(const std::vector<size_t>& hist, double total) const {
  std::vector<size_t> order(hist.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return hist[a] > hist[b]; });
  std::string s;
  for (size_t c : order)
    if (hist[c] > 0) s += str_cat(" ", start_.classes[c], fmt(" %.1f%%", 100.0 * hist[c] / total));
  return s;
}

void ConsoleReport::image(const ImageResult& r) {
  ++done_;
  if (!r.ok) {
    failed(r.error.empty() ? r.file : r.error);
  } else if (start_.detect_only) {
    if (!quiet_)
      std::fprintf(human_, "%s: %dx%d  %d levels  %.1f ms  %zu %s(s)\n", r.file.c_str(), r.width, r.height, r.levels,
                   r.detect_ms, r.detections.size(), start_.detector_class.c_str());
  } else if (!quiet_) {
    if (progress_) progress_->clear_line();
    const double gop = r.ops * 1e-9;
    std::string line = str_cat(r.file, ": ", r.width, "x", r.height, "  ", fmt("%.1f ms", r.times.forward_ms), "  ",
                               fmt("%.2f GOp", gop), "  ", fmt("%.1f GOp/s", gop / (r.times.forward_ms * 1e-3)), " ",
                               histogram_text(r.histogram, double(r.width) * r.height));
    if (start_.detections) line += str_cat("  detections: ", r.detections.size());
    std::fprintf(human_, "%s\n", line.c_str());
  }
  if (progress_) progress_->update(done_);
}

void ConsoleReport::video_started(const std::string&, size_t frames_hint) {
  progress_ = std::make_unique<Progress>(terminal_, frames_hint);
  frames_ = 0;
}

void ConsoleReport::video_frame(const VideoFrameResult&) { progress_->update(++frames_); }

void ConsoleReport::video_frame_failed(const std::string& error) { failed(error); }

void ConsoleReport::video(const VideoResult& r) {
  if (!r.error.empty()) {
    std::fprintf(stderr, "%s: FAILED %s\n", program_.c_str(), r.error.c_str());
    return;
  }
  if (!r.stopped.empty()) std::fprintf(stderr, "%s: %s: %s\n", program_.c_str(), r.file.c_str(), r.stopped.c_str());
  if (!quiet_)
    std::fprintf(human_, "%s: %zu frame(s) labelled, %.1f frames/s%s\n", r.file.c_str(), r.frames, r.frames_per_s,
                 r.frames_failed ? str_cat(", ", r.frames_failed, " failed").c_str() : "");
}

void ConsoleReport::finished(const JobSummary& s) {
  // The summary, --quiet or not (it hides the per-input lines only).
  const double rate = rate_of(s);
  if (start_.detect_only) {
    std::fprintf(human_, "searched %zu of %zu image(s) for %s, %zu failed; %.1f images/s; outputs in %s\n", s.ok,
                 s.images, start_.detector_class.c_str(), s.failed, rate, s.out_dir.c_str());
    return;
  }
  const double per = frames_of(s);
  const StageTimes& t = s.total;
  std::fprintf(human_,
               "labelled %zu of %zu image(s), %zu failed%s; %.1f images/s (wall %.2f s); per image: "
               "decode %.2f ms, upload %.3f, forward %.3f, download %.3f, write %.2f (ms of one "
               "thread or stream); planning %.0f ms for %zu plan(s), %zu from the plan cache; "
               "outputs in %s\n",
               s.ok, s.images, s.failed,
               s.videos ? str_cat(", ", s.videos_ok, " of ", s.videos, " video(s) (", s.video_frames, " frames)").c_str()
                        : "",
               rate, s.wall_s, t.decode_ms / per, t.upload_ms / per, t.forward_ms / per, t.download_ms / per,
               t.finish_ms / per, s.planning_ms, s.plans, s.plans_from_cache, s.out_dir.c_str());
  if (s.interrupted)
    std::fprintf(stderr, "%s: interrupted; outputs written so far are complete\n", program_.c_str());
}

}  // namespace scenelab
