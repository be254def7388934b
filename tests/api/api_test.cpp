// The public library (libscenelab.so, include/scenelab/) seen as a user sees it: linked on its own,
// no engine headers. Its labels, colours and detections equal label_image's on the same image
// (the accuracy modes too); batches equal one-by-one; bad input fails by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <tuple>
#include <string>
#include <unistd.h>

#include <scenelab/scenelab.h>
#ifdef SCENELAB_API_TEST_CUDA
#include <cuda_runtime.h>
#endif

namespace fs = std::filesystem;
namespace api = scenelab::api;

namespace {

const std::string kSample = SCENELAB_BUILD_DIR "/samples/street.png";

api::Labeler& cpu_labeler() {
  static api::Labeler labeler([] {
    api::ModelOptions o;
    o.device = "cpu";
    return o;
  }());
  return labeler;
}

api::Image random_image(int w, int h, unsigned seed) {
  std::mt19937 rng(seed);
  api::Image img{w, h, 3, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (auto& p : img.pixels) p = uint8_t(rng() & 255);
  return img;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(Api, VersionMacrosAreSet) {
  EXPECT_EQ(SCENELAB_VERSION_MAJOR, 0);
  EXPECT_GE(SCENELAB_VERSION_MINOR, 2);
}

TEST(Api, EqualsLabelImageOnTheSample) {
  const fs::path out = fs::temp_directory_path() / ("scenelab_api_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string cmd = std::string(LABEL_IMAGE_BIN) + " " + kSample + " --device cpu --out " +
                          out.string() + " --save classes,labels --detect Car --json " +
                          (out / "r.json").string() + " --quiet --plan-cache off";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  api::Labeler& labeler = cpu_labeler();
  const api::Image image = api::load_image(kSample);
  ASSERT_EQ(image.channels, 3);
  const api::Labels labels = labeler.label(image);
  ASSERT_EQ(labels.width, image.width);
  ASSERT_EQ(labels.height, image.height);

  const api::Image classes = api::load_image((out / "street_classes.png").string());
  ASSERT_EQ(classes.width, labels.width);
  ASSERT_EQ(classes.height, labels.height);
  size_t differ = 0;
  for (size_t i = 0; i < labels.classes.size(); ++i) differ += classes.pixels[i * 3] != labels.classes[i];
  EXPECT_EQ(differ, 0u);

  const api::Image colour = labeler.colorize(labels);
  const api::Image written = api::load_image((out / "street_labels.png").string());
  EXPECT_EQ(colour.pixels, written.pixels);

  // The detection head: as many cars as label_image's report lists, inside the image.
  const auto cars = labeler.detect(image, "Car");
  const std::string report = read_text(out / "r.json");
  EXPECT_EQ(cars.size(), count_of(report, "\"class\":\"Car\""));
  for (const auto& d : cars) {
    EXPECT_GE(d.box.x1, -0.5f);
    EXPECT_LE(d.box.x2, float(image.width) + 0.5f);
    EXPECT_GT(d.score, 0.f);
  }
  fs::remove_all(out);
}

// The accuracy modes through the API: mirror and ensemble labels equal label_image --mirror
// --model A,B's; the mirrored labels of the mirrored image are the labels' mirror; the ensemble
// (the shipped model with its seed-1 sibling) is not the shipped model alone; its detection head
// reads the mean probabilities.
TEST(Api, MirrorScalesRefineAndEnsembleEqualLabelImage) {
  const std::string a = SCENELAB_SOURCE_DIR "/weights/camvid-multiscale.h5",
                    b = SCENELAB_SOURCE_DIR "/weights/camvid-multiscale-seed1.h5";
  if (!fs::exists(a) || !fs::exists(b)) GTEST_SKIP() << "shipped models absent";
  const fs::path out = fs::temp_directory_path() / ("scenelab_api_modes_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string cmd = std::string(LABEL_IMAGE_BIN) + " " + kSample + " --device cpu --out " + out.string() +
                          " --model " + a + "," + b + " --mirror --save classes --quiet --plan-cache off";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  api::ModelOptions o;
  o.device = "cpu";
  o.path = a;
  o.ensemble = {b};
  o.mirror = true;
  api::Labeler modes(o);
  const api::Image image = api::load_image(kSample);
  const api::Labels labels = modes.label(image);
  const api::Image classes = api::load_image((out / "street_classes.png").string());
  size_t differ = 0;
  for (size_t i = 0; i < labels.classes.size(); ++i) differ += classes.pixels[i * 3] != labels.classes[i];
  EXPECT_EQ(differ, 0u);
  api::Image mirrored = image;
  const size_t w = size_t(image.width);
  for (size_t y = 0; y < size_t(image.height); ++y)
    for (size_t x = 0; x < w; ++x)
      for (size_t c = 0; c < 3; ++c) mirrored.pixels[(y * w + x) * 3 + c] = image.pixels[(y * w + w - 1 - x) * 3 + c];
  const api::Labels back = modes.label(mirrored);
  size_t asym = 0, changed = 0;
  const api::Labels plain = cpu_labeler().label(image);
  for (size_t y = 0; y < size_t(image.height); ++y)
    for (size_t x = 0; x < w; ++x) {
      asym += back.classes[y * w + w - 1 - x] != labels.classes[y * w + x];
      changed += plain.classes[y * w + x] != labels.classes[y * w + x];
    }
  EXPECT_EQ(asym, 0u);
  EXPECT_GT(changed, 0u);
  for (const auto& d : modes.detect(image, "Car")) EXPECT_TRUE(d.score > 0.f && d.score <= 1.f) << d.score;
  // A mode through ModelOptions against label_image with these flags: the same labels, and not
  // the plain model's.
  auto same_as_label_image = [&](const api::ModelOptions& o, const std::string& flags, const std::string& dir) {
    SCOPED_TRACE(flags);
    const std::string cmd = std::string(LABEL_IMAGE_BIN) + " " + kSample + " --device cpu --out " + (out / dir).string() +
                            " --model " + a + " " + flags + " --save classes --quiet --plan-cache off";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const api::Labels got = api::Labeler(o).label(image);
    const api::Image want = api::load_image((out / dir / "street_classes.png").string());
    size_t differ = 0, changed = 0;
    for (size_t i = 0; i < got.classes.size(); ++i) {
      differ += want.pixels[i * 3] != got.classes[i];
      changed += plain.classes[i] != got.classes[i];
    }
    EXPECT_EQ(differ, 0u);
    EXPECT_GT(changed, 0u);
  };
  api::ModelOptions so;  // ModelOptions::scales against label_image --scales
  so.device = "cpu";
  so.path = a;
  so.mirror = true;
  so.scales = {0.5, 0.75, 1, 1.25};
  same_as_label_image(so, "--mirror --scales 0.5,0.75,1,1.25", "scaled");
  // ModelOptions::refine (its default settings, and others) against label_image --refine
  for (const auto& [flag, sigma_s, sigma_r, iterations] :
       {std::tuple{std::string("--refine"), 40.0, 0.2, 3}, std::tuple{std::string("--refine=12,0.05,2"), 12.0, 0.05, 2}}) {
    api::ModelOptions ro;
    ro.device = "cpu";
    ro.path = a;
    ro.refine = true;
    ro.refine_sigma_s = sigma_s;
    ro.refine_sigma_r = sigma_r;
    ro.refine_iterations = iterations;
    same_as_label_image(ro, flag, "refined" + std::to_string(iterations));
  }
  fs::remove_all(out);
}

TEST(Api, BatchEqualsOneByOne) {
  api::Labeler& labeler = cpu_labeler();
  // Two sizes interleaved, odd dimensions: grouped by size inside, returned in the given order.
  const std::vector<api::Image> images = {random_image(45, 37, 1), random_image(61, 29, 2),
                                          random_image(45, 37, 3), random_image(45, 37, 4),
                                          random_image(61, 29, 5)};
  const auto batch = labeler.label(images);
  ASSERT_EQ(batch.size(), images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const api::Labels one = labeler.label(images[i]);
    EXPECT_EQ(batch[i].width, images[i].width);
    EXPECT_EQ(batch[i].height, images[i].height);
    EXPECT_EQ(batch[i].classes, one.classes) << "image " << i;
  }
}

#ifdef SCENELAB_API_TEST_CUDA
// label_device on CUDA memory gives label()'s bytes, ordered on the caller's stream (labels
// poisoned first); host pointers and a CPU labeller are refused by name.
TEST(Api, LabelDeviceEqualsHostOnTheGpu) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0)
    GTEST_SKIP() << "no GPU: label_device runs on the GPU machine";
  api::ModelOptions o;
  o.device = "cuda";
  api::Labeler gpu(o);
  const int n = 2, h = 53, w = 71;
  const size_t px_bytes = size_t(n) * h * w * 3, label_bytes = size_t(n) * h * w;
  std::vector<uint8_t> px(px_bytes), want(label_bytes), got(label_bytes, 0);
  std::mt19937 rng(31);
  for (auto& v : px) v = uint8_t(rng() & 255);
  gpu.label(px.data(), n, h, w, want.data());
  uint8_t *d_px = nullptr, *d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_px, px_bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, label_bytes), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d_out, 0xff, label_bytes, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d_px, px.data(), px_bytes, cudaMemcpyHostToDevice, s), cudaSuccess);
  for (int run = 0; run < 3; ++run) {  // planned, recorded, replayed
    gpu.label_device(d_px, n, h, w, d_out, s);
    ASSERT_EQ(cudaMemcpyAsync(got.data(), d_out, label_bytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(got, want) << "run " << run;
    ASSERT_EQ(cudaMemsetAsync(d_out, 0xff, label_bytes, s), cudaSuccess);
  }
  try {
    gpu.label_device(px.data(), n, h, w, d_out, s);
    ADD_FAILURE() << "host pixels were taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("not in memory of GPU"), std::string::npos) << e.what();
  }
  try {
    cpu_labeler().label_device(d_px, n, h, w, d_out, s);
    ADD_FAILURE() << "a CPU labeller took device memory";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("not a GPU"), std::string::npos) << e.what();
  }
  cudaStreamDestroy(s);
  cudaFree(d_px);
  cudaFree(d_out);
}
#endif

TEST(Api, ScoresAreTheLabelsBeforeUpsampling) {
  api::Labeler& labeler = cpu_labeler();
  const api::Image image = random_image(67, 53, 9);
  const api::Scores s = labeler.scores(image);
  ASSERT_EQ(size_t(s.classes), labeler.classes().size());
  ASSERT_GT(s.height, 0);
  ASSERT_GT(s.width, 0);
  ASSERT_EQ(s.values.size(), size_t(s.classes) * s.height * s.width);
  for (float v : s.values) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(s.stride_x, 0);
  EXPECT_GT(s.stride_y, 0);
  // The map covers the image: its last pixel's centre lies within it.
  EXPECT_LT(s.offset_x + s.stride_x * (s.width - 1), image.width + s.stride_x);
  EXPECT_EQ(labeler.palette().size(), labeler.classes().size());
}

TEST(Api, BadInputFailsByName) {
  api::Labeler& labeler = cpu_labeler();
  api::Image wrong = random_image(8, 8, 3);
  wrong.pixels.resize(10);
  try {
    labeler.label(wrong);
    FAIL() << "accepted 10 bytes as an 8x8 image";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("8x8"), std::string::npos) << e.what();
  }
  try {
    labeler.detect(random_image(32, 32, 4), "Zeppelin");
    FAIL() << "detected an unknown class";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("Zeppelin"), std::string::npos) << e.what();
  }
  try {
    api::load_image("/nonexistent/street.jpg");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/street.jpg"), std::string::npos) << e.what();
  }
  try {
    api::ModelOptions o;
    o.path = "/nonexistent/model.h5";
    api::Labeler bad(o);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.h5"), std::string::npos) << e.what();
  }
  // The labeler still works after the errors.
  EXPECT_EQ(labeler.label(random_image(29, 23, 5)).classes.size(), 667u);
}

TEST(Api, MovedLabelerKeepsWorking) {
  api::ModelOptions o;
  o.device = "cpu";
  api::Labeler a(o);
  const api::Image img = random_image(33, 21, 6);
  const auto before = a.label(img).classes;
  api::Labeler b(std::move(a));
  EXPECT_EQ(b.label(img).classes, before);
}

TEST(Api, LabelFilesWritesWhatLabelImageWritesAndListsFailures) {
  const fs::path dir = fs::temp_directory_path() / ("scenelab_api_files_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "ref");
  const std::string cmd = std::string(LABEL_IMAGE_BIN) + " " + kSample + " --device cpu --out " +
                          (dir / "ref").string() + " --save classes,labels --quiet --plan-cache off";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  { std::ofstream(dir / "broken.jpg") << "not a jpeg"; }

  std::vector<api::FileJob> jobs = {{kSample, (dir / "a").string()},
                                    {(dir / "missing.png").string(), (dir / "m").string()},
                                    {(dir / "broken.jpg").string(), (dir / "b").string()},
                                    {kSample, (dir / "c").string()}};
  api::FileOptions fo;
  fo.plan_cache = "";
  const api::FileSummary sum = cpu_labeler().label_files(jobs, fo);
  EXPECT_EQ(sum.images, 2u);
  ASSERT_EQ(sum.failures.size(), 2u);
  EXPECT_EQ(sum.failures[0].input, jobs[1].input);
  EXPECT_NE(sum.failures[0].error.find("missing.png"), std::string::npos) << sum.failures[0].error;
  EXPECT_EQ(sum.failures[1].input, jobs[2].input);
  EXPECT_NE(sum.failures[1].error.find("broken.jpg"), std::string::npos) << sum.failures[1].error;
  uint64_t pixels = 0;
  for (uint64_t c : sum.histogram) pixels += c;
  const api::Image sample = api::load_image(kSample);
  EXPECT_EQ(pixels, 2u * uint64_t(sample.width) * uint64_t(sample.height));
  for (const char* base : {"a", "c"}) {
    for (const char* kind : {"_classes.png", "_labels.png"}) {
      EXPECT_EQ(read_text(dir / (std::string(base) + kind)), read_text(dir / "ref" / (std::string("street") + kind)))
          << base << kind;
    }
  }
  EXPECT_FALSE(fs::exists(dir / "m_classes.png"));
  EXPECT_FALSE(fs::exists(dir / "b_labels.png"));
  fs::remove_all(dir);
}

// The window detector (HOG pedestrians): as many boxes as label_image --detector hog reports, on
// RGB and RGBA alike; a window-sized blank image has none; a bad spec fails by name.
TEST(Api, WindowDetectorEqualsLabelImage) {
  const fs::path out = fs::temp_directory_path() / ("scenelab_api_hog_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const std::string cmd = std::string(LABEL_IMAGE_BIN) + " " + kSample +
                          " --device cpu --detector hog --detect person --det-threshold -1 --detect-only --out " +
                          out.string() + " --json " + (out / "r.json").string() + " --quiet";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  api::WindowDetectorOptions o;
  o.device = "cpu";
  o.spec = "threshold=-1";
  api::WindowDetector people(o);
  EXPECT_EQ(people.class_name(), "person");
  const api::Image image = api::load_image(kSample);
  const auto boxes = people.detect(image);
  EXPECT_GT(boxes.size(), 0u);
  EXPECT_EQ(boxes.size(), count_of(read_text(out / "r.json"), "\"class\":\"person\""));
  api::Image rgba{image.width, image.height, 4, {}};
  for (size_t i = 0; i < size_t(image.width) * image.height; ++i) {
    rgba.pixels.insert(rgba.pixels.end(), image.pixels.begin() + i * 3, image.pixels.begin() + i * 3 + 3);
    rgba.pixels.push_back(uint8_t(i));
  }
  const auto again = people.detect(rgba);
  ASSERT_EQ(again.size(), boxes.size());
  for (size_t i = 0; i < boxes.size(); ++i) EXPECT_EQ(again[i].score, boxes[i].score);
  EXPECT_TRUE(people.detect(api::Image{64, 128, 3, std::vector<uint8_t>(64 * 128 * 3, 128)}).size() <= 1);
  EXPECT_TRUE(people.detect(api::Image{40, 40, 3, std::vector<uint8_t>(40 * 40 * 3, 0)}).empty());
  o.spec = "fusion=mean";
  try {
    api::WindowDetector bad(o);
    ADD_FAILURE() << "fusion=mean accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("fusion"), std::string::npos) << e.what();
  }
  fs::remove_all(out);
}
