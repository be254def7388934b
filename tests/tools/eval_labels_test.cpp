// ConfusionMatrix metrics on a hand-made example, eval_labels end to end on a generated labelled
// folder with one image whose label has another size (fails by name, the rest count), and
// eval_labels --mirror and --model A,B (an ensemble) against the files make_model --combine
// writes (the same figures).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/image_io.h"
#include "engine/label_metrics.h"
#include "weights/default_model.h"
#include "weights/model_file.h"

using namespace scenelab;
namespace fs = std::filesystem;

TEST(ConfusionMatrix, MetricsByHand) {
  ConfusionMatrix cm(3);
  // truth: 0 0 0 0 1 1 2 void ; pred: 0 0 0 1 1 0 2 1
  cm.add({0, 0, 0, 0, 1, 1, 2, 255}, {0, 0, 0, 1, 1, 0, 2, 1});
  EXPECT_EQ(cm.total(), 7u);
  EXPECT_DOUBLE_EQ(cm.global_accuracy(), 5.0 / 7);
  EXPECT_DOUBLE_EQ(cm.class_accuracy(), (3.0 / 4 + 1.0 / 2 + 1.0) / 3);
  auto iou = cm.class_iou();
  EXPECT_DOUBLE_EQ(iou[0], 3.0 / 5);  // tp 3, truth 4, pred 4
  EXPECT_DOUBLE_EQ(iou[1], 1.0 / 3);  // tp 1, truth 2, pred 2
  EXPECT_DOUBLE_EQ(iou[2], 1.0);
  EXPECT_DOUBLE_EQ(cm.mean_iou(), (3.0 / 5 + 1.0 / 3 + 1.0) / 3);
  EXPECT_THROW(cm.add({0}, {3}), Error);
}

TEST(EvalLabels, SizeMismatchFailsByNameOthersCount) {
  fs::path dir = fs::path(::testing::TempDir()) / "scenelab_eval";
  fs::remove_all(dir);
  fs::create_directories(dir / "data/images");
  fs::create_directories(dir / "data/labels");
  auto rgb = [](int w, int h) {
    Image8 im{w, h, 3, std::vector<uint8_t>(size_t(w) * h * 3)};
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = uint8_t(i * 7 % 251);
    return im;
  };
  auto lab = [](int w, int h) {
    Image8 im{w, h, 1, std::vector<uint8_t>(size_t(w) * h)};
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = uint8_t(i % 9 == 0 ? 11 : i % 8);
    return im;
  };
  save_png((dir / "data/images/a.png").string(), rgb(64, 48));
  save_png((dir / "data/labels/a.png").string(), lab(64, 48));
  save_png((dir / "data/images/b.png").string(), rgb(70, 50));
  save_png((dir / "data/labels/b.png").string(), lab(64, 48));  // wrong size
  std::string model = (dir / "m\"q.h5").string();  // a quote the JSON report must escape
  write_model(model, make_random_model("multiscale", 8, 3));
  std::string cmd = std::string(EVAL_LABELS_BIN) + " --data " + (dir / "data").string() +
                    " --model '" + model + "' --threads 2 --json " + (dir / "r.json").string() +
                    " > " + (dir / "out.txt").string() + " 2> " + (dir / "err.txt").string();
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 1);
  std::stringstream err, js;
  err << std::ifstream(dir / "err.txt").rdbuf();
  js << std::ifstream(dir / "r.json").rdbuf();
  EXPECT_NE(err.str().find("b.png: image is 70x50 but its label"), std::string::npos) << err.str();
  const nlohmann::json report = nlohmann::json::parse(js.str());
  EXPECT_EQ(report["images"], 1) << js.str();
  EXPECT_EQ(report["failed"], 1) << js.str();
  EXPECT_EQ(report["model"], model) << js.str();
  EXPECT_NE(js.str().find("m\\\"q.h5"), std::string::npos) << js.str();
}

namespace {
std::string read_text(const fs::path& p) {
  std::stringstream s;
  s << std::ifstream(p).rdbuf();
  return s.str();
}
// The report's line holding `key`.
// A report's value of `key` as compact JSON text ("" if it has none).
std::string json_line(const std::string& js, const std::string& key) {
  const nlohmann::json j = nlohmann::json::parse(js, nullptr, false);
  return j.is_object() && j.contains(key) ? j[key].dump() : "";
}
}  // namespace

TEST(EvalLabels, MirrorScalesRefineAndEnsembleEqualTheCombinedFiles) {
  fs::path dir = fs::path(::testing::TempDir()) / "scenelab_eval_mirror";
  fs::remove_all(dir);
  fs::create_directories(dir / "data/images");
  fs::create_directories(dir / "data/labels");
  for (int k = 0; k < 2; ++k) {
    Image8 im{67, 45, 3, std::vector<uint8_t>(67 * 45 * 3)}, lab{67, 45, 1, std::vector<uint8_t>(67 * 45)};
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = uint8_t((i * (7 + k)) % 251);
    for (size_t i = 0; i < lab.pixels.size(); ++i) lab.pixels[i] = uint8_t((i / 67) % 8);
    save_png((dir / "data/images" / ("f" + std::to_string(k) + ".png")).string(), im);
    save_png((dir / "data/labels" / ("f" + std::to_string(k) + ".png")).string(), lab);
  }
  const std::string model = (dir / "m.h5").string(), combined = (dir / "mirrored.h5").string();
  write_model(model, make_random_model("multiscale", 8, 3));
  auto run = [&](const std::string& args, const std::string& name) {
    const std::string cmd = std::string(EVAL_LABELS_BIN) + " --data " + (dir / "data").string() + " --threads 2 " +
                            args + " --json " + (dir / name).string() + " > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return read_text(dir / name);
  };
  const std::string make = std::string(MAKE_MODEL_BIN) + " --combine " + model + " --mirror --out " + combined;
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  const std::string plain = run("--model " + model, "p.json"), mirrored = run("--model " + model + " --mirror", "m.json"),
                    file = run("--model " + combined, "c.json");
  for (const char* key : {"global_accuracy", "class_accuracy", "mean_iou"}) {
    EXPECT_FALSE(json_line(mirrored, key).empty()) << key;
    EXPECT_EQ(json_line(mirrored, key), json_line(file, key)) << key;
  }
  // mirroring changes the confusion (else the comparison says nothing)
  EXPECT_NE(json_line(plain, "confusion"), json_line(mirrored, "confusion"));
  // --model A,B (an ensemble on the fly), mirrored, against make_model --combine A,B --mirror
  const std::string second = (dir / "m2.h5").string(), ens = (dir / "ens.h5").string();
  write_model(second, make_random_model("multiscale", 8, 4));
  const std::string make2 = std::string(MAKE_MODEL_BIN) + " --combine " + model + "," + second + " --mirror --out " + ens;
  ASSERT_EQ(std::system(make2.c_str()), 0) << make2;
  const std::string listed = run("--model " + model + "," + second + " --mirror", "l.json"), ens_file = run("--model " + ens, "e.json");
  EXPECT_EQ(json_line(listed, "confusion"), json_line(ens_file, "confusion"));
  EXPECT_NE(json_line(listed, "confusion"), json_line(mirrored, "confusion"));
  // A mode on the fly against the file make_model --combine writes with the same flags: the same
  // confusion; the on-the-fly run's JSON is returned.
  auto file_of = [&](const std::string& tag) { return (dir / (tag + ".h5")).string(); };
  auto same_as_file = [&](const std::string& flags, const std::string& tag) {
    const std::string file = file_of(tag);
    const std::string make = std::string(MAKE_MODEL_BIN) + " --combine " + model + " " + flags + " --out " + file;
    EXPECT_EQ(std::system(make.c_str()), 0) << make;
    const std::string fly = run("--model " + model + " " + flags, tag + ".json"), from_file = run("--model " + file, tag + "-f.json");
    EXPECT_EQ(json_line(fly, "confusion"), json_line(from_file, "confusion")) << flags;
    return fly;
  };
  // --scales; the JSON names the scales
  const std::string scaled = same_as_file("--mirror --scales 0.5,1.25", "scaled");
  EXPECT_NE(json_line(scaled, "confusion"), json_line(mirrored, "confusion"));
  EXPECT_NE(json_line(scaled, "scales").find("[0.5,1.25]"), std::string::npos) << json_line(scaled, "scales");
  EXPECT_NE(json_line(plain, "scales").find("[1]"), std::string::npos) << json_line(plain, "scales");
  // --refine; the JSON names the settings
  const std::string refined = same_as_file("--mirror --refine=20,0.1,2", "refined"), refined_file = file_of("refined");
  EXPECT_NE(json_line(refined, "confusion"), json_line(mirrored, "confusion"));
  EXPECT_NE(json_line(refined, "refine").find("{\"iterations\":2,\"sigma_r\":0.1,\"sigma_s\":20}"), std::string::npos)
      << json_line(refined, "refine");
  EXPECT_NE(json_line(plain, "refine").find("null"), std::string::npos) << json_line(plain, "refine");
  // make_model's errors: the file, and what is missing
  auto fails = [&](const std::string& args, const std::string& want) {
    const std::string cmd = std::string(MAKE_MODEL_BIN) + " " + args + " 2> " + (dir / "err.txt").string();
    EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2) << cmd;
    EXPECT_NE(read_text(dir / "err.txt").find(want), std::string::npos) << read_text(dir / "err.txt");
  };
  fails("--mirror --out x.h5", "--mirror needs --combine");
  fails("--scales 0.5 --out x.h5", "--scales needs --combine");
  fails("--combine " + model + " --scales 0.5,x --out x.h5", "--scales expects numbers separated by commas");
  fails("--combine " + model + " --scales 0.5,0.5 --out x.h5", "scale 0.5 is given twice");
  fails("--combine " + model + " --scales 0.01 --out x.h5", "scale 0.01 is not in [0.125, 4]");
  fails("--combine " + model + ",," + model + " --out x.h5", "--combine " + model + ",," + model + ": an empty model file name");
  fails("--combine " + (dir / "none.h5").string() + " --out x.h5", "none.h5");
  fails("--combine " + model + " --network reference --out x.h5", "--network, --classes and --seed do not apply");
  fails("--refine --out x.h5", "--refine needs --combine");
  fails("--combine " + model + " --refine=40 --out x.h5", "--refine takes SIGMA_S,SIGMA_R[,ITERATIONS]");
  fails("--combine " + model + " --refine=40,0 --out x.h5", "sigma_r must be in (0, 1000]");
  fails("--combine " + model + " --refine=40,0.2,2.5 --out x.h5", "iterations must be a whole number");
  fails("--combine " + model + " --refine=40,0.2,9 --out x.h5", "iterations must be 1-8");
  fails("--combine " + model + " --refine=5000,0.2 --out x.h5", "sigma_s must be in (0, 4096]");
  fails("--combine " + refined_file + " --refine --out x.h5", "refined already");
}
