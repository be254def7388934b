// label_image --device cuda gives the same class-index PNG as --device cpu (fp32) with the
// shipped model on the generated sample street scene, plain, --mirror and --mirror --scales, and
// the overlay made on the GPU is the host's file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "core/file_io.h"
#include "engine/image_io.h"
#include "job/labeler.h"
#include "weights/model_file.h"
#include "weights/model_locator.h"
#include "tests/gpu_skip.h"

using namespace scenelab;
namespace fs = std::filesystem;

TEST(LabelImageGpu, SameLabelsAsCpu) {
  SCENELAB_REQUIRE_GPU();
  const fs::path dir = fs::path(::testing::TempDir()) / "scenelab_label_gpu";
  fs::remove_all(dir);
  const std::string img = std::string(SCENELAB_BUILD_DIR) + "/samples/street.png";
  // plain, --mirror (the image and its mirror through the net, job/combine.h) and with scales
  for (const std::string mode : {"", "mirror", "scales"}) {
    for (const char* dev : {"cpu", "cuda"}) {
      std::string cmd = std::string(LABEL_IMAGE_BIN) + " --quiet --device " + dev + " --out " +
                        (dir / (dev + mode)).string() + (mode.empty() ? "" : " --mirror") + (mode == "scales" ? " --scales 0.5,0.75,1,1.25" : "") + " " +
                        img;
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    Image8 a = load_image((dir / ("cpu" + mode) / "street_classes.png").string(), 1);
    Image8 b = load_image((dir / ("cuda" + mode) / "street_classes.png").string(), 1);
    ASSERT_EQ(a.pixels.size(), b.pixels.size());
    size_t diff = 0;
    for (size_t i = 0; i < a.pixels.size(); ++i) diff += a.pixels[i] != b.pixels[i];
    EXPECT_LE(double(diff), 0.001 * double(a.pixels.size())) << diff << " pixels differ " << mode;
    std::printf("label_image %s cpu vs cuda: %zu of %zu pixels differ\n", mode.c_str(), diff, a.pixels.size());
  }
  // mirroring changes some labels, and so do the scales (so each comparison is not the last again)
  Image8 p = load_image((dir / "cpu/street_classes.png").string(), 1);
  Image8 m = load_image((dir / "cpumirror/street_classes.png").string(), 1);
  EXPECT_NE(p.pixels, m.pixels);
  EXPECT_NE(m.pixels, load_image((dir / "cpuscales/street_classes.png").string(), 1).pixels);
}

// On the GPU the overlay is blended and filtered there (job/overlay_rows.h): its file is the
// one the host writes from the same labels (encode_png of overlay_labels), byte for byte.
TEST(LabelImageGpu, OverlayMadeOnTheGpuIsTheHostsFile) {
  SCENELAB_REQUIRE_GPU();
  const fs::path dir = fs::path(::testing::TempDir()) / "scenelab_label_gpu_overlay";
  fs::remove_all(dir);
  const std::string img = std::string(SCENELAB_BUILD_DIR) + "/samples/street.png";
  const std::string model = find_default_model();
  const std::string cmd = std::string(LABEL_IMAGE_BIN) + " --quiet --device cuda --model " + model +
                          " --out " + dir.string() + " " + img;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const Image8 rgb = load_image(img, 3);
  const Image8 classes = load_image((dir / "street_classes.png").string(), 1);
  const Model m = read_model(model);
  LabelMap labels{classes.width, classes.height, classes.pixels};
  const std::vector<uint8_t> want = encode_png(overlay_labels(rgb, labels, m.palette));
  EXPECT_EQ(read_file((dir / "street_overlay.png").string()), want);
}
