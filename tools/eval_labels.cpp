// eval_labels: runs a model over a labelled folder (CamVid layout: images/NAME.jpg|png,
// labels/NAME.png, 8-bit class index, void index configurable) and prints global pixel
// accuracy, class-average accuracy, mean IoU, per-class IoU and the confusion matrix.
//   eval_labels --data DIR [--model FILE.h5[,FILE.h5...]] [--mirror] [--scales LIST] [--refine[=S,R[,K]]]
//               [--void 11] [--device cpu]
//               [--threads N]
//               [--limit N] [--json FILE|-]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "engine/label_metrics.h"
#include "job/labeler.h"
#include "job/pipeline.h"
#include "tools/cli.h"
#include "weights/model_file.h"
#include "weights/model_locator.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

// Images with their ground truth: both decoded on the pipeline's pool.
class LabelledSource : public FrameSource {
 public:
  LabelledSource(std::vector<std::pair<std::string, std::string>> pairs, int classes, int void_index)
      : pairs_(std::move(pairs)), classes_(classes), void_(void_index) {}
  bool next(Frame& f) override {
    if (next_ >= pairs_.size()) return false;
    f.name = pairs_[next_++].first;
    return true;
  }
  void decode(Frame& f) override {
    const std::string& lab_path = pairs_[f.index].second;
    f.image = load_image(f.name, 3);
    auto lab = std::make_shared<Image8>(load_label_image(lab_path));
    SL_REQUIRE(f.image.width == lab->width && f.image.height == lab->height, f.name, ": image is ",
               f.image.width, "x", f.image.height, " but its label ", lab_path, " is ", lab->width,
               "x", lab->height);
    // Void pixels become 255, which ConfusionMatrix skips.
    for (auto& v : lab->pixels) {
      SL_REQUIRE(v < classes_ || v == void_, lab_path, ": label value ", int(v),
                 " is neither a class (0..", classes_ - 1, ") nor void (", void_, ")");
      if (v == void_) v = 255;
    }
    f.user = lab;
  }
  size_t size_hint() const override { return pairs_.size(); }

 private:
  std::vector<std::pair<std::string, std::string>> pairs_;
  int classes_, void_;
  size_t next_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Model model;
  std::vector<std::pair<std::string, std::string>> pairs;  // image, label
  std::string model_path, json_path;
  int void_index = 11;
  bool mirror = false;
  std::vector<double> scales;
  Refinement refine;
  PipelineOptions po;
  try {
    Cli cli(argc, argv, {"data", "model", "void", "device", "threads", "limit", "json", "conv",
                         "precision", "conv-workspace", "batch", "streams", "io-threads", "plan-cache", "queue-depth",
                         "scales", "refine"},
            {"help", "mirror", "refine"});
    if (cli.has("help") || !cli.has("data")) {
      std::fputs("usage: eval_labels --data DIR [--model FILE.h5[,FILE.h5...]] [--mirror] [--scales LIST] [--refine[=S,R[,K]]]\n"
                 "                   [--void 11]\n"
                 "                   [--device cpu|cuda|cuda:N|auto] [--precision fp32|tf32|fp16|bf16] [--conv A] [--threads N] [--io-threads N]\n"
                 "                   [--batch N] [--streams N] [--plan-cache DIR|off] [--limit N] [--json FILE|-]\n",
                 cli.has("help") ? stdout : stderr);
      return cli.has("help") ? 0 : 2;
    }
    void_index = cli.get_int("void", 11);
    json_path = cli.get("json");
    model_path = cli.has("model") ? cli.get("model") : find_default_model();
    mirror = cli.has("mirror");
    scales = scales_option(cli);
    refine = refine_option(cli);
    model = labelling_model(model_path, mirror, scales, refine);
    po = pipeline_options(cli);
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
  std::string device;
  PipelineStats st;
  try {
    Pipeline pipe(model, po);
    device = pipe.describe();
    LabelledSource source(pairs, classes, void_index);
    // Each image's confusion is counted on the pool; the report adds them in input order.
    auto finish = [&](Frame& f) {
      if (!f.error.empty()) return;
      auto truth = std::static_pointer_cast<Image8>(f.user);
      auto one = std::make_shared<ConfusionMatrix>(classes);
      one->add(truth->pixels, f.labels.labels);
      f.user = one;
      f.image = Image8();
    };
    auto report = [&](Frame& f) {
      if (!f.error.empty()) {
        std::fprintf(stderr, "eval_labels: FAILED %s\n", f.error.c_str());
        ++failed;
        return;
      }
      cm += *std::static_pointer_cast<ConfusionMatrix>(f.user);
      ms += f.times.forward_ms;
    };
    st = pipe.run(source, finish, report);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "eval_labels: %s\n", e.what());
    return 2;
  }
  const size_t ok = pairs.size() - failed;
  auto iou = cm.class_iou();
  const std::string scale_list = scales_text(scales);
  const std::string refined = refine.on() ? ", refined " + refinement_text(refine) : "";
  std::fprintf(human, "model %s%s%s%s%s on %zu image(s) (%zu failed), %s, mean forward %.1f ms, %.1f images/s\n",
               model_path.c_str(), mirror ? " mirrored" : "", scale_list == "1" ? "" : " at scales ",
               scale_list == "1" ? "" : scale_list.c_str(), refined.c_str(), ok, failed, device.c_str(), ok ? ms / double(ok) : 0.0,
               st.wall_s > 0 ? double(st.frames) / st.wall_s : 0.0);
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
    Json scale_values = Json::array();
    for (double v : scales) scale_values.push_back(json_exact(v));
    Json per_class = Json::array();
    for (int c = 0; c < classes; ++c)  // IoU to 6 decimals; null for a class never seen or predicted
      per_class.push_back({{"name", model.class_names[size_t(c)]},
                           {"iou", std::isnan(iou[size_t(c)]) ? Json(nullptr) : Json(std::stod(std::to_string(iou[size_t(c)])))}});
    Json confusion = Json::array();
    for (int c = 0; c < classes; ++c) {
      Json row = Json::array();
      for (int p = 0; p < classes; ++p) row.push_back(cm.at(c, p));
      confusion.push_back(row);
    }
    const Json report{{"model", model_path},
                      {"mirror", mirror},
                      {"scales", scale_values},
                      {"refine", refine.on() ? Json{{"sigma_s", json_exact(refine.sigma_s)},
                                                    {"sigma_r", json_exact(refine.sigma_r)},
                                                    {"iterations", refine.iterations}}
                                             : Json(nullptr)},
                      {"images", ok},
                      {"failed", failed},
                      {"global_accuracy", json_number(cm.global_accuracy())},
                      {"class_accuracy", json_number(cm.class_accuracy())},
                      {"mean_iou", json_number(cm.mean_iou())},
                      {"classes", per_class},
                      {"confusion", confusion}};
    const std::string text = report.dump(2) + "\n";
    if (json_path == "-") {
      std::cout << text;
    } else {
      std::ofstream(json_path) << text;
    }
  }
  return failed ? 1 : 0;
}
