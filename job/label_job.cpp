#include "job/label_job.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/file_io.h"
#include "job/inputs.h"
#include "job/labeler.h"
#include "job/video.h"

namespace scenelab {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::array<uint8_t, 3> kPyramidColour{255, 64, 32};  // the pyramid detector's boxes

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Several observers as one, in order.
class Tell : public JobObserver {
 public:
  explicit Tell(const std::vector<JobObserver*>& all) : all_(all) {}
  void started(const JobStart& s) override { for (auto* o : all_) o->started(s); }
  void image(const ImageResult& r) override { for (auto* o : all_) o->image(r); }
  void video_started(const std::string& f, size_t n) override { for (auto* o : all_) o->video_started(f, n); }
  void video_frame(const VideoFrameResult& r) override { for (auto* o : all_) o->video_frame(r); }
  void video_frame_failed(const std::string& e) override { for (auto* o : all_) o->video_frame_failed(e); }
  void video(const VideoResult& r) override { for (auto* o : all_) o->video(r); }
  void finished(const JobSummary& s) override { for (auto* o : all_) o->finished(s); }

 private:
  const std::vector<JobObserver*>& all_;
};

// What a frame's finishing leaves for its report (small; the images are gone by then).
struct Finished {
  std::vector<size_t> hist;
  std::vector<Found> detections;
  std::vector<std::string> outputs;
  double encode_ms = 0, write_ms = 0;  // PNG encoding, file writing
  Image8 video_overlay, video_labels;  // videos: written in order by the report
};

}  // namespace

OutputKinds parse_output_kinds(const std::string& list) {
  OutputKinds s{false, false, false};
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "classes") s.classes = true;
    else if (item == "labels") s.labels = true;
    else if (item == "overlay") s.overlay = true;
    else throw_error("--save: unknown output '", item, "' (expected classes, labels, overlay)");
  }
  SL_REQUIRE(s.classes || s.labels || s.overlay, "--save: name at least one output");
  return s;
}

void draw_box(Image8& img, const nms::Box& b, const std::array<uint8_t, 3>& color) {
  const int x1 = std::max(0, int(b.x1)), y1 = std::max(0, int(b.y1));
  const int x2 = std::min(img.width - 1, int(b.x2)), y2 = std::min(img.height - 1, int(b.y2));
  auto put = [&](int x, int y, bool outline) {
    if (x < 0 || y < 0 || x >= img.width || y >= img.height) return;
    uint8_t* p = &img.pixels[(size_t(y) * img.width + x) * 3];
    for (int k = 0; k < 3; ++k) p[k] = outline ? 0 : color[size_t(k)];
  };
  for (int t = -1; t <= 2; ++t) {  // 2 px in the class colour inside a 1 px black outline
    const bool outline = t == -1 || t == 2;
    for (int x = x1 - 1; x <= x2 + 1; ++x) put(x, y1 + t, outline), put(x, y2 - t, outline);
    for (int y = y1 - 1; y <= y2 + 1; ++y) put(x1 + t, y, outline), put(x2 - t, y, outline);
  }
}

LabelJob::LabelJob(const Model* model, JobOptions opt) : model_(model), opt_(std::move(opt)) {
  SL_REQUIRE(model_ || opt_.detect_only, "a job needs a labelling model unless it only detects");
  SL_REQUIRE(!opt_.detect_only || opt_.pyramid.model, "detection alone needs a pyramid detector");
  PipelineOptions& po = opt_.pipeline;
  po.pyramid = PipelineOptions::Pyramid{opt_.pyramid.model, opt_.pyramid.overrides};
  if (opt_.detect_only) {
    pipeline_ = std::make_unique<Pipeline>(po);
    return;
  }
  // The overlay PNG blended and filtered on a GPU, where pixels and labels are (the file is the
  // same): not where boxes are drawn on it or another coder filters it.
  po.overlay.on = opt_.save.overlay && po.detect.empty() && !opt_.pyramid.model && opt_.png.coder == PngCoder::Huffman;
  po.overlay.palette = model_->palette;
  pipeline_ = std::make_unique<Pipeline>(*model_, po);
}

LabelJob::~LabelJob() = default;

void LabelJob::set_outputs(const OutputKinds& save, std::vector<std::string> output_bases) {
  opt_.save = save;
  opt_.output_bases = std::move(output_bases);
}

void LabelJob::cancel() {
  cancelled_.store(true);
  if (pipeline_) pipeline_->cancel();
}

std::string LabelJob::describe() const { return pipeline_->describe(); }

void LabelJob::add(const PipelineStats& st, JobSummary& sum) const {
  sum.wall_s += st.wall_s;
  sum.total += st.total;
  sum.planning_ms += st.planning_ms;
  sum.first_pass_ms += st.first_pass_ms;
  sum.plans += st.plans;
  sum.plans_from_cache += st.plans_from_cache;
}

std::vector<Found> LabelJob::found(const Frame& f) const {
  std::vector<Found> out;
  if (opt_.pyramid.model) {
    for (const auto& d : f.window_detections) out.push_back({-1, opt_.pyramid.class_name, d.box, d.score});
    return out;
  }
  for (const auto& d : f.detections) out.push_back({d.cls, model_->class_names[size_t(d.cls)], d.box, d.score});
  return out;
}

void LabelJob::draw_boxes(Image8& img, const std::vector<Found>& dets) const {
  for (const auto& d : dets) draw_box(img, d.box, d.cls < 0 ? kPyramidColour : model_->palette[size_t(d.cls)]);
}

JobSummary LabelJob::run(const std::vector<std::string>& inputs, const std::vector<JobObserver*>& observers) {
  Tell obs(observers);
  SL_REQUIRE(opt_.output_bases.empty() || opt_.output_bases.size() == inputs.size(), "a job of ", inputs.size(),
             " input(s) given ", opt_.output_bases.size(), " output base(s)");
  JobSummary sum;
  sum.out_dir = opt_.out_dir;
  // Output names in input order: NAME, then NAME_2, NAME_3... for repeated names (a video's own
  // files keep its NAME).
  std::vector<std::string> images, image_bases, videos, video_bases;
  std::set<std::string> used;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& f = inputs[i];
    const std::string plain = fs::path(f).stem().string();
    std::string stem = plain;
    for (int k = 2; used.count(stem); ++k) stem = plain + "_" + std::to_string(k);
    used.insert(stem);
    const bool given = !opt_.output_bases.empty();
    if (!opt_.detect_only && is_video_name(f)) {
      videos.push_back(f);
      video_bases.push_back(given ? opt_.output_bases[i] : opt_.out_dir + "/" + plain);
      continue;
    }
    const std::string base = given ? opt_.output_bases[i] : opt_.out_dir + "/" + stem;
    if (opt_.skip_existing && !opt_.detect_only) {
      bool all = true;
      for (auto [on, kind] : {std::pair{opt_.save.classes, "_classes.png"}, {opt_.save.labels, "_labels.png"},
                              {opt_.save.overlay, "_overlay.png"}})
        if (on && !fs::exists(base + kind)) all = false;
      if (all) {
        ++sum.skipped;
        continue;
      }
    }
    images.push_back(f);
    image_bases.push_back(base);
  }
  sum.images = images.size();
  sum.videos = videos.size();
  // Given output names: their folders are made where missing (out_dir is the caller's).
  std::set<fs::path> folders;
  for (const auto& b : opt_.output_bases)
    if (fs::path(b).has_parent_path()) folders.insert(fs::path(b).parent_path());
  for (const auto& d : folders) {
    std::error_code ec;
    fs::create_directories(d, ec);  // one that cannot be made fails its inputs by name
  }
  JobStart start;
  start.detect_only = opt_.detect_only;
  start.model_path = opt_.model_path;
  start.device = describe();
  if (model_) start.model_name = model_->name, start.classes = model_->class_names;
  if (opt_.pyramid.model) start.detector_name = opt_.pyramid.model->name, start.detector_class = opt_.pyramid.class_name;
  start.images = images.size(), start.videos = videos.size(), start.skipped = sum.skipped;
  start.detections = opt_.pyramid.model || !opt_.pipeline.detect.empty();
  obs.started(start);
  if (opt_.detect_only) {
    run_detect_only(images, image_bases, obs, sum);
  } else {
    if (!images.empty()) run_images(images, image_bases, obs, sum);
    pipeline_->set_overlay(PipelineOptions::Overlay{});  // a video's overlay is blended on the host
    for (size_t v = 0; v < videos.size() && !cancelled(); ++v) run_video(videos[v], video_bases[v], obs, sum);
    pipeline_->set_overlay(opt_.pipeline.overlay);
  }
  sum.interrupted = cancelled();
  obs.finished(sum);
  return sum;
}

void LabelJob::run_images(const std::vector<std::string>& files, const std::vector<std::string>& bases,
                          JobObserver& obs, JobSummary& sum) {
  const int classes = int(model_->class_names.size());
  const PngOptions& png = opt_.png;
  FileSource source(files, opt_.limits);
  auto finish = [&](Frame& f) {
    if (!f.error.empty()) return;
    auto r = std::make_shared<Finished>();
    r->hist = histogram(f.labels, classes);
    r->detections = found(f);
    const std::string& base = bases[f.index];
    // encode() makes the file's bytes (timed as encoding), then they are written.
    auto save = [&](const std::string& path, auto&& encode) {
      const auto t0 = Clock::now();
      const std::vector<uint8_t> bytes = encode();
      const auto t1 = Clock::now();
      write_file_atomic(path, bytes);
      r->encode_ms += ms_between(t0, t1);
      r->write_ms += ms_between(t1, Clock::now());
      r->outputs.push_back(path);
    };
    if (opt_.save.overlay && !f.overlay_rows.empty()) {
      save(base + "_overlay.png",
           [&] { return encode_png_filtered(f.overlay_rows.data(), f.labels.width, f.labels.height, 3, png); });
    } else if (opt_.save.overlay) {
      Image8 over = overlay_labels(f.image, f.labels, model_->palette);
      draw_boxes(over, r->detections);
      save(base + "_overlay.png", [&] { return encode_png(over, png); });
    }
    if (opt_.save.classes || opt_.save.labels) {
      // The class map once compressed for both: as grey indices, and with the palette as an
      // indexed-colour PNG (the same pixels, another header).
      const auto t0 = Clock::now();
      const PngPixels index = compress_png(Image8{f.labels.width, f.labels.height, 1, std::move(f.labels.labels)}, png);
      r->encode_ms += ms_between(t0, Clock::now());
      PngOptions indexed = png;
      indexed.palette = model_->palette;
      if (opt_.save.classes) save(base + "_classes.png", [&] { return png_file(index, png); });
      if (opt_.save.labels) save(base + "_labels.png", [&] { return png_file(index, indexed); });
    }
    f.image = Image8();
    f.overlay_rows = std::vector<uint8_t>();
    f.floats.clear();
    f.user = r;
  };
  auto report = [&](Frame& f) {
    auto* r = static_cast<Finished*>(f.user.get());
    ImageResult ir;
    ir.file = f.name;
    ir.ok = f.error.empty() && r;
    ir.error = f.error;
    if (r) sum.encode_ms += r->encode_ms, sum.write_ms += r->write_ms;
    if (ir.ok) {
      ir.width = f.labels.width, ir.height = f.labels.height, ir.batch = f.batch;
      ir.times = f.times, ir.ops = f.ops;
      ir.encode_ms = r->encode_ms, ir.write_ms = r->write_ms;
      ir.histogram = std::move(r->hist);
      ir.detections = std::move(r->detections);
      ir.outputs = std::move(r->outputs);
    }
    ++(ir.ok ? sum.ok : sum.failed);
    obs.image(ir);
  };
  add(pipeline_->run(source, finish, report), sum);
}

void LabelJob::run_video(const std::string& file, const std::string& base, JobObserver& obs, JobSummary& sum) {
  const int classes = int(model_->class_names.size());
  VideoResult vr;
  vr.file = file;
  PipelineStats st;
  try {
    VideoSource source(file, opt_.limits);
    const double fps = source.reader().fps();
    std::unique_ptr<VideoWriter> w_over, w_lab;
    obs.video_started(file, source.size_hint());
    vr.opened = true;
    auto finish = [&](Frame& f) {
      if (!f.error.empty()) return;
      auto r = std::make_shared<Finished>();
      r->hist = histogram(f.labels, classes);
      r->detections = found(f);
      Image8 color = colorize(f.labels, model_->palette);
      if (opt_.save.overlay) {
        r->video_overlay = overlay(f.image, color);
        draw_boxes(r->video_overlay, r->detections);
      }
      if (opt_.save.labels) r->video_labels = std::move(color);
      f.image = Image8();
      f.floats.clear();
      f.user = r;
    };
    // Each stream's writer opens at its first frame (the frames' size), written in order.
    auto write = [&](std::unique_ptr<VideoWriter>& w, const char* kind, const Image8& img) {
      if (!w) {
        w = std::make_unique<VideoWriter>(base + kind, img.width, img.height, fps);
        vr.outputs.push_back(base + kind);
      }
      w->write(img);
    };
    auto report = [&](Frame& f) {
      auto* r = static_cast<Finished*>(f.user.get());
      if (!f.error.empty() || !r) {
        ++vr.frames_failed;
        obs.video_frame_failed(f.error.empty() ? f.name : f.error);
        return;
      }
      if (opt_.save.overlay) write(w_over, "_overlay.mp4", r->video_overlay);
      if (opt_.save.labels) write(w_lab, "_labels.mp4", r->video_labels);
      obs.video_frame(VideoFrameResult{f.index, f.times, std::move(r->hist), std::move(r->detections)});
      ++vr.frames;
    };
    st = pipeline_->run(source, finish, report);
    if (w_over) w_over->close();
    if (w_lab) w_lab->close();
    vr.stopped = source.reader().stopped();
    add(st, sum);
  } catch (const std::exception& e) {
    vr.error = e.what();
  }
  sum.video_frames += vr.frames;
  vr.frames_per_s = st.wall_s > 0 ? vr.frames / st.wall_s : 0;
  ++(vr.error.empty() ? sum.videos_ok : sum.videos_failed);
  obs.video(vr);
}

// Detection alone: each image decoded, searched by the pipeline's workers, written with its
// boxes on the photo by the finishing threads, reported in input order.
void LabelJob::run_detect_only(const std::vector<std::string>& files, const std::vector<std::string>& bases,
                               JobObserver& obs, JobSummary& sum) {
  FileSource source(files, opt_.limits);
  auto finish = [&](Frame& f) {
    if (!f.error.empty()) return;
    for (const auto& d : f.window_detections) draw_box(f.image, d.box, kPyramidColour);
    const std::string output = bases[f.index] + "_detections.png";
    write_file_atomic(output, encode_png(f.image, opt_.png));
    f.user = std::make_shared<std::string>(output);
    f.image.pixels = std::vector<uint8_t>();  // its size stays for the report
  };
  auto report = [&](Frame& f) {
    ImageResult ir;
    ir.file = f.name;
    ir.ok = f.error.empty() && f.user;
    ir.error = f.error;
    if (ir.ok) {
      ir.width = f.image.width, ir.height = f.image.height, ir.levels = f.pyramid_times.levels;
      ir.detect_ms = f.pyramid_times.run_ms + f.pyramid_times.fuse_ms;
      for (const auto& d : f.window_detections) ir.detections.push_back({-1, opt_.pyramid.class_name, d.box, d.score});
      ir.outputs = {*static_cast<const std::string*>(f.user.get())};
    }
    ++(ir.ok ? sum.ok : sum.failed);
    obs.image(ir);
  };
  add(pipeline_->run(source, finish, report), sum);
}

bool runtime_fusion_pays(const std::vector<std::string>& inputs) {
  return inputs.size() >= 10000 ||
         std::any_of(inputs.begin(), inputs.end(), [](const std::string& f) { return is_video_name(f); });
}

}  // namespace scenelab
