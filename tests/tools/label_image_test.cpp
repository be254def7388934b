// label_image end to end on generated images: good PNG and JPEG files, a corrupt file and a
// missing one among them. The bad ones are reported by name and skipped, the rest labelled,
// the exit status is 1, and the outputs exist at the input resolution.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/image_io.h"
#include "weights/default_model.h"
#include "weights/model_file.h"
#include "tests/test_util.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

using test::slurp;
int run(const std::string& cmd) { return test::run_command(cmd); }

Image8 gradient(int w, int h) {
  Image8 img{w, h, 3, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img.pixels[(size_t(y) * w + x) * 3 + size_t(c)] = uint8_t((x * (c + 1) + y * 3) % 256);
  return img;
}

}  // namespace

TEST(LabelImage, CorruptAndMissingFilesFailAloneAndTheRestAreLabelled) {
  fs::path dir = fs::path(::testing::TempDir()) / "scenelab_label_image";
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  save_png((dir / "in/a.png").string(), gradient(97, 61));
  save_png((dir / "in/b.png").string(), gradient(64, 48));
  std::ofstream(dir / "in/corrupt.png") << "\x89PNG\r\n\x1a\n garbage that is no image";
  std::string model = (dir / "ref.h5").string();
  write_model(model, make_random_model("reference", 8, 2));
  std::string out = (dir / "out").string(), json = (dir / "report.json").string();
  std::string cmd = std::string(LABEL_IMAGE_BIN) + " --model " + model + " --out " + out +
                    " --threads 2 --json " + json + " " + (dir / "in").string() + " " +
                    (dir / "missing.jpg").string() + " > " + (dir / "stdout.txt").string() +
                    " 2> " + (dir / "stderr.txt").string();
  EXPECT_EQ(run(cmd), 1) << "exit status must say that not all succeeded";
  std::string err = slurp((dir / "stderr.txt").string());
  EXPECT_NE(err.find("corrupt.png"), std::string::npos) << err;
  EXPECT_NE(err.find("missing.jpg"), std::string::npos) << err;
  std::string so = slurp((dir / "stdout.txt").string());
  EXPECT_NE(so.find("labelled 2 of 4"), std::string::npos) << so;
  for (const char* stem : {"a", "b"})
    for (const char* kind : {"_labels.png", "_overlay.png", "_classes.png"}) {
      std::string p = out + "/" + stem + kind;
      ASSERT_TRUE(fs::exists(p)) << p;
      Image8 img = load_image(p, 0 == std::string(kind).compare("_classes.png") ? 1 : 3);
      EXPECT_EQ(img.width, stem[0] == 'a' ? 97 : 64);
      EXPECT_EQ(img.height, stem[0] == 'a' ? 61 : 48);
    }
  Image8 idx = load_image(out + "/a_classes.png", 1);
  for (uint8_t v : idx.pixels) ASSERT_LT(v, 8);
  std::string js = slurp(json);
  EXPECT_NE(js.find("\"failed\": 2"), std::string::npos) << js;
  EXPECT_NE(js.find("\"ok\": 2"), std::string::npos) << js;
  EXPECT_NE(js.find("corrupt.png"), std::string::npos);
}

TEST(LabelImage, PrintsPaperOpsFor320x240ReferenceNet) {
  fs::path dir = fs::path(::testing::TempDir()) / "scenelab_label_gop";
  fs::create_directories(dir);
  save_png((dir / "img.png").string(), gradient(320, 240));
  std::string model = (dir / "ref.h5").string();
  write_model(model, make_random_model("reference", 8, 2));
  std::string cmd = std::string(LABEL_IMAGE_BIN) + " --model " + model + " --out " +
                    (dir / "out").string() + " " + (dir / "img.png").string() + " > " +
                    (dir / "stdout.txt").string();
  ASSERT_EQ(run(cmd), 0);
  std::string so = slurp((dir / "stdout.txt").string());
  EXPECT_NE(so.find("320x240"), std::string::npos) << so;
  EXPECT_NE(so.find(" 7.57 GOp "), std::string::npos) << so;
}

TEST(LabelImage, DefaultModelIsFound) {
  fs::path dir = fs::path(::testing::TempDir()) / "scenelab_label_default";
  fs::create_directories(dir);
  save_png((dir / "img.png").string(), gradient(80, 60));
  std::string cmd = std::string(LABEL_IMAGE_BIN) + " --quiet --out " + (dir / "out").string() +
                    " " + (dir / "img.png").string();
  EXPECT_EQ(run(cmd), 0);
  EXPECT_TRUE(fs::exists(dir / "out/img_overlay.png"));
}

TEST(LabelImage, BadModelIsOneClearLine) {
  fs::path dir = fs::path(::testing::TempDir()) / "scenelab_label_badmodel";
  fs::create_directories(dir);
  std::ofstream(dir / "bad.h5") << "nope";
  save_png((dir / "img.png").string(), gradient(80, 60));
  std::string cmd = std::string(LABEL_IMAGE_BIN) + " --model " + (dir / "bad.h5").string() +
                    " " + (dir / "img.png").string() + " 2> " + (dir / "err.txt").string();
  EXPECT_EQ(run(cmd), 2);
  std::string err = slurp((dir / "err.txt").string());
  EXPECT_NE(err.find("bad.h5: not an HDF5 file"), std::string::npos) << err;
}

TEST(LabelImage, PngCompressionLevelsWriteTheSamePixels) {
  // --png-compression 9 (libdeflate at level 9) against the default coder: the same pixels in
  // all three outputs, a smaller overlay (a photo); a bad value is one clear line.
  fs::path dir = fs::path(::testing::TempDir()) / "scenelab_label_pnglevel";
  fs::create_directories(dir);
  const std::string photo = test::camvid_dir() + "/val/images/0016E5_07959.jpg";
  const std::string input = fs::exists(photo) ? photo : (dir / "img.png").string();
  if (!fs::exists(photo)) save_png(input, gradient(96, 64));
  for (const char* mode : {"fast", "9"}) {
    std::string cmd = std::string(LABEL_IMAGE_BIN) + " --quiet --device cpu --png-compression " + mode +
                      " --out " + (dir / mode).string() + " " + input;
    ASSERT_EQ(run(cmd), 0) << cmd;
  }
  const std::string stem = fs::path(input).stem().string();
  for (const char* kind : {"_overlay.png", "_labels.png", "_classes.png"}) {
    const Image8 a = load_image((dir / "fast" / (stem + kind)).string(), 3);
    const Image8 b = load_image((dir / "9" / (stem + kind)).string(), 3);
    EXPECT_EQ(a.pixels, b.pixels) << kind;
  }
  if (fs::exists(photo)) {
    EXPECT_LT(fs::file_size(dir / "9" / (stem + "_overlay.png")), fs::file_size(dir / "fast" / (stem + "_overlay.png")));
  }
  std::string cmd = std::string(LABEL_IMAGE_BIN) + " --quiet --png-compression 13 --out " + (dir / "bad").string() +
                    " " + input + " 2> " + (dir / "err.txt").string();
  EXPECT_EQ(run(cmd), 2);
  const std::string err = slurp((dir / "err.txt").string());
  EXPECT_NE(err.find("--png-compression: fast or a level 0..12, not '13'"), std::string::npos) << err;
}

// -h is --help (it had been read as a file name), and the help names every precision.
TEST(LabelImage, DashHPrintsTheHelp) {
  fs::path dir = fs::path(::testing::TempDir()) / "scenelab_label_help";
  fs::create_directories(dir);
  const std::string out = (dir / "out.txt").string();
  EXPECT_EQ(run(std::string(LABEL_IMAGE_BIN) + " -h > " + out + " 2>&1"), 0);
  const std::string help = slurp(out);
  EXPECT_EQ(help.rfind("usage: label_image", 0), 0u) << help;
  const size_t precision = help.find("--precision");
  ASSERT_NE(precision, std::string::npos) << help;
  const std::string line = help.substr(precision, help.find('\n', precision) - precision);
  for (const char* p : {"fp32", "tf32", "fp16", "bf16"}) EXPECT_NE(line.find(p), std::string::npos) << line;
}

// --quiet hides the per-image lines, not the summary; a failed image counts in no rate: a run
// whose only image fails labels 0 images at 0.0 images/s.
TEST(LabelImage, QuietKeepsTheSummaryAndFailuresCountInNoRate) {
  fs::path dir = fs::path(::testing::TempDir()) / "scenelab_label_quiet";
  fs::create_directories(dir);
  save_png((dir / "img.png").string(), gradient(80, 60));
  const std::string out = (dir / "out.txt").string();
  const std::string base = std::string(LABEL_IMAGE_BIN) + " --quiet --device cpu --plan-cache off --out " +
                           (dir / "labels").string() + " ";
  EXPECT_EQ(run(base + (dir / "missing.png").string() + " > " + out + " 2>/dev/null"), 1);
  std::string text = slurp(out);
  EXPECT_NE(text.find("labelled 0 of 1 image(s), 1 failed; 0.0 images/s"), std::string::npos) << text;
  EXPECT_EQ(run(base + (dir / "img.png").string() + " > " + out + " 2>/dev/null"), 0);
  text = slurp(out);
  EXPECT_EQ(text.rfind("labelled 1 of 1 image(s), 0 failed;", 0), 0u) << text;
  EXPECT_EQ(text.find("img.png:"), std::string::npos) << "--quiet printed a per-image line: " << text;
}
