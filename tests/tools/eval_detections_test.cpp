// eval_detections end to end: --sweep over list-valued keys (values apart by '|') on a generated
// labelled folder with the shipped model, and a list holding a bad value refused by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/image_io.h"

using namespace scenelab;
namespace fs = std::filesystem;

TEST(EvalDetections, SweepOverListValuedKeys) {
  // Values apart by '|' when they are lists: 2 aspect sets x 2 thresholds = 4 settings, each
  // reported under its name; a list with a bad value is refused by name.
  fs::path dir = fs::path(::testing::TempDir()) / "scenelab_eval_det";
  fs::remove_all(dir);
  fs::create_directories(dir / "data/images");
  fs::create_directories(dir / "data/labels");
  Image8 im{96, 72, 3, std::vector<uint8_t>(96 * 72 * 3, 90)};
  Image8 lab{96, 72, 1, std::vector<uint8_t>(96 * 72, 3)};  // road, a car box on it
  for (int y = 30; y < 50; ++y)
    for (int x = 20; x < 60; ++x) lab.pixels[size_t(y) * 96 + x] = 8;
  save_png((dir / "data/images/a.png").string(), im);
  save_png((dir / "data/labels/a.png").string(), lab);
  const std::string base = std::string(EVAL_DETECTIONS_BIN) + " --data " + (dir / "data").string() +
                           " --model " + SCENELAB_SOURCE_DIR + "/weights/camvid-multiscale.h5 --classes Car" +
                           " --min-area 10 --threads 1";
  int rc = std::system((base + " --sweep 'aspects=0.4,1|0.7,1.4,2;threshold=0.3,0.4' --json " +
                        (dir / "r.json").string() + " > " + (dir / "out.txt").string() + " 2>&1").c_str());
  std::stringstream js, out;
  js << std::ifstream(dir / "r.json").rdbuf();
  out << std::ifstream(dir / "out.txt").rdbuf();
  ASSERT_EQ(WEXITSTATUS(rc), 0) << out.str();
  std::set<std::string> settings;
  const nlohmann::json report = nlohmann::json::parse(js.str());
  for (const auto& r : report["results"]) settings.insert(r["setting"].get<std::string>());
  for (const char* name : {"aspects=0.4,1 threshold=0.3", "aspects=0.4,1 threshold=0.4",
                           "aspects=0.7,1.4,2 threshold=0.3", "aspects=0.7,1.4,2 threshold=0.4"})
    EXPECT_EQ(settings.count(name), 1u) << name << js.str();
  rc = std::system((base + " --sweep 'aspects=0.4,1|0.7,0' > " + (dir / "bad.txt").string() + " 2>&1").c_str());
  std::stringstream bad;
  bad << std::ifstream(dir / "bad.txt").rdbuf();
  EXPECT_NE(WEXITSTATUS(rc), 0);
  EXPECT_NE(bad.str().find("aspects=0 is outside [0.000976562, 1024]"), std::string::npos) << bad.str();
}
