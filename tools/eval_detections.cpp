// eval_detections: scores a detector on a labelled folder (CamVid layout: images/NAME.jpg|png,
// labels/NAME.png). Ground truth: the 8-connected components of each evaluated class in the label
// image with at least --min-area pixels (touching objects of one class, such as parked cars, are
// one object there). Methods: `head`, the model's sliding-window head over its class
// probabilities (engine/detection_eval.h, nms/sliding_window.h); `components`, the peer: the
// connected components of the model's own label map, scored by area. Prints AP50, AP at IoU
// 0.5:0.95 (COCO, 101 points), AP75, the 11-point AP50 of PASCAL VOC 2007, recall, boxes per
// image and per object, per class; --sweep evaluates a grid of head settings on the same
// forward passes (to choose defaults on held-out sequences: --prefix); an axis whose values are
// lists (heights, aspects) separates them by '|': --sweep 'aspects=0.4,1,2|0.7,1.4;nms=0.1,0.2'.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

#include "engine/detection_eval.h"
#include "job/labeler.h"
#include "job/pipeline.h"
#include "job/score_map_head.h"
#include "nms/sliding_window.h"
#include "tools/cli.h"
#include "weights/model_file.h"
#include "weights/model_locator.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: eval_detections --data DIR [--model FILE.h5] [--classes Car,Pedestrian]\n"
    "         [--method head|components] [--min-area 300] [--void 11] [--prefix P1,P2]\n"
    "         [--spec 'CLASS: key=value ...; CLASS: ...'] [--sweep 'key=v1,v2;key=L1|L2']\n"
    "         [--device D] [--precision P] [--threads N] [--io-threads N] [--limit N] [--json F|-]\n";

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, sep)) {
    const size_t a = t.find_first_not_of(' '), b = t.find_last_not_of(' ');
    if (a != std::string::npos) out.push_back(t.substr(a, b - a + 1));
  }
  return out;
}

class LabelledSource : public FrameSource {
 public:
  LabelledSource(std::vector<std::pair<std::string, std::string>> pairs, int void_index)
      : pairs_(std::move(pairs)), void_(void_index) {}
  bool next(Frame& f) override {
    if (next_ >= pairs_.size()) return false;
    f.name = pairs_[next_++].first;
    return true;
  }
  void decode(Frame& f) override {
    f.image = load_image(f.name, 3);
    auto lab = std::make_shared<Image8>(load_label_image(pairs_[f.index].second));
    SL_REQUIRE(lab->width == f.image.width && lab->height == f.image.height, f.name,
               ": image and label differ in size");
    for (auto& v : lab->pixels)
      if (v == void_) v = 255;
    f.user = lab;
  }
  size_t size_hint() const override { return pairs_.size(); }

 private:
  std::vector<std::pair<std::string, std::string>> pairs_;
  int void_;
  size_t next_ = 0;
};

// One frame's truth and detections per class and setting.
struct FrameResult {
  std::vector<std::vector<nms::Box>> truth;                        // [class]
  std::vector<std::vector<std::vector<nms::Detection>>> dets;      // [class][setting]
  double head_ms = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Model model;
  std::string model_path, json_path, method;
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<int> classes;
  int min_area = 300;
  PipelineOptions po;
  std::vector<std::vector<nms::WindowHeadOptions>> settings;  // [class][setting]
  std::vector<std::string> setting_names;
  std::vector<std::string> base_names;  // [class]: where its settings came from
  try {
    Cli cli(argc, argv,
            {"data", "model", "classes", "method", "min-area", "void", "prefix", "spec", "sweep",
             "device", "precision", "conv", "conv-workspace", "threads", "io-threads", "limit",
             "json", "batch", "streams", "queue-depth", "plan-cache"},
            {"help"});
    if (cli.has("help") || !cli.has("data")) {
      std::fputs(kUsage, cli.has("help") ? stdout : stderr);
      return cli.has("help") ? 0 : 2;
    }
    json_path = cli.get("json");
    method = cli.get("method", "head");
    SL_REQUIRE(method == "head" || method == "components", "--method: head or components");
    min_area = cli.get_int("min-area", 300);
    const int void_index = cli.get_int("void", 11);
    model_path = cli.has("model") ? cli.get("model") : find_default_model();
    model = read_model(model_path);
    for (const auto& name : split(cli.get("classes", "Car,Pedestrian"), ',')) {
      int found = -1;
      for (size_t c = 0; c < model.class_names.size(); ++c)
        if (model.class_names[c] == name || std::to_string(c) == name) found = int(c);
      SL_REQUIRE(found >= 0, "--classes: the model has no class '", name, "'");
      classes.push_back(found);
    }
    // Head settings per class: the model's (meta/detect), then --spec, then the --sweep grid.
    std::vector<nms::WindowHeadOptions> base;
    for (int c : classes) {
      base.push_back(head_settings(model, c));
      base_names.push_back(model.detect.count(model.class_names[size_t(c)]) ? "model's" : "default");
    }
    for (const auto& item : split(cli.get("spec"), ';')) {
      const size_t colon = item.find(':');
      SL_REQUIRE(colon != std::string::npos, "--spec: 'CLASS: key=value ...', got '", item, "'");
      const std::string name = item.substr(0, colon);
      bool used = false;
      for (size_t k = 0; k < classes.size(); ++k)
        if (model.class_names[size_t(classes[k])] == name) {
          nms::parse_window_spec(item.substr(colon + 1), base[k]);
          base_names[k] = base_names[k] == "model's" ? "model's + --spec" : "--spec";
          used = true;
        }
      SL_REQUIRE(used, "--spec: class '", name, "' is not evaluated (--classes)");
    }
    std::vector<std::string> grid{""};
    for (const auto& axis : split(cli.get("sweep"), ';')) {
      const size_t eq = axis.find('=');
      SL_REQUIRE(eq != std::string::npos, "--sweep: 'key=v1,v2;...', got '", axis, "'");
      std::vector<std::string> next;
      // Values apart by ',', or by '|' where a value is itself a list (heights, aspects).
      const std::string values = axis.substr(eq + 1);
      const char sep = values.find('|') != std::string::npos ? '|' : ',';
      for (const auto& g : grid)
        for (const auto& v : split(values, sep))
          next.push_back(g + (g.empty() ? "" : " ") + axis.substr(0, eq) + "=" + v);
      grid = next;
    }
    setting_names = grid;
    settings.resize(classes.size());
    for (size_t k = 0; k < classes.size(); ++k)
      for (const auto& g : grid) {
        nms::WindowHeadOptions o = base[k];
        nms::parse_window_spec(g, o);
        settings[k].push_back(o);
      }
    po = pipeline_options(cli);
    if (method == "head") po.float_outputs = {"scores"};
    const fs::path data = cli.get("data");
    SL_REQUIRE(fs::is_directory(data / "images") && fs::is_directory(data / "labels"), data.string(),
               ": expected folders images/ and labels/");
    const auto prefixes = split(cli.get("prefix"), ',');
    std::vector<fs::path> imgs;
    for (const auto& e : fs::directory_iterator(data / "images")) {
      if (!e.is_regular_file()) continue;
      const std::string n = e.path().filename().string();
      bool keep = prefixes.empty();
      for (const auto& p : prefixes) keep = keep || n.rfind(p, 0) == 0;
      if (keep) imgs.push_back(e.path());
    }
    std::sort(imgs.begin(), imgs.end());
    const int limit = cli.get_int("limit", 0);
    for (const auto& p : imgs) {
      if (limit > 0 && int(pairs.size()) >= limit) break;
      pairs.emplace_back(p.string(), (data / "labels" / (p.stem().string() + ".png")).string());
    }
    SL_REQUIRE(!pairs.empty(), data.string(), ": no images (check --prefix)");
    std::unique_ptr<Pipeline> pipe = std::make_unique<Pipeline>(model, po);
    LabelledSource source(pairs, void_index);
    std::vector<std::vector<DetectionEvaluator>> eval(classes.size(),
                                                       std::vector<DetectionEvaluator>(grid.size()));
    size_t failed = 0;
    double head_ms = 0;
    auto finish = [&](Frame& f) {
      if (!f.error.empty()) return;
      const auto truth_img = std::static_pointer_cast<Image8>(f.user);
      auto r = std::make_shared<FrameResult>();
      const int W = f.labels.width, H = f.labels.height;
      std::vector<std::vector<float>> probs;
      int mh = 0, mw = 0;
      Geometry geo;
      if (method == "head") {
        const Tensor& s = f.floats.at("scores");
        probs = class_probabilities(s.view(), classes);
        mh = s.shape().h, mw = s.shape().w;
        geo = f.geometry.at("scores");
      }
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t k = 0; k < classes.size(); ++k) {
        std::vector<nms::Box> truth;
        for (const auto& c : label_components(truth_img->pixels.data(), W, H, classes[k], min_area))
          truth.push_back(c.box);
        r->truth.push_back(truth);
        r->dets.emplace_back();
        for (const auto& o : settings[k]) {
          std::vector<nms::Detection> d;
          if (method == "head") {
            d = nms::detect_windows_cpu(probs[k].data(), mh, mw, classes[k], o,
                                        nms::MapGeometry{geo.stride_y, geo.stride_x, geo.offset_y, geo.offset_x}, W, H);
          } else {
            for (const auto& c : label_components(f.labels.labels.data(), W, H, classes[k], min_area))
              d.push_back({c.box, float(c.area), classes[k]});
          }
          r->dets.back().push_back(std::move(d));
        }
      }
      r->head_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                   double(grid.size());
      f.image = Image8();
      f.floats.clear();
      f.user = r;
    };
    auto report = [&](Frame& f) {
      if (!f.error.empty()) {
        std::fprintf(stderr, "eval_detections: FAILED %s\n", f.error.c_str());
        ++failed;
        return;
      }
      const auto r = std::static_pointer_cast<FrameResult>(f.user);
      for (size_t k = 0; k < classes.size(); ++k)
        for (size_t g = 0; g < grid.size(); ++g) eval[k][g].add(r->truth[k], r->dets[k][g]);
      head_ms += r->head_ms;
    };
    const PipelineStats st = pipe->run(source, finish, report);
    const size_t images = st.frames - failed;
    FILE* human = json_path == "-" ? stderr : stdout;
    std::fprintf(human, "%s on %zu image(s) of %s (%zu failed), method %s, %s; ground truth: "
                 "8-connected components >= %d px\n",
                 model_path.c_str(), images, cli.get("data").c_str(), failed, method.c_str(),
                 pipe->describe().c_str(), min_area);
    if (method == "head")
      std::fprintf(human, "head + NMS: %.2f ms per image and setting on one CPU thread (all classes)\n",
                   images ? head_ms / double(images) : 0.0);
    std::fprintf(human, "| class | setting | AP50 | AP50 (11 pt) | AP .5:.95 | AP75 | recall50 | boxes/image | boxes/object | objects |\n"
                        "|---|---|---|---|---|---|---|---|---|---|\n");
    Json results = Json::array();
    for (size_t k = 0; k < classes.size(); ++k) {
      std::vector<size_t> order(grid.size());
      for (size_t g = 0; g < grid.size(); ++g) order[g] = g;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return eval[k][a].result().ap50 > eval[k][b].result().ap50;
      });
      // The table: the 12 best settings by AP50; the JSON: every setting (for choosing by other
      // rules, e.g. a bound on boxes per object over several sequences).
      for (size_t i = 0; i < order.size(); ++i) {
        const size_t g = order[i];
        const auto r = eval[k][g].result();
        const std::string& name = model.class_names[size_t(classes[k])];
        const std::string set = method == "components" ? "area" : grid[g].empty() ? base_names[k] : grid[g];
        if (i < 12) std::fprintf(human, "| %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %zu |\n", name.c_str(),
                     set.c_str(), r.ap50, r.ap50_11pt, r.ap, r.ap75, r.recall50,
                     images ? double(r.detections) / double(images) : 0.0,
                     r.truth ? double(r.detections) / double(r.truth) : 0.0, r.truth);
        results.push_back({{"class", name},
                           {"setting", set},
                           {"ap50", json_number(r.ap50)},
                           {"ap50_11pt", json_number(r.ap50_11pt)},
                           {"ap", json_number(r.ap)},
                           {"ap75", json_number(r.ap75)},
                           {"recall50", json_number(r.recall50)},
                           {"detections", r.detections},
                           {"objects", r.truth}});
        if (method == "components") break;
      }
    }
    const Json summary{
        {"model", model_path}, {"method", method}, {"images", images}, {"min_area", min_area}, {"results", results}};
    const std::string text = summary.dump(2) + "\n";
    if (json_path == "-")
      std::cout << text;
    else if (!json_path.empty())
      std::ofstream(json_path) << text;
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "eval_detections: %s\n", e.what());
    return 2;
  }
}
