// label_image: labels image files and videos with a scene-labelling model, on the streaming
// pipeline (engine/pipeline.h). For each input image NAME.ext it writes into --out DIR, as
// --save asks: NAME_classes.png (8-bit class index per pixel), NAME_labels.png (colour label
// map, an indexed-colour PNG) and NAME_overlay.png (labels over the photo), all at the input
// resolution. A video NAME.mp4 gives NAME_overlay.mp4 and/or NAME_labels.mp4, and per-frame
// class histograms in the JSON report.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>

#include "engine/labeler.h"
#include "engine/pipeline.h"
#include "engine/video.h"
#include "nms/sliding_window.h"
#include "tools/cli.h"
#include "tools/inputs.h"
#include "weights/model_file.h"
#include "weights/model_locator.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: label_image [options] IMAGE|VIDEO|DIR|GLOB...\n"
    "  --model FILE.h5      model (default: the model shipped in weights/)\n"
    "  --out DIR            output folder (default: labels)\n"
    "  --save LIST          outputs, any of classes,labels,overlay (default: all three;\n"
    "                       videos: labels and/or overlay)\n"
    "  --device D           cpu | cuda | cuda:N | cuda:all (one pipeline per GPU) | auto\n"
    "                       (default auto: the GPU when there is one)\n"
    "  --precision fp32|tf32|fp16  GPU precision (default fp32, equal to the CPU path)\n"
    "  --conv direct|gemm|gemm2s|cudnn|auto  GPU convolution algorithm (default auto:\n"
    "                       each timed once per layer and size, the fastest kept)\n"
    "  --conv-workspace MiB bound on a convolution's GPU workspace\n"
    "                       (default: 2048 or 1/16 of the GPU memory if less)\n"
    "  --batch N            images of one size run N at a time (default: chosen for the\n"
    "                       device and size: up to 16 on a GPU, 1 on the CPU)\n"
    "  --streams N          batches in flight per GPU (default 2)\n"
    "  --threads N          CPU backend threads (default: all)\n"
    "  --io-threads N       decoding and writing threads (default: all)\n"
    "  --queue-depth N      frames between decoding and reporting (default: automatic)\n"
    "  --plan-cache DIR|off where timed planning choices are kept\n"
    "                       (default $XDG_CACHE_HOME/scenelab or ~/.cache/scenelab)\n"
    "  --max-pixels N|WxH   largest image accepted (default 16384x16384)\n"
    "  --skip-existing      skip inputs whose outputs all exist (resume a run)\n"
    "  --json FILE          machine-readable report ('-' for stdout)\n"
    "  --detect CLASS[,..]  sliding-window detection of these classes (names or indices):\n"
    "                       boxes go into the JSON report and onto the overlay\n"
    "  --det-threshold F    minimum objectness of a window (default: the model's per-class\n"
    "                       setting, else 0.4)\n"
    "  --quiet              no per-image lines\n";

std::atomic<Pipeline*> g_pipeline{nullptr};
std::atomic<int> g_signals{0};

void on_signal(int sig) {
  // The first Ctrl-C or SIGTERM stops taking inputs: frames in flight are written and the
  // report closed. A second one ends the program at once (temporary files only, never a
  // half-written output under its real name).
  if (g_signals.fetch_add(1) > 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  if (Pipeline* p = g_pipeline.load()) p->cancel();
}

struct Save {
  bool classes = true, labels = true, overlay = true;
};

Save parse_save(const std::string& list) {
  Save s{false, false, false};
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

uint64_t parse_max_pixels(const std::string& v) {
  if (v.find('x') != std::string::npos) {
    auto [w, h] = parse_size(v);
    return uint64_t(w) * uint64_t(h);
  }
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  SL_REQUIRE(!v.empty() && *end == '\0' && n > 0, "--max-pixels: expected N or WxH, got '", v, "'");
  return n;
}

struct Found {
  int cls;
  nms::Box box;
  float score;
};

// What a frame's finishing leaves for its report line (small; the images are gone by then).
struct Result {
  std::vector<size_t> hist;
  std::vector<Found> detections;
  std::vector<std::string> outputs;
  double encode_ms = 0, write_ms = 0;  // of the finishing: PNG encoding, file writing
  Image8 video_overlay, video_labels;  // videos: written in order by the report
};

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

std::vector<int> parse_classes(const std::string& list, const std::vector<std::string>& names) {
  std::vector<int> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int found = -1;
    for (size_t c = 0; c < names.size(); ++c) {
      std::string a = names[c], b = item;
      std::transform(a.begin(), a.end(), a.begin(), ::tolower);
      std::transform(b.begin(), b.end(), b.begin(), ::tolower);
      if (a == b || std::to_string(c) == item) found = int(c);
    }
    if (found < 0) {
      std::string all;
      for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
      throw_error("--detect: unknown class '", item, "' (classes: ", all, ")");
    }
    out.push_back(found);
  }
  return out;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The progress line on a terminal: done/total, images/s, time left.
class Progress {
 public:
  Progress(bool on, size_t total) : on_(on), total_(total), t0_(std::chrono::steady_clock::now()) {}
  void update(size_t done) {
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
  void clear_line() {
    if (on_) std::fprintf(stderr, "\r%90s\r", "");
  }

 private:
  bool on_;
  size_t total_;
  std::chrono::steady_clock::time_point t0_, last_{};
};

std::string times_json(const StageTimes& t) {
  return str_cat("{\"decode\": ", t.decode_ms, ", \"upload\": ", t.upload_ms, ", \"forward\": ",
                 t.forward_ms, ", \"download\": ", t.download_ms, ", \"finish\": ", t.finish_ms, "}");
}

}  // namespace

int main(int argc, char** argv) {
  Model model;
  std::string out_dir, json_path, model_path;
  bool quiet = false, skip_existing = false;
  Save save_opts;
  std::vector<int> detect_classes;
  std::vector<nms::WindowHeadOptions> heads;  // per detected class
  PipelineOptions po;
  ImageLimits limits;
  std::vector<std::string> inputs;
  try {
    Cli cli(argc, argv,
            {"model", "out", "device", "threads", "json", "detect", "det-threshold", "conv",
             "precision", "conv-workspace", "batch", "streams", "io-threads", "queue-depth",
             "plan-cache", "save", "max-pixels"},
            {"quiet", "help", "skip-existing"});
    if (cli.has("help")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (cli.positional().empty()) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    quiet = cli.has("quiet");
    skip_existing = cli.has("skip-existing");
    out_dir = cli.get("out", "labels");
    json_path = cli.get("json");
    if (cli.has("save")) save_opts = parse_save(cli.get("save"));
    if (cli.has("max-pixels")) limits.max_pixels = parse_max_pixels(cli.get("max-pixels"));
    model_path = cli.has("model") ? cli.get("model") : find_default_model();
    model = read_model(model_path);
    if (cli.has("detect")) detect_classes = parse_classes(cli.get("detect"), model.class_names);
    // Each class's head: the defaults, the model's settings for it, then --det-threshold.
    for (int c : detect_classes) {
      nms::WindowHeadOptions o;
      auto it = model.detect.find(model.class_names[size_t(c)]);
      if (it != model.detect.end()) nms::parse_window_spec(it->second, o);
      if (cli.has("det-threshold")) {
        char* end = nullptr;
        const std::string v = cli.get("det-threshold");
        o.threshold = std::strtof(v.c_str(), &end);
        SL_REQUIRE(!v.empty() && *end == '\0', "--det-threshold expects a number, got '", v, "'");
      }
      heads.push_back(o);
    }
    po = pipeline_options(cli);
    if (!detect_classes.empty()) po.float_outputs = {"scores"};
    inputs = expand_inputs(cli.positional(), /*videos=*/true);
    SL_REQUIRE(!inputs.empty(), "no image files found in the given paths");
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    SL_REQUIRE(fs::is_directory(out_dir), out_dir, ": cannot create output folder");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "label_image: %s\n", e.what());
    return 2;
  }
  std::unique_ptr<Pipeline> pipe;
  try {
    pipe = std::make_unique<Pipeline>(model, po);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "label_image: %s\n", e.what());
    return 2;
  }
  g_pipeline.store(pipe.get());
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  // Output names in input order: NAME, then NAME_2, NAME_3... for repeated names.
  std::vector<std::string> images, videos, stems_of_images;
  std::set<std::string> used;
  auto unique_stem = [&](const std::string& file) {
    std::string stem = fs::path(file).stem().string();
    for (int k = 2; used.count(stem); ++k) stem = fs::path(file).stem().string() + "_" + std::to_string(k);
    used.insert(stem);
    return stem;
  };
  size_t skipped = 0;
  for (const auto& f : inputs) {
    const std::string stem = unique_stem(f);
    if (is_video_name(f)) {
      videos.push_back(f);
      continue;
    }
    if (skip_existing) {
      bool all = true;
      for (auto [on, kind] : {std::pair{save_opts.classes, "_classes.png"}, {save_opts.labels, "_labels.png"},
                              {save_opts.overlay, "_overlay.png"}})
        if (on && !fs::exists(out_dir + "/" + stem + kind)) all = false;
      if (all) {
        ++skipped;
        continue;
      }
    }
    images.push_back(f);
    stems_of_images.push_back(stem);
  }

  const int classes = int(model.class_names.size());
  FILE* human = json_path == "-" ? stderr : stdout;  // keep stdout pure JSON with --json -
  if (!quiet)
    std::fprintf(human, "model %s (%s), %s, %zu image(s)%s\n", model_path.c_str(),
                 model.name.c_str(), pipe->describe().c_str(), images.size(),
                 videos.empty() ? "" : str_cat(", ", videos.size(), " video(s)").c_str());
  if (skipped && !quiet) std::fprintf(human, "skipped %zu image(s) whose outputs exist\n", skipped);

  // The JSON report is streamed (memory stays flat over any number of inputs) to a temporary
  // file renamed into place at the end.
  std::ostringstream js_head;
  std::unique_ptr<std::ostream> js_file;
  const std::string json_tmp = json_path.empty() || json_path == "-" ? "" : json_path + ".tmp";
  std::ostream* js = nullptr;
  if (json_path == "-") {
    js = &std::cout;
  } else if (!json_path.empty()) {
    js_file = std::make_unique<std::ofstream>(json_tmp);
    if (!*js_file) {
      std::fprintf(stderr, "label_image: %s: cannot write JSON report\n", json_path.c_str());
      return 2;
    }
    js = js_file.get();
  }
  if (js) {
    *js << "{\n  \"model\": \"" << json_escape(model_path) << "\",\n  \"model_name\": \""
        << json_escape(model.name) << "\",\n  \"device\": \"" << json_escape(pipe->describe())
        << "\",\n  \"classes\": [";
    for (int c = 0; c < classes; ++c)
      *js << (c ? ", " : "") << "\"" << json_escape(model.class_names[size_t(c)]) << "\"";
    *js << "],\n  \"images\": [";
  }

  auto histogram_of = [&](const LabelMap& m) { return histogram(m, classes); };
  auto detect = [&](Frame& f, Result& r) {
    if (detect_classes.empty()) return;
    const Tensor& scores = f.floats.at("scores");
    const Geometry g = f.geometry.at("scores");
    const auto probs = class_probabilities(scores.view(), detect_classes);
    for (size_t k = 0; k < detect_classes.size(); ++k)
      for (const auto& d : nms::detect_windows_cpu(
               probs[k].data(), scores.shape().h, scores.shape().w, detect_classes[k], heads[k],
               nms::MapGeometry{g.stride_y, g.stride_x, g.offset_y, g.offset_x}, f.image.width,
               f.image.height))
        r.detections.push_back({detect_classes[k], d.box, d.score});
  };
  auto hist_text = [&](const std::vector<size_t>& hist, double total) {
    std::vector<int> order(static_cast<size_t>(classes));
    for (int c = 0; c < classes; ++c) order[size_t(c)] = c;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return hist[size_t(a)] > hist[size_t(b)]; });
    std::string s;
    for (int c : order)
      if (hist[size_t(c)] > 0)
        s += str_cat(" ", model.class_names[size_t(c)], fmt(" %.1f%%", 100.0 * hist[size_t(c)] / total));
    return s;
  };
  auto hist_json = [&](const std::vector<size_t>& hist) {
    std::string s = "{";
    for (int c = 0; c < classes; ++c)
      s += str_cat(c ? ", " : "", "\"", json_escape(model.class_names[size_t(c)]), "\": ", hist[size_t(c)]);
    return s + "}";
  };
  auto detections_json = [&](const std::vector<Found>& dets) {
    std::string s = "[";
    for (size_t k = 0; k < dets.size(); ++k)
      s += str_cat(k ? ", " : "", "{\"class\": \"", json_escape(model.class_names[size_t(dets[k].cls)]),
                   "\", \"score\": ", dets[k].score, ", \"box\": [", dets[k].box.x1, ", ",
                   dets[k].box.y1, ", ", dets[k].box.x2, ", ", dets[k].box.y2, "]}");
    return s + "]";
  };

  size_t ok = 0, failed = 0, entries = 0;  // images
  size_t videos_ok = 0, videos_failed = 0;
  StageTimes total;
  double wall_s = 0, planning_ms = 0, first_pass_ms = 0, encode_total = 0, write_total = 0;
  size_t plans = 0, plans_cached = 0;
  auto add_stats = [&](const PipelineStats& st) {
    wall_s += st.wall_s;
    total += st.total;
    planning_ms += st.planning_ms;
    first_pass_ms += st.first_pass_ms;
    plans += st.plans;
    plans_cached += st.plans_from_cache;
  };

  // ---- images ----
  if (!images.empty()) {
    FileSource source(images, limits);
    Progress progress(images.size() > 4 && isatty(STDERR_FILENO), images.size());
    auto finish = [&](Frame& f) {
      if (!f.error.empty()) return;
      auto r = std::make_shared<Result>();
      r->hist = histogram_of(f.labels);
      detect(f, *r);
      const std::string base = out_dir + "/" + stems_of_images[f.index];
      auto save = [&](const std::string& path, const Image8& img, const PngOptions& o) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<uint8_t> bytes = encode_png(img, o);
        const auto t1 = std::chrono::steady_clock::now();
        write_file_atomic(path, bytes);
        r->encode_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
        r->write_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
        r->outputs.push_back(path);
      };
      if (save_opts.overlay) {
        Image8 over = overlay_labels(f.image, f.labels, model.palette);
        for (const auto& d : r->detections) draw_box(over, d.box, model.palette[size_t(d.cls)]);
        save(base + "_overlay.png", over, PngOptions{});
      }
      const Image8 index{f.labels.width, f.labels.height, 1, std::move(f.labels.labels)};
      if (save_opts.classes) save(base + "_classes.png", index, PngOptions{});
      if (save_opts.labels) {  // the class map with the palette: an indexed-colour PNG
        PngOptions o;
        o.palette = model.palette;
        save(base + "_labels.png", index, o);
      }
      f.image = Image8();
      f.floats.clear();
      f.user = r;
    };
    auto report = [&](Frame& f) {
      const auto* r = static_cast<const Result*>(f.user.get());
      if (r) encode_total += r->encode_ms, write_total += r->write_ms;
      if (!f.error.empty() || !r) {
        ++failed;
        progress.clear_line();
        std::fprintf(stderr, "label_image: FAILED %s\n", f.error.empty() ? f.name.c_str() : f.error.c_str());
      } else {
        ++ok;
        if (!quiet) {
          progress.clear_line();
          const double gop = f.ops * 1e-9;
          std::string line = str_cat(f.name, ": ", f.labels.width, "x", f.labels.height, "  ",
                                     fmt("%.1f ms", f.times.forward_ms), "  ", fmt("%.2f GOp", gop),
                                     "  ", fmt("%.1f GOp/s", gop / (f.times.forward_ms * 1e-3)), " ",
                                     hist_text(r->hist, double(f.labels.width) * f.labels.height));
          if (!detect_classes.empty()) line += str_cat("  detections: ", r->detections.size());
          std::fprintf(human, "%s\n", line.c_str());
        }
      }
      if (js) {
        *js << (entries++ ? "," : "") << "\n    {\"file\": \"" << json_escape(f.name) << "\", \"ok\": "
            << (f.error.empty() && r ? "true" : "false");
        if (!f.error.empty() || !r) {
          *js << ", \"error\": \"" << json_escape(f.error) << "\"}";
        } else {
          *js << ", \"width\": " << f.labels.width << ", \"height\": " << f.labels.height
              << ", \"batch\": " << f.batch << ", \"ms\": " << f.times.forward_ms
              << ", \"gop\": " << f.ops * 1e-9 << ", \"gops\": " << f.ops * 1e-9 / (f.times.forward_ms * 1e-3)
              << ", \"times_ms\": " << times_json(f.times) << ", \"encode_ms\": " << r->encode_ms
              << ", \"write_ms\": " << r->write_ms << ", \"histogram\": " << hist_json(r->hist)
              << ", \"detections\": " << detections_json(r->detections) << ", \"outputs\": [";
          for (size_t k = 0; k < r->outputs.size(); ++k)
            *js << (k ? ", " : "") << "\"" << json_escape(r->outputs[k]) << "\"";
          *js << "]}";
        }
      }
      progress.update(ok + failed);
    };
    try {
      add_stats(pipe->run(source, finish, report));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "label_image: %s\n", e.what());
      return 2;
    }
  }
  if (js) *js << "\n  ],\n  \"videos\": [";

  // ---- videos: one pipeline run each, frames written in order ----
  size_t video_frames = 0, video_entries = 0;
  for (size_t v = 0; v < videos.size() && !pipe->cancelled(); ++v) {
    const std::string& file = videos[v];
    const std::string stem = fs::path(file).stem().string();
    std::string error, stopped;
    size_t frames = 0, frames_failed = 0;
    std::vector<std::string> outputs;
    PipelineStats st;
    bool entry_open = false;
    try {
      VideoSource source(file, limits);
      const double fps = source.reader().fps();
      std::unique_ptr<VideoWriter> w_over, w_lab;
      Progress progress(isatty(STDERR_FILENO), source.size_hint());
      if (js)
        *js << (video_entries++ ? "," : "") << "\n    {\"file\": \"" << json_escape(file)
            << "\", \"frames\": [";
      entry_open = true;
      auto finish = [&](Frame& f) {
        if (!f.error.empty()) return;
        auto r = std::make_shared<Result>();
        r->hist = histogram_of(f.labels);
        detect(f, *r);
        Image8 color = colorize(f.labels, model.palette);
        if (save_opts.overlay) {
          r->video_overlay = overlay(f.image, color);
          for (const auto& d : r->detections) draw_box(r->video_overlay, d.box, model.palette[size_t(d.cls)]);
        }
        if (save_opts.labels) r->video_labels = std::move(color);
        f.image = Image8();
        f.floats.clear();
        f.user = r;
      };
      auto report = [&](Frame& f) {
        auto* r = static_cast<Result*>(f.user.get());
        if (!f.error.empty() || !r) {
          ++frames_failed;
          progress.clear_line();
          std::fprintf(stderr, "label_image: FAILED %s\n", f.error.empty() ? f.name.c_str() : f.error.c_str());
          return;
        }
        const int w = f.labels.width, h = f.labels.height;
        if (save_opts.overlay) {
          if (!w_over) {
            w_over = std::make_unique<VideoWriter>(out_dir + "/" + stem + "_overlay.mp4", w, h, fps);
            outputs.push_back(out_dir + "/" + stem + "_overlay.mp4");
          }
          w_over->write(r->video_overlay);
        }
        if (save_opts.labels) {
          if (!w_lab) {
            w_lab = std::make_unique<VideoWriter>(out_dir + "/" + stem + "_labels.mp4", w, h, fps);
            outputs.push_back(out_dir + "/" + stem + "_labels.mp4");
          }
          w_lab->write(r->video_labels);
        }
        if (js)
          *js << (frames ? "," : "") << "\n      {\"frame\": " << f.index << ", \"times_ms\": "
              << times_json(f.times) << ", \"histogram\": " << hist_json(r->hist)
              << ", \"detections\": " << detections_json(r->detections) << "}";
        ++frames;
        progress.update(frames);
      };
      st = pipe->run(source, finish, report);
      if (w_over) w_over->close();
      if (w_lab) w_lab->close();
      stopped = source.reader().stopped();
      add_stats(st);
    } catch (const std::exception& e) {
      error = e.what();
    }
    video_frames += frames;
    const double fps_done = st.wall_s > 0 ? frames / st.wall_s : 0;
    if (!error.empty()) {
      std::fprintf(stderr, "label_image: FAILED %s\n", error.c_str());
      ++videos_failed;
    } else {
      ++videos_ok;
      if (!stopped.empty()) std::fprintf(stderr, "label_image: %s: %s\n", file.c_str(), stopped.c_str());
      if (!quiet)
        std::fprintf(human, "%s: %zu frame(s) labelled, %.1f frames/s%s\n", file.c_str(), frames,
                     fps_done, frames_failed ? str_cat(", ", frames_failed, " failed").c_str() : "");
    }
    if (js) {
      if (entry_open) {
        *js << "\n    ], \"ok\": " << (error.empty() ? "true" : "false") << ", \"frames_labelled\": "
            << frames << ", \"frames_failed\": " << frames_failed << ", \"frames_per_s\": " << fps_done
            << ", \"stopped\": \"" << json_escape(stopped) << "\", \"error\": \"" << json_escape(error)
            << "\", \"outputs\": [";
        for (size_t k = 0; k < outputs.size(); ++k)
          *js << (k ? ", " : "") << "\"" << json_escape(outputs[k]) << "\"";
        *js << "]}";
      } else {
        *js << (video_entries++ ? "," : "") << "\n    {\"file\": \"" << json_escape(file)
            << "\", \"ok\": false, \"error\": \"" << json_escape(error) << "\"}";
      }
    }
  }

  const bool interrupted = pipe->cancelled();
  const size_t frames_done = ok + failed + video_frames;
  const double per = double(std::max<size_t>(1, frames_done));
  const double rate = wall_s > 0 ? double(frames_done) / wall_s : 0;
  if (!quiet || failed || videos_failed)
    std::fprintf(human,
                 "labelled %zu of %zu image(s), %zu failed%s; %.1f images/s (wall %.2f s); per image: "
                 "decode %.2f ms, upload %.3f, forward %.3f, download %.3f, write %.2f (ms of one "
                 "thread or stream); planning %.0f ms for %zu plan(s), %zu from the plan cache; "
                 "outputs in %s\n",
                 ok, images.size(), failed,
                 videos.empty() ? "" : str_cat(", ", videos_ok, " of ", videos.size(), " video(s) (",
                                               video_frames, " frames)").c_str(),
                 rate, wall_s, total.decode_ms / per, total.upload_ms / per, total.forward_ms / per,
                 total.download_ms / per, total.finish_ms / per, planning_ms, plans, plans_cached,
                 out_dir.c_str());
  if (interrupted) std::fprintf(stderr, "label_image: interrupted; outputs written so far are complete\n");
  if (js) {
    *js << "\n  ],\n  \"ok\": " << ok << ",\n  \"failed\": " << failed << ",\n  \"videos_ok\": "
        << videos_ok << ",\n  \"videos_failed\": " << videos_failed << ",\n  \"skipped\": " << skipped
        << ",\n  \"interrupted\": " << (interrupted ? "true" : "false") << ",\n  \"wall_s\": " << wall_s
        << ",\n  \"images_per_s\": " << rate << ",\n  \"stage_ms_per_image\": "
        << times_json(StageTimes{total.decode_ms / per, total.upload_ms / per, total.forward_ms / per,
                                 total.download_ms / per, total.finish_ms / per})
        << ",\n  \"encode_ms_per_image\": " << encode_total / per << ",\n  \"write_ms_per_image\": "
        << write_total / per << ",\n  \"planning_ms\": " << planning_ms << ",\n  \"first_pass_ms\": " << first_pass_ms
        << ",\n  \"plans\": " << plans
        << ",\n  \"plans_from_cache\": " << plans_cached << "\n}\n";
    js->flush();
    if (js_file) {
      const bool good = bool(*js_file);
      js_file.reset();
      std::error_code ec;
      if (!good || (fs::rename(json_tmp, json_path, ec), ec)) {
        std::fprintf(stderr, "label_image: %s: cannot write JSON report\n", json_path.c_str());
        return 1;
      }
    }
  }
  g_pipeline.store(nullptr);
  if (interrupted) return 130;
  return failed || videos_failed ? 1 : 0;
}
