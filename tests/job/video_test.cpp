// Video round trip through FFmpeg (skipped, saying so, in builds without it): frames written by
// VideoWriter come back from VideoReader at the same size and close in value (lossy codec); a
// truncated file gives the frames before the cut and says where it stopped; a file that is no
// video fails by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "job/video.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

Image8 frame(int w, int h, int t) {
  Image8 img{w, h, 3, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img.pixels[(size_t(y) * w + x) * 3];
      p[0] = uint8_t(40 + (x + 2 * t) % 160);
      p[1] = uint8_t(60 + y % 120);
      p[2] = uint8_t(x < w / 2 ? 200 : 50);
    }
  return img;
}

}  // namespace

TEST(Video, WriteReadRoundTripAndTruncatedFile) {
  if (!video_supported()) GTEST_SKIP() << "built without FFmpeg: video test skipped";
  const fs::path dir = fs::path(::testing::TempDir()) / "scenelab_video";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int w = 96, h = 64, n = 30;
  for (const char* name : {"clip.mkv", "clip.mp4"}) {
    SCOPED_TRACE(name);
    const std::string path = (dir / name).string();
    {
      VideoWriter vw(path, w, h, 25.0);
      for (int t = 0; t < n; ++t) vw.write(frame(w, h, t));
      vw.close();
    }
    ASSERT_TRUE(fs::exists(path));
    VideoReader vr(path);
    EXPECT_EQ(vr.width(), w);
    EXPECT_EQ(vr.height(), h);
    EXPECT_NEAR(vr.fps(), 25.0, 0.01);
    Image8 img;
    int t = 0;
    while (vr.read(img)) {
      ASSERT_EQ(img.width, w);
      ASSERT_EQ(img.height, h);
      const Image8 want = frame(w, h, t);
      double diff = 0;
      for (size_t i = 0; i < img.pixels.size(); ++i) diff += std::abs(int(img.pixels[i]) - int(want.pixels[i]));
      EXPECT_LT(diff / double(img.pixels.size()), 8.0) << "frame " << t;
      ++t;
    }
    EXPECT_EQ(t, n);
    EXPECT_EQ(vr.stopped(), "");
  }
  // Matroska cut at 60%: the frames before the cut, and a note of where it stopped.
  std::ifstream in((dir / "clip.mkv").string(), std::ios::binary);
  const std::string s((std::istreambuf_iterator<char>(in)), {});
  std::ofstream((dir / "cut.mkv").string(), std::ios::binary) << s.substr(0, s.size() * 6 / 10);
  VideoReader vr((dir / "cut.mkv").string());
  Image8 img;
  int got = 0;
  while (vr.read(img)) ++got;
  EXPECT_GT(got, 0);
  EXPECT_LT(got, n);
  EXPECT_NE(vr.stopped(), "") << "a truncated video must say where it stopped";
  std::printf("truncated clip: %d of %d frames, '%s'\n", got, n, vr.stopped().c_str());
  // Not a video at all.
  std::ofstream((dir / "junk.mp4").string()) << "no video here";
  try {
    VideoReader bad((dir / "junk.mp4").string());
    FAIL() << "junk was read as a video";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("junk.mp4"), std::string::npos) << e.what();
  }
}
