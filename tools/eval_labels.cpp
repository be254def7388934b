// eval_labels: runs a model over a labelled folder (CamVid layout: images/NAME.jpg|png,
// labels/NAME.png, 8-bit class index, void index configurable) and prints global pixel
// accuracy, class-average accuracy, mean IoU, per-class IoU and the confusion matrix.
//   eval_labels --data DIR [--model FILE.h5] [--void 11] [--device cpu] [--threads N]
//               [--limit N] [--json FILE|-]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "engine/label_metrics.h"
#include "engine/labeler.h"
#include "tools/cli.h"
#include "weights/model_file.h"
#include "weights/model_locator.h"

using namespace scenelab;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  Model model;
  std::unique_ptr<Labeler> labeler;
  std::vector<std::pair<std::string, std::string>> pairs;  // image, label
  std::string model_path, json_path;
  int void_index = 11;
  try {
    Cli cli(argc, argv, {"data", "model", "void", "device", "threads", "limit", "json", "conv", "precision", "conv-workspace"}, {"help"});
    if (cli.has("help") || !cli.has("data")) {
      std::fputs("usage: eval_labels --data DIR [--model FILE.h5] [--void 11] [--device cpu|cuda|auto] "
                 "[--threads N] [--limit N] [--json FILE|-]\n", cli.has("help") ? stdout : stderr);
      return cli.has("help") ? 0 : 2;
    }
    void_index = cli.get_int("void", 11);
    json_path = cli.get("json");
    model_path = cli.has("model") ? cli.get("model") : find_default_model();
    model = read_model(model_path);
    labeler = std::make_unique<Labeler>(
        model, make_backend(cli.get("device", "auto"), cli.get_int("threads", 0), cuda_options(cli)));
    const fs::path data = cli.get("data");
    SL_REQUIRE(fs::is_directory(data / "images") && fs::is_directory(data / "labels"), data.string(),
               ": expected folders images/ and labels/");
    std::vector<fs::path> imgs;
    for (const auto& e : fs::directory_iterator(data / "images"))
      if (e.is_regular_file()) imgs.push_back(e.path());
    std::sort(imgs.begin(), imgs.end());
    const int limit = cli.get_int("limit", 0);
    for (const auto& p : imgs) {
      if (limit > 0 && int(pairs.size()) >= limit) break;
      pairs.emplace_back(p.string(), (data / "labels" / (p.stem().string() + ".png")).string());
    }
    SL_REQUIRE(!pairs.empty(), data.string(), ": no images in images/");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "eval_labels: %s\n", e.what());
    return 2;
  }
  const int classes = int(model.class_names.size());
  FILE* human = json_path == "-" ? stderr : stdout;
  ConfusionMatrix cm(classes);
  size_t failed = 0;
  double ms = 0;
  for (const auto& [img_path, lab_path] : pairs) {
    try {
      Image8 img = load_image(img_path, 3);
      Image8 lab = load_label_image(lab_path);
      SL_REQUIRE(img.width == lab.width && img.height == lab.height, img_path, ": image is ",
                 img.width, "x", img.height, " but its label ", lab_path, " is ", lab.width, "x",
                 lab.height);
      for (uint8_t v : lab.pixels)
        SL_REQUIRE(v < classes || v == void_index, lab_path, ": label value ", int(v),
                   " is neither a class (0..", classes - 1, ") nor void (", void_index, ")");
      LabelMap pred = labeler->label(img);
      ms += labeler->last_ms();
      // Void pixels are those >= classes after this remap, which ConfusionMatrix skips.
      std::vector<uint8_t> truth = lab.pixels;
      for (auto& v : truth)
        if (v == void_index) v = 255;
      cm.add(truth, pred.labels);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "eval_labels: FAILED %s\n", e.what());
      ++failed;
    }
  }
  const size_t ok = pairs.size() - failed;
  auto iou = cm.class_iou();
  std::fprintf(human, "model %s on %zu image(s) (%zu failed), %s, mean forward %.1f ms\n",
               model_path.c_str(), ok, failed, labeler->backend().describe().c_str(),
               ok ? ms / double(ok) : 0.0);
  std::fprintf(human, "global pixel accuracy %.2f%%  class-average accuracy %.2f%%  mean IoU %.2f%%\n",
               100 * cm.global_accuracy(), 100 * cm.class_accuracy(), 100 * cm.mean_iou());
  std::fprintf(human, "| class | IoU %% | accuracy %% | pixels |\n|---|---|---|---|\n");
  for (int c = 0; c < classes; ++c) {
    uint64_t row = 0;
    for (int p = 0; p < classes; ++p) row += cm.at(c, p);
    std::fprintf(human, "| %s | %.2f | %.2f | %llu |\n", model.class_names[size_t(c)].c_str(),
                 100 * iou[size_t(c)], row ? 100.0 * double(cm.at(c, c)) / double(row) : 0.0,
                 static_cast<unsigned long long>(row));
  }
  std::fprintf(human, "confusion matrix (rows: truth, columns: prediction):\n");
  for (int c = 0; c < classes; ++c) {
    std::fprintf(human, "%12.12s", model.class_names[size_t(c)].c_str());
    for (int p = 0; p < classes; ++p)
      std::fprintf(human, " %9llu", static_cast<unsigned long long>(cm.at(c, p)));
    std::fprintf(human, "\n");
  }
  if (!json_path.empty()) {
    std::ostringstream js;
    auto num = [](double v) { return std::isnan(v) ? std::string("null") : std::to_string(v); };
    js << "{\n  \"model\": \"" << json_escape(model_path) << "\",\n  \"images\": " << ok
       << ",\n  \"failed\": " << failed << ",\n  \"global_accuracy\": " << cm.global_accuracy()
       << ",\n  \"class_accuracy\": " << cm.class_accuracy() << ",\n  \"mean_iou\": "
       << cm.mean_iou() << ",\n  \"classes\": [";
    for (int c = 0; c < classes; ++c)
      js << (c ? ", " : "") << "{\"name\": \"" << json_escape(model.class_names[size_t(c)])
         << "\", \"iou\": " << num(iou[size_t(c)]) << "}";
    js << "],\n  \"confusion\": [";
    for (int c = 0; c < classes; ++c) {
      js << (c ? ", " : "") << "[";
      for (int p = 0; p < classes; ++p) js << (p ? ", " : "") << cm.at(c, p);
      js << "]";
    }
    js << "]\n}\n";
    if (json_path == "-") {
      std::cout << js.str();
    } else {
      std::ofstream(json_path) << js.str();
    }
  }
  return failed ? 1 : 0;
}
