// label_image: labels image files and videos with a scene-labelling model, on the streaming
// pipeline (job/pipeline.h). For each input image NAME.ext it writes into --out DIR, as
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
#include <thread>
#include <sstream>

#include "job/labeler.h"
#include "job/pipeline.h"
#include "job/pyramid_detector.h"
#include "job/video.h"
#include "job/score_map_head.h"
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
    "  --model FILE.h5[,FILE.h5...]  model (default: the model shipped in weights/);\n"
    "                       several: an ensemble, their class probabilities averaged\n"
    "                       (at most 32 passes: models x 2 if mirrored x scales)\n"
    "  --mirror             label with the mean class probabilities of the image and its\n"
    "                       left-right mirror (twice the work; +0.4 to +0.7 points on\n"
    "                       each figure on unseen CamVid sequences, weights/MODELS.md)\n"
    "  --scales LIST        label with the mean class probabilities of the image resized\n"
    "                       by each factor, e.g. 0.5,0.75,1 (work: the sum of their squares;\n"
    "                       with --mirror, both passes at each; weights/MODELS.md)\n"
    "  --refine[=S,R[,K]]   refine the class probabilities along the image's edges (the\n"
    "                       domain transform: S pixels of spread where the image is flat,\n"
    "                       a colour step of R stops it; K iterations; default 40,0.2,3;\n"
    "                       a 480x360 frame: about 0.2 ms on an H200, 8 ms on two CPU\n"
    "                       cores; weights/MODELS.md)\n"
    "  --out DIR            output folder (default: labels)\n"
    "  --save LIST          outputs, any of classes,labels,overlay (default: all three;\n"
    "                       videos: labels and/or overlay)\n"
    "  --device D           cpu | cuda | cuda:N | cuda:all (one pipeline per GPU) | auto\n"
    "                       (default auto: the GPU when there is one)\n"
    "  --precision fp32|tf32|fp16  GPU precision (default fp32, within 1e-4 of the CPU path)\n"
    "  --conv direct|gemm|gemm2s|cudnn|split|auto  GPU convolution algorithm (default\n"
    "                       auto: each timed once per layer and size, the fastest kept;\n"
    "                       split: fp32 on TF32 tensor cores, two pieces a float);\n"
    "                       on the CPU: gemm (im2col) | winograd | auto (Winograd for\n"
    "                       3x3-7x7 layers with 16 or more input channels)\n"
    "  --conv-workspace MiB bound on a convolution's GPU workspace\n"
    "                       (default: 2048 or 1/16 of the GPU memory if less)\n"
    "  --runtime-fusion on|off|auto  fp16/bf16: cuDNN's fused convolution + bias + ReLU\n"
    "                       kernels, compiled at planning (about 1 s a large size, once a\n"
    "                       machine; 0.3 ms a frame faster at 1920x1080) (default auto: on\n"
    "                       for videos and for 10000 images or more)\n"
    "  --batch N            images of one size run N at a time (default: chosen for the\n"
    "                       device and size: up to 16 on a GPU, 1 on the CPU)\n"
    "  --streams N          batches in flight per GPU (default 2)\n"
    "  --threads N          CPU backend threads (default: all)\n"
    "  --io-threads N       decoding and writing threads (default: all)\n"
    "  --queue-depth N      frames between decoding and reporting (default: automatic)\n"
    "  --plan-cache DIR|off where timed planning choices are kept\n"
    "                       (default $XDG_CACHE_HOME/scenelab or ~/.cache/scenelab)\n"
    "  --max-pixels N|WxH   largest image accepted (default 16384x16384)\n"
    "  --png-compression fast|N  fast (default): our coder for filtered rows, 3x libdeflate's\n"
    "                       fastest level at about its size; N = 0..12: libdeflate at level N\n"
    "                       (smaller files, slower; zlib's 0..9 in builds without libdeflate)\n"
    "  --skip-existing      skip inputs whose outputs all exist (resume a run)\n"
    "  --json FILE          machine-readable report ('-' for stdout)\n"
    "  --detect CLASS[,..]  sliding-window detection of these classes (names or indices):\n"
    "                       boxes go into the JSON report and onto the overlay\n"
    "  --det-threshold F    minimum objectness of a window (default: the model's per-class\n"
    "                       setting, else 0.3; with --detector hog: the SVM score, default 0)\n"
    "  --detector D         convnet (default: windows over the labelling model's class map)\n"
    "                       | hog (Dalal-Triggs HOG + linear SVM over an image pyramid,\n"
    "                       weights/hog-people.h5: class 'person') | FILE.h5 (such a model)\n"
    "  --fusion F           hog: greedy (exact greedy NMS, IoU 0.3; default) | oro (Oro et\n"
    "                       al.'s map/reduce, over-candidate 0.3) | group (OpenCV's\n"
    "                       groupRectangles) | none (every window hit)\n"
    "  --detect-only        detection without scene labelling (images; --detect needed):\n"
    "                       NAME_detections.png (boxes on the photo) and the JSON report\n"
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

constexpr std::array<uint8_t, 3> kHogColour{255, 64, 32};  // pyramid detector boxes

struct Found {
  int cls;  // the labelling model's class, or -1: the pyramid detector's class
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
                 t.forward_ms, ", \"download\": ", t.download_ms, ", \"finish\": ", t.finish_ms,
                 ", \"detect\": ", t.detect_ms, "}");
}


// Pyramid detectors for the finishing threads: on the CPU one per thread (one core each, the
// threads run side by side); on a GPU one, taken in turn.
class HogPool {
 public:
  HogPool(const Model& m, std::string overrides, const std::string& device) : model_(m), overrides_(std::move(overrides)) {
    const bool gpu = device != "cpu" && cuda_device_count() > 0;
    if (gpu) {
      const std::string d = device.rfind("cuda:", 0) == 0 && device != "cuda:all" ? device : "cuda";
      gpu_backend_ = make_backend(d, 0, CudaOptions{});
      gpu_ = std::make_unique<PyramidDetector>(model_, *gpu_backend_, overrides_);
    }
  }
  std::string describe() const { return gpu_ ? "GPU" : "CPU, one core per finishing thread"; }
  std::vector<nms::Detection> detect(const Image8& img, PyramidTimes* t = nullptr) {
    if (gpu_) {
      std::lock_guard<std::mutex> lock(gpu_mu_);
      return gpu_->detect(img.pixels.data(), img.height, img.width, img.channels, t);
    }
    Slot* slot;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& s = slots_[std::this_thread::get_id()];
      if (!s) {  // made whole, or not at all (a failure is the frame's, and retried next time)
        auto fresh = std::make_unique<Slot>();
        fresh->backend = std::make_unique<CpuBackend>(1);
        fresh->det = std::make_unique<PyramidDetector>(model_, *fresh->backend, overrides_);
        s = std::move(fresh);
      }
      slot = s.get();
    }
    return slot->det->detect(img.pixels.data(), img.height, img.width, img.channels, t);
  }

 private:
  struct Slot {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<PyramidDetector> det;
  };
  const Model& model_;
  std::string overrides_;
  std::unique_ptr<Backend> gpu_backend_;
  std::unique_ptr<PyramidDetector> gpu_;
  std::mutex gpu_mu_, mu_;
  std::map<std::thread::id, std::unique_ptr<Slot>> slots_;
};

std::string boxes_json(const std::vector<nms::Detection>& dets, const std::string& cls) {
  std::string s = "[";
  for (size_t k = 0; k < dets.size(); ++k)
    s += str_cat(k ? ", " : "", "{\"class\": \"", json_escape(cls), "\", \"score\": ", dets[k].score,
                 ", \"box\": [", dets[k].box.x1, ", ", dets[k].box.y1, ", ", dets[k].box.x2, ", ",
                 dets[k].box.y2, "]}");
  return s + "]";
}

// --detect-only: each image decoded, searched and written (boxes on the photo) by a pool of
// threads; the report in input order.
int detect_only_run(const Model& hog, const std::string& overrides, const std::string& cls,
                    const std::vector<std::string>& inputs, const std::string& out_dir,
                    const std::string& json_path, const ImageLimits& limits, const PngOptions& png_opt,
                    const std::string& device, int threads, bool quiet) {
  std::unique_ptr<HogPool> pool;
  try {
    pool = std::make_unique<HogPool>(hog, overrides, device);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "label_image: %s\n", e.what());
    return 2;
  }
  struct Entry {
    std::string error, output;
    int w = 0, h = 0;
    std::vector<nms::Detection> dets;
    PyramidTimes times;
  };
  std::vector<Entry> entries(inputs.size());
  std::vector<std::string> stems;
  std::set<std::string> used;
  for (const auto& f : inputs) {
    std::string stem = fs::path(f).stem().string();
    for (int k = 2; used.count(stem); ++k) stem = fs::path(f).stem().string() + "_" + std::to_string(k);
    used.insert(stem);
    stems.push_back(stem);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < inputs.size() && g_signals.load() == 0;) {
      Entry& e = entries[i];
      try {
        Image8 img = load_image(inputs[i], 3, limits);
        e.w = img.width, e.h = img.height;
        e.dets = pool->detect(img, &e.times);
        for (const auto& d : e.dets) draw_box(img, d.box, {255, 64, 32});
        e.output = out_dir + "/" + stems[i] + "_detections.png";
        write_file_atomic(e.output, encode_png(img, png_opt));
      } catch (const std::exception& ex) {
        e.error = ex.what();
      }
    }
  };
  const int n = std::max(1, threads > 0 ? threads : int(std::thread::hardware_concurrency()));
  std::vector<std::thread> workers;
  for (int k = 0; k < std::min<int>(n, int(inputs.size())); ++k) workers.emplace_back(work);
  for (auto& t : workers) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t ok = 0, failed = 0;
  FILE* human = json_path == "-" ? stderr : stdout;  // keep stdout pure JSON with --json -
  std::ostringstream js;
  js << "{\n  \"detector\": \"" << json_escape(hog.name) << "\",\n  \"device\": \"" << pool->describe()
     << "\",\n  \"images\": [";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Entry& e = entries[i];
    if (e.error.empty() && e.output.empty()) continue;  // interrupted before it
    js << (ok + failed ? "," : "") << "\n    {\"file\": \"" << json_escape(inputs[i]) << "\", \"ok\": "
       << (e.error.empty() ? "true" : "false");
    if (!e.error.empty()) {
      ++failed;
      std::fprintf(stderr, "label_image: FAILED %s\n", e.error.c_str());
      js << ", \"error\": \"" << json_escape(e.error) << "\"}";
      continue;
    }
    ++ok;
    if (!quiet)
      std::fprintf(human, "%s: %dx%d  %d levels  %.1f ms  %zu %s(s)\n", inputs[i].c_str(), e.w, e.h, e.times.levels,
                  e.times.run_ms + e.times.fuse_ms, e.dets.size(), cls.c_str());
    js << ", \"width\": " << e.w << ", \"height\": " << e.h << ", \"levels\": " << e.times.levels
       << ", \"ms\": " << e.times.run_ms + e.times.fuse_ms << ", \"detections\": " << boxes_json(e.dets, cls)
       << ", \"outputs\": [\"" << json_escape(e.output) << "\"]}";
  }
  js << "\n  ],\n  \"ok\": " << ok << ",\n  \"failed\": " << failed << ",\n  \"wall_s\": " << wall
     << ",\n  \"images_per_s\": " << (wall > 0 ? double(ok + failed) / wall : 0) << "\n}\n";
  if (!quiet || failed)
    std::fprintf(human, "searched %zu of %zu image(s) for %s, %zu failed; %.1f images/s; outputs in %s\n", ok,
                inputs.size(), cls.c_str(), failed, wall > 0 ? double(ok + failed) / wall : 0, out_dir.c_str());
  if (json_path == "-") {
    std::cout << js.str();
  } else if (!json_path.empty()) {
    const std::string text = js.str();
    try {
      write_file_atomic(json_path, std::vector<uint8_t>(text.begin(), text.end()));
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "label_image: %s: cannot write JSON report (%s)\n", json_path.c_str(), ex.what());
      return 1;
    }
  }
  if (g_signals.load()) return 130;
  return failed ? 1 : 0;
}
}  // namespace

int main(int argc, char** argv) {
  Model model;
  std::string out_dir, json_path, model_path;
  bool quiet = false, skip_existing = false;
  Save save_opts;
  PngOptions png_opt;  // --png-compression
  std::vector<int> detect_classes;
  std::vector<nms::WindowHeadOptions> heads;  // per detected class
  PipelineOptions po;
  ImageLimits limits;
  std::vector<std::string> inputs;
  // --detector hog|FILE: a pyramid detector (job/pyramid_detector.h) instead of the head.
  Model hog_model;
  std::string hog_overrides, hog_class;
  bool use_hog = false, detect_only = false;
  try {
    Cli cli(argc, argv,
            {"model", "out", "device", "threads", "json", "detect", "det-threshold", "conv",
             "precision", "conv-workspace", "batch", "streams", "io-threads", "queue-depth",
             "plan-cache", "save", "max-pixels", "detector", "fusion", "runtime-fusion",
             "png-compression", "scales", "refine"},
            {"quiet", "help", "skip-existing", "detect-only", "mirror", "refine"});
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
    if (cli.has("png-compression") && cli.get("png-compression") != "fast") {
      png_opt.coder = PngCoder::Deflate;
      png_opt.level = cli.get_int("png-compression", 1);
      SL_REQUIRE(png_opt.level >= 0 && png_opt.level <= 12, "--png-compression: fast or a level 0..12, not '",
                 cli.get("png-compression"), "'");
    }
    detect_only = cli.has("detect-only");
    const std::string detector = cli.get("detector", "convnet");
    use_hog = detector != "convnet";
    if (use_hog) {
      hog_model = read_model(detector == "hog" ? find_weights("hog-people.h5") : detector);
      SL_REQUIRE(!hog_model.pyramid.empty(), "--detector ", detector, ": model '", hog_model.name,
                 "' is no sliding-window detector (no 'pyramid' attribute)");
      hog_class = hog_model.class_names.empty() ? "object" : hog_model.class_names[0];
      SL_REQUIRE(cli.has("detect"), "--detector ", detector, " needs --detect ", hog_class);
      std::string want = cli.get("detect"), have = hog_class;
      std::transform(want.begin(), want.end(), want.begin(), ::tolower);
      std::transform(have.begin(), have.end(), have.begin(), ::tolower);
      SL_REQUIRE(want == have, "--detect ", cli.get("detect"), ": the ", detector, " detector finds '",
                 hog_class, "' only");
      if (cli.has("fusion")) hog_overrides += " fusion=" + cli.get("fusion");
      if (cli.has("det-threshold")) hog_overrides += " threshold=" + cli.get("det-threshold");
      PyramidOptions check;  // bad overrides fail here, before any work
      parse_pyramid_spec(hog_model.pyramid + hog_overrides, check);
    } else {
      SL_REQUIRE(!cli.has("fusion"), "--fusion applies to --detector hog");
    }
    SL_REQUIRE(!detect_only || cli.has("detect"), "--detect-only needs --detect CLASS");
    if (detect_only && use_hog) {
      for (const char* o : {"mirror", "scales", "refine"})
        SL_REQUIRE(!cli.has(o), "--", o, " applies to the labelling model, which --detect-only with --detector ",
                   detector, " does not run");
      model_path = detector;
    } else {
      model_path = cli.has("model") ? cli.get("model") : find_default_model();
      model = labelling_model(model_path, cli.has("mirror"), scales_option(cli), refine_option(cli));
    }
    if (cli.has("detect") && !use_hog) detect_classes = parse_classes(cli.get("detect"), model.class_names);
    // Each class's head: the defaults, the model's settings for it, then --det-threshold.
    for (int c : detect_classes) {
      nms::WindowHeadOptions o = head_settings(model, c);
      if (cli.has("det-threshold")) {  // finite, as the model's own settings must be
        const double t = cli.get_double("det-threshold", 0.0);
        SL_REQUIRE(std::abs(t) <= 1e30, "--det-threshold ", cli.get("det-threshold"), " is out of range");
        o.threshold = float(t);
      }
      heads.push_back(o);
    }
    po = pipeline_options(cli);
    // The head runs on the pipeline's workers, where the scores are (on a GPU, there).
    for (size_t k = 0; k < detect_classes.size(); ++k) po.detect.push_back({detect_classes[k], heads[k]});
    // The overlay PNG blended and filtered on a GPU, where pixels and labels are (the file is the
    // same): not where boxes are drawn on it or another coder filters it.
    po.overlay.on = save_opts.overlay && detect_classes.empty() && !use_hog && png_opt.coder == PngCoder::Huffman;
    po.overlay.palette = model.palette;
    inputs = expand_inputs(cli.positional(), /*videos=*/!detect_only);
    SL_REQUIRE(!inputs.empty(), "no image files found in the given paths");
    // --runtime-fusion auto: compiled fused kernels pay for their compilation (about a second a
    // large shape, once a machine; 0.25 s of first pass from the driver's cache after) over long
    // runs only: videos, or 10000 images and more (H100: 1010 images of 480x360 took 0.25 s more
    // with it, for no measurable gain; it saves 0.2-0.3 ms a 1920x1080 frame).
    if (cli.get("runtime-fusion", "auto") == "auto")
      po.cuda.runtime_fusion = inputs.size() >= 10000 ||
                               std::any_of(inputs.begin(), inputs.end(), [](const std::string& f) { return is_video_name(f); });
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    SL_REQUIRE(fs::is_directory(out_dir), out_dir, ": cannot create output folder");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "label_image: %s\n", e.what());
    return 2;
  }
  if (detect_only) {
    if (!use_hog) {
      std::fprintf(stderr, "label_image: --detect-only works with --detector hog (the convnet head reads "
                           "the labelling model's class map)\n");
      return 2;
    }
    return detect_only_run(hog_model, hog_overrides, hog_class, inputs, out_dir, json_path, limits,
                           png_opt, po.device, po.threads, quiet);
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
  std::unique_ptr<HogPool> hog_pool;
  if (use_hog) {
    try {
      hog_pool = std::make_unique<HogPool>(hog_model, hog_overrides, po.device);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "label_image: %s\n", e.what());
      return 2;
    }
  }
  auto detect = [&](Frame& f, Result& r) {
    if (hog_pool) {
      for (const auto& d : hog_pool->detect(f.image)) r.detections.push_back({-1, d.box, d.score});
      return;
    }
    for (const auto& d : f.detections) r.detections.push_back({d.cls, d.box, d.score});
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
      s += str_cat(k ? ", " : "", "{\"class\": \"",
                   json_escape(dets[k].cls < 0 ? hog_class : model.class_names[size_t(dets[k].cls)]),
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
      using Clock = std::chrono::steady_clock;
      auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
      // encode() makes the file's bytes (timed as encoding), then they are written.
      auto save = [&](const std::string& path, auto&& encode) {
        const auto t0 = Clock::now();
        const std::vector<uint8_t> bytes = encode();
        const auto t1 = Clock::now();
        write_file_atomic(path, bytes);
        r->encode_ms += ms(t0, t1);
        r->write_ms += ms(t1, Clock::now());
        r->outputs.push_back(path);
      };
      if (save_opts.overlay && !f.overlay_rows.empty()) {
        save(base + "_overlay.png", [&] {
          return encode_png_filtered(f.overlay_rows.data(), f.labels.width, f.labels.height, 3, png_opt);
        });
      } else if (save_opts.overlay) {
        Image8 over = overlay_labels(f.image, f.labels, model.palette);
        for (const auto& d : r->detections) draw_box(over, d.box, d.cls < 0 ? kHogColour : model.palette[size_t(d.cls)]);
        save(base + "_overlay.png", [&] { return encode_png(over, png_opt); });
      }
      if (save_opts.classes || save_opts.labels) {
        // The class map once compressed for both: as grey indices, and with the palette as an
        // indexed-colour PNG (the same pixels, another header).
        const auto t0 = Clock::now();
        const PngPixels index = compress_png(Image8{f.labels.width, f.labels.height, 1, std::move(f.labels.labels)}, png_opt);
        r->encode_ms += ms(t0, Clock::now());
        PngOptions indexed = png_opt;
        indexed.palette = model.palette;
        if (save_opts.classes) save(base + "_classes.png", [&] { return png_file(index, png_opt); });
        if (save_opts.labels) save(base + "_labels.png", [&] { return png_file(index, indexed); });
      }
      f.image = Image8();
      f.overlay_rows = std::vector<uint8_t>();
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
          if (!detect_classes.empty() || hog_pool) line += str_cat("  detections: ", r->detections.size());
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
  pipe->set_overlay(PipelineOptions::Overlay{});  // a video's overlay is blended on the host
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
          for (const auto& d : r->detections) draw_box(r->video_overlay, d.box, d.cls < 0 ? kHogColour : model.palette[size_t(d.cls)]);
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
                                 total.download_ms / per, total.finish_ms / per, total.detect_ms / per})
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
