// label_image on the pipeline, end to end: --save picks the outputs (the colour labels are an
// indexed-colour PNG of the model's palette), --skip-existing resumes, inputs in natural order,
// the JSON report carries per-stage timings and images/s, a video is labelled into videos with a
// histogram per frame, and SIGTERM mid-run leaves only complete outputs (no temporary files).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/image_io.h"
#include "job/pyramid_detector.h"
#include "job/video.h"
#include "weights/default_model.h"
#include "weights/model_file.h"
#include "tests/test_util.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

using test::slurp;
int run(const std::string& cmd) { return test::run_command(cmd); }
Image8 noise(int w, int h, uint32_t seed) { return test::noise_image(w, h, seed); }

struct Dir {
  fs::path root;
  std::string model;
  // Per process (two test runs at once on one machine, e.g. two CI checkouts, shared the fixed
  // name and removed each other's files), removed again at the end.
  explicit Dir(const std::string& name)
      : root(fs::path(::testing::TempDir()) / (name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(root);
    fs::create_directories(root / "in");
    model = (root / "ref.h5").string();
    write_model(model, make_random_model("reference", 8, 2));
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;
  std::string cmd(const std::string& args) const {
    return std::string(LABEL_IMAGE_BIN) + " --model " + model + " --device cpu --threads 2 --plan-cache off --out " +
           (root / "out").string() + " " + args;
  }
};

}  // namespace

TEST(LabelImagePipeline, SaveSkipExistingNaturalOrderAndJson) {
  Dir d("scenelab_li_pipeline");
  for (int i : {10, 2, 1})
    save_png((d.root / "in" / ("img" + std::to_string(i) + ".png")).string(), noise(64, 50, uint32_t(i)));
  const std::string json = (d.root / "r.json").string(), so = (d.root / "so.txt").string();
  ASSERT_EQ(run(d.cmd("--save classes,labels --json " + json + " " + (d.root / "in").string() + " > " + so)), 0);
  const std::string out = slurp(so);
  const size_t p1 = out.find("img1.png"), p2 = out.find("img2.png"), p10 = out.find("img10.png");
  ASSERT_NE(p10, std::string::npos) << out;
  EXPECT_LT(p1, p2);
  EXPECT_LT(p2, p10) << "natural order: img2 before img10\n" << out;
  for (int i : {1, 2, 10}) {
    const std::string base = (d.root / "out" / ("img" + std::to_string(i))).string();
    EXPECT_TRUE(fs::exists(base + "_classes.png"));
    EXPECT_FALSE(fs::exists(base + "_overlay.png")) << "--save classes,labels wrote an overlay";
    // The colour labels are the class map in the model's palette.
    const Image8 cls = load_image(base + "_classes.png", 1), col = load_image(base + "_labels.png", 3);
    const Model m = make_random_model("reference", 8, 2);
    for (size_t k = 0; k < cls.pixels.size(); ++k)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(col.pixels[3 * k + size_t(c)], m.palette.at(cls.pixels[k])[size_t(c)]);
  }
  const std::string js = slurp(json);
  for (const char* key : {"\"images_per_s\"", "\"times_ms\"", "\"decode\"", "\"forward\"", "\"batch\"",
                          "\"stage_ms_per_image\"", "\"planning_ms\""})
    EXPECT_NE(js.find(key), std::string::npos) << key << "\n" << js;
  EXPECT_FALSE(fs::exists(json + ".tmp"));
  // Resume: everything exists, nothing is labelled again.
  ASSERT_EQ(run(d.cmd("--save classes,labels --skip-existing " + (d.root / "in").string() + " > " + so)), 0);
  EXPECT_NE(slurp(so).find("skipped 3 image(s)"), std::string::npos) << slurp(so);
  // --runtime-fusion takes on, off or auto (a GPU setting: the CPU run accepts and ignores it).
  const std::string se = (d.root / "se.txt").string();
  EXPECT_EQ(run(d.cmd("--runtime-fusion maybe " + (d.root / "in").string() + " 2> " + se)), 2);
  EXPECT_NE(slurp(se).find("--runtime-fusion expects on, off or auto, got 'maybe'"), std::string::npos) << slurp(se);
  EXPECT_EQ(run(d.cmd("--runtime-fusion off --save classes " + (d.root / "in").string() + " > " + so)), 0) << slurp(so);
}

TEST(LabelImagePipeline, VideoInVideosOut) {
  if (!video_supported()) GTEST_SKIP() << "built without FFmpeg: video test skipped";
  Dir d("scenelab_li_video");
  const std::string clip = (d.root / "in" / "clip.mkv").string();
  {
    VideoWriter w(clip, 80, 60, 10.0);
    for (int t = 0; t < 12; ++t) w.write(noise(80, 60, uint32_t(t)));
    w.close();
  }
  const std::string json = (d.root / "r.json").string();
  ASSERT_EQ(run(d.cmd("--quiet --json " + json + " " + clip)), 0);
  for (const char* kind : {"_overlay.mp4", "_labels.mp4"}) {
    const std::string out = (d.root / "out" / (std::string("clip") + kind)).string();
    ASSERT_TRUE(fs::exists(out)) << out;
    VideoReader r(out);
    Image8 img;
    int n = 0;
    while (r.read(img)) ++n;
    EXPECT_EQ(n, 12) << out;
    EXPECT_EQ(img.width, 80);
  }
  const std::string js = slurp(json);
  const nlohmann::json video = nlohmann::json::parse(js)["videos"].at(0);
  EXPECT_EQ(video["frames_labelled"], 12) << js;
  ASSERT_EQ(video["frames"].size(), 12u) << js;
  EXPECT_EQ(video["frames"][11]["frame"], 11) << js;
  EXPECT_TRUE(video["frames"][11].contains("histogram")) << js;
}

TEST(LabelImagePipeline, SigtermLeavesOnlyCompleteOutputs) {
  Dir d("scenelab_li_sigterm");
  for (int i = 0; i < 60; ++i)
    save_png((d.root / "in" / ("f" + std::to_string(i) + ".png")).string(), noise(320, 240, uint32_t(i)));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string c = d.cmd("--quiet " + (d.root / "in").string() + " 2>/dev/null");
    execl("/bin/sh", "sh", "-c", ("exec " + c).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until some outputs exist, then interrupt.
  for (int k = 0; k < 400 && (!fs::exists(d.root / "out") || fs::is_empty(d.root / "out")); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_TRUE(WEXITSTATUS(status) == 130 || WEXITSTATUS(status) == 0) << WEXITSTATUS(status);
  size_t outputs = 0;
  for (const auto& e : fs::directory_iterator(d.root / "out")) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << "temporary file left: " << name;
    EXPECT_NO_THROW(load_image(e.path().string())) << name;
    ++outputs;
  }
  EXPECT_GT(outputs, 0u);
  std::printf("SIGTERM: exit %d, %zu complete outputs of %d\n", WEXITSTATUS(status), outputs, 60 * 3);
}

// --detector hog: the same boxes with scene labelling, without it (--detect-only) and on every
// frame of a video of the image, as PyramidDetector gives them in-process.
TEST(LabelImagePipeline, HogDetectorOnImagesAndVideo) {
  Dir d("scenelab_li_hog");
  const Image8 img = noise(203, 171, 5);
  const std::string png = (d.root / "in" / "noise.png").string();
  save_png(png, img);
  const Model hog = read_model(std::string(SCENELAB_SOURCE_DIR) + "/weights/hog-people.h5");
  CpuBackend cpu(1);
  PyramidDetector det(hog, cpu, "threshold=-2.5 fusion=greedy");
  const size_t want = det.detect(img.pixels.data(), img.height, img.width, 3).size();
  ASSERT_GT(want, 0u) << "the noise image should give boxes at threshold -2.5";
  auto count = [](const std::string& js, size_t from = 0, size_t to = std::string::npos) {
    size_t n = 0;
    for (size_t p = js.find("\"person\"", from); p != std::string::npos && p < to; p = js.find("\"person\"", p + 1)) ++n;
    return n;
  };
  const std::string hogargs = " --detector hog --detect person --det-threshold -2.5 --quiet ";
  const std::string j1 = (d.root / "only.json").string(), j2 = (d.root / "both.json").string();
  ASSERT_EQ(run(d.cmd(hogargs + "--detect-only --json " + j1 + " " + png)), 0);
  EXPECT_EQ(count(slurp(j1)), want) << slurp(j1);
  EXPECT_TRUE(fs::exists(d.root / "out" / "noise_detections.png"));
  // --json -: stdout is the report alone (the per-image lines go to stderr).
  const std::string j0 = (d.root / "stdout.json").string();
  ASSERT_EQ(run(d.cmd(" --detector hog --detect person --det-threshold -2.5 --detect-only --json - " + png + " >" +
                      j0 + " 2>/dev/null")),
            0);
  const std::string out0 = slurp(j0);
  EXPECT_EQ(out0.substr(0, 1), "{") << out0;
  EXPECT_EQ(count(out0), want);
  ASSERT_EQ(run(d.cmd(hogargs + "--json " + j2 + " " + png)), 0);
  EXPECT_EQ(count(slurp(j2)), want) << slurp(j2);
  EXPECT_TRUE(fs::exists(d.root / "out" / "noise_classes.png"));
  // Wrong class, and --fusion without the HOG detector: one clear line each.
  EXPECT_EQ(run(d.cmd("--detector hog --detect car --detect-only " + png + " 2>/dev/null")), 2);
  EXPECT_EQ(run(d.cmd("--fusion group " + png + " 2>/dev/null")), 2);
  if (!video_supported()) GTEST_SKIP() << "built without FFmpeg: the video half skipped";
  // A lossless-enough video is not needed: each frame is searched as decoded, so compare with
  // the decoded frames.
  const std::string clip = (d.root / "in" / "clip.mkv").string();
  {
    VideoWriter w(clip, img.width - 1, img.height - 1, 10.0);  // even sizes for the encoder
    Image8 even{img.width - 1, img.height - 1, 3, {}};
    for (int y = 0; y < even.height; ++y)
      even.pixels.insert(even.pixels.end(), img.pixels.begin() + size_t(y) * img.width * 3,
                         img.pixels.begin() + (size_t(y) * img.width + even.width) * 3);
    for (int t = 0; t < 3; ++t) w.write(even);
    w.close();
  }
  std::vector<size_t> per_frame;
  {
    VideoReader r(clip);
    Image8 f;
    while (r.read(f)) per_frame.push_back(det.detect(f.pixels.data(), f.height, f.width, 3).size());
  }
  ASSERT_EQ(per_frame.size(), 3u);
  const std::string j3 = (d.root / "video.json").string();
  ASSERT_EQ(run(d.cmd(hogargs + "--json " + j3 + " " + clip)), 0);
  const std::string js = slurp(j3);
  const nlohmann::json frames = nlohmann::json::parse(js)["videos"].at(0)["frames"];
  ASSERT_EQ(frames.size(), 3u) << js;
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(frames[t]["frame"], t) << js;
    EXPECT_EQ(count(frames[t].dump()), per_frame[t]) << "frame " << t;
  }
}
