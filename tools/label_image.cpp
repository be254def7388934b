// label_image: labels image files with a scene-labelling model. For each input NAME.ext writes
// into --out DIR: NAME_labels.png (colour label map), NAME_overlay.png (labels over the photo)
// and NAME_classes.png (8-bit class index per pixel), all at the input resolution.
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "engine/labeler.h"
#include "nms/sliding_window.h"
#include "tools/cli.h"
#include "weights/model_file.h"
#include "weights/model_locator.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: label_image [options] IMAGE|DIR|GLOB...\n"
    "  --model FILE.h5      model (default: the model shipped in weights/)\n"
    "  --out DIR            output folder (default: labels)\n"
    "  --device cpu|cuda|auto  (default auto: the GPU when there is one)\n"
    "  --conv direct|gemm|gemm2s|cudnn|auto  GPU convolution algorithm (default auto:\n"
    "                       each timed once per layer and size, the fastest kept)\n"
    "  --precision fp32|tf32|fp16  GPU precision (default fp32, equal to the CPU path)\n"
    "  --conv-workspace MiB bound on a convolution's GPU workspace\n"
    "                       (default: 2048 or 1/16 of the GPU memory if less)\n"
    "  --threads N          CPU threads (default: all)\n"
    "  --json FILE          machine-readable report ('-' for stdout)\n"
    "  --detect CLASS[,..]  sliding-window detection of these classes (names or indices):\n"
    "                       boxes go into the JSON report and onto the overlay\n"
    "  --det-threshold F    minimum mean class probability of a window (default 0.6)\n"
    "  --quiet              no per-image lines\n";

bool is_image_name(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), ::tolower);
  static const std::set<std::string> exts{".png", ".jpg", ".jpeg", ".bmp", ".tga",
                                          ".gif", ".ppm", ".pgm", ".pnm"};
  return exts.count(e) != 0;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  for (const auto& a : args) {
    std::error_code ec;
    if (fs::is_directory(a, ec)) {
      std::vector<std::string> in_dir;
      for (const auto& e : fs::directory_iterator(a, ec))
        if (e.is_regular_file() && is_image_name(e.path())) in_dir.push_back(e.path().string());
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (a.find_first_of("*?[") != std::string::npos && !fs::exists(a, ec)) {
      glob_t g{};
      if (::glob(a.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) files.push_back(g.gl_pathv[i]);
      else
        files.push_back(a);  // reported as missing
      globfree(&g);
    } else {
      files.push_back(a);
    }
  }
  return files;
}


struct Found {
  int cls;
  nms::Box box;
  float score;
};

struct Result {
  std::vector<Found> detections;
  std::string file, error;
  int w = 0, h = 0;
  double ms = 0, gop = 0;
  std::vector<size_t> hist;
  std::vector<std::string> outputs;
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

void progress(size_t done, size_t total) {
  const int width = 30;
  int filled = int(width * done / std::max<size_t>(1, total));
  std::fprintf(stderr, "\r[%s%s] %zu/%zu", std::string(size_t(filled), '#').c_str(),
               std::string(size_t(width - filled), '.').c_str(), done, total);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  Model model;
  std::unique_ptr<Labeler> labeler;
  std::vector<std::string> files;
  std::string out_dir, json_path, model_path;
  bool quiet = false;
  std::vector<int> detect_classes;
  nms::WindowHeadOptions head;
  try {
    Cli cli(argc, argv, {"model", "out", "device", "threads", "json", "detect", "det-threshold",
                         "conv", "precision", "conv-workspace"},
            {"quiet", "help"});
    if (cli.has("help")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (cli.positional().empty()) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    quiet = cli.has("quiet");
    out_dir = cli.get("out", "labels");
    json_path = cli.get("json");
    model_path = cli.has("model") ? cli.get("model") : find_default_model();
    model = read_model(model_path);
    labeler = std::make_unique<Labeler>(
        model, make_backend(cli.get("device", "auto"), cli.get_int("threads", 0), cuda_options(cli)));
    if (cli.has("detect")) detect_classes = parse_classes(cli.get("detect"), model.class_names);
    head.threshold = float(std::atof(cli.get("det-threshold", "0.6").c_str()));
    files = expand_inputs(cli.positional());
    SL_REQUIRE(!files.empty(), "no image files found in the given paths");
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    SL_REQUIRE(fs::is_directory(out_dir), out_dir, ": cannot create output folder");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "label_image: %s\n", e.what());
    return 2;
  }

  const int classes = int(model.class_names.size());
  FILE* human = json_path == "-" ? stderr : stdout;  // keep stdout pure JSON with --json -
  const bool show_progress = files.size() > 4 && isatty(STDERR_FILENO);
  if (!quiet)
    std::fprintf(human, "model %s (%s), %s, %zu image(s)\n", model_path.c_str(), model.name.c_str(),
                labeler->backend().describe().c_str(), files.size());
  std::vector<Result> results;
  std::set<std::string> used_stems;
  auto t_all = std::chrono::steady_clock::now();
  for (size_t i = 0; i < files.size(); ++i) {
    Result r;
    r.file = files[i];
    try {
      Image8 img = load_image(r.file, 3);
      r.w = img.width;
      r.h = img.height;
      LabelMap m = labeler->label(img);
      r.ms = labeler->last_ms();
      r.gop = labeler->ops_per_run() * 1e-9;
      r.hist = histogram(m, classes);
      std::string stem = fs::path(r.file).stem().string();
      for (int k = 2; used_stems.count(stem); ++k)
        stem = fs::path(r.file).stem().string() + "_" + std::to_string(k);
      used_stems.insert(stem);
      int mh = 0, mw = 0;
      Geometry geo;
      const auto probs = detect_classes.empty()
                             ? std::vector<std::vector<float>>{}
                             : labeler->class_probabilities(detect_classes, &mh, &mw, &geo);
      for (size_t k = 0; k < detect_classes.size(); ++k) {
        const int cls = detect_classes[k];
        for (const auto& d : nms::detect_windows_cpu(
                 probs[k].data(), mh, mw, cls, head,
                 nms::MapGeometry{geo.stride_y, geo.stride_x, geo.offset_y, geo.offset_x},
                 img.width, img.height))
          r.detections.push_back({cls, d.box, d.score});
      }
      Image8 color = colorize(m, model.palette);
      Image8 index{m.width, m.height, 1, m.labels};
      r.outputs = {out_dir + "/" + stem + "_labels.png", out_dir + "/" + stem + "_overlay.png",
                   out_dir + "/" + stem + "_classes.png"};
      save_png(r.outputs[0], color);
      Image8 over = overlay(img, color);
      for (const auto& d : r.detections) draw_box(over, d.box, model.palette[size_t(d.cls)]);
      save_png(r.outputs[1], over);
      save_png(r.outputs[2], index);
    } catch (const std::exception& e) {
      r.error = e.what();
      r.outputs.clear();
    }
    if (show_progress) std::fprintf(stderr, "\r%60s\r", "");
    if (!r.error.empty()) {
      std::fprintf(stderr, "label_image: FAILED %s\n", r.error.c_str());
    } else if (!quiet) {
      std::ostringstream line;
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s: %dx%d  %.1f ms  %.2f GOp  %.1f GOp/s  ", r.file.c_str(),
                    r.w, r.h, r.ms, r.gop, r.gop / (r.ms * 1e-3));
      line << buf;
      std::vector<int> order(static_cast<size_t>(classes));
      for (int c = 0; c < classes; ++c) order[size_t(c)] = c;
      std::sort(order.begin(), order.end(),
                [&](int a, int b) { return r.hist[size_t(a)] > r.hist[size_t(b)]; });
      const double total = double(r.w) * r.h;
      for (int c : order)
        if (r.hist[size_t(c)] > 0) {
          std::snprintf(buf, sizeof buf, " %s %.1f%%", model.class_names[size_t(c)].c_str(),
                        100.0 * r.hist[size_t(c)] / total);
          line << buf;
        }
      if (!detect_classes.empty()) line << "  detections: " << r.detections.size();
      std::fprintf(human, "%s\n", line.str().c_str());
    }
    if (show_progress) progress(i + 1, files.size());
    results.push_back(std::move(r));
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
  size_t ok = 0;
  double ms_sum = 0;
  for (const auto& r : results)
    if (r.error.empty()) {
      ++ok;
      ms_sum += r.ms;
    }
  const size_t failed = results.size() - ok;
  if (!quiet || failed)
    std::fprintf(human, "labelled %zu of %zu image(s), %zu failed; mean forward %.1f ms; wall %.2f s; "
                "outputs in %s\n",
                ok, results.size(), failed, ok ? ms_sum / double(ok) : 0.0, wall_s,
                out_dir.c_str());

  if (!json_path.empty()) {
    std::ostringstream js;
    js << "{\n  \"model\": \"" << json_escape(model_path) << "\",\n  \"model_name\": \""
       << json_escape(model.name) << "\",\n  \"device\": \""
       << json_escape(labeler->backend().describe()) << "\",\n  \"classes\": [";
    for (int c = 0; c < classes; ++c)
      js << (c ? ", " : "") << "\"" << json_escape(model.class_names[size_t(c)]) << "\"";
    js << "],\n  \"images\": [";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      js << (i ? "," : "") << "\n    {\"file\": \"" << json_escape(r.file) << "\", \"ok\": "
         << (r.error.empty() ? "true" : "false");
      if (!r.error.empty()) {
        js << ", \"error\": \"" << json_escape(r.error) << "\"}";
        continue;
      }
      js << ", \"width\": " << r.w << ", \"height\": " << r.h << ", \"ms\": " << r.ms
         << ", \"gop\": " << r.gop << ", \"gops\": " << r.gop / (r.ms * 1e-3)
         << ", \"histogram\": {";
      for (int c = 0; c < classes; ++c)
        js << (c ? ", " : "") << "\"" << json_escape(model.class_names[size_t(c)])
           << "\": " << r.hist[size_t(c)];
      js << "}, \"detections\": [";
      for (size_t k = 0; k < r.detections.size(); ++k) {
        const Found& d = r.detections[k];
        js << (k ? ", " : "") << "{\"class\": \"" << json_escape(model.class_names[size_t(d.cls)])
           << "\", \"score\": " << d.score << ", \"box\": [" << d.box.x1 << ", " << d.box.y1
           << ", " << d.box.x2 << ", " << d.box.y2 << "]}";
      }
      js << "], \"outputs\": [";
      for (size_t k = 0; k < r.outputs.size(); ++k)
        js << (k ? ", " : "") << "\"" << json_escape(r.outputs[k]) << "\"";
      js << "]}";
    }
    js << "\n  ],\n  \"ok\": " << ok << ",\n  \"failed\": " << failed << "\n}\n";
    if (json_path == "-") {
      std::cout << js.str();
    } else {
      std::ofstream f(json_path);
      f << js.str();
      if (!f) {
        std::fprintf(stderr, "label_image: %s: cannot write JSON report\n", json_path.c_str());
        return 1;
      }
    }
  }
  return failed ? 1 : 0;
}
