// The streaming pipeline on the CPU: labels byte-identical to the single-image path (Labeler) for
// 1, 2 and many pool threads and batch 1, 2, 3, over mixed sizes with a corrupt file among them;
// reports come in input order; frames in flight never exceed the queue depth; a frame whose
// size is too small for the network fails alone.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

#include "core/error.h"
#include "job/labeler.h"
#include "job/pipeline.h"
#include "weights/default_model.h"
#include "weights/model_file.h"
#include "tests/job/pipeline_util.h"
#include "tests/test_util.h"

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

Image8 random_image(int w, int h, uint32_t seed) { return test::noise_image(w, h, seed); }

// `count` noise PNGs of w x h in a fresh folder `dir` (emptied first), seeds seed0, seed0 + 1, ...
std::vector<std::string> noise_pngs(const fs::path& dir, int count, int w, int h, uint32_t seed0 = 0) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> files;
  for (int i = 0; i < count; ++i) {
    files.push_back((dir / ("f" + std::to_string(i) + ".png")).string());
    save_png(files.back(), random_image(w, h, seed0 + uint32_t(i)));
  }
  return files;
}

struct Inputs {
  std::vector<std::string> files;
  std::vector<int> bad;  // indices expected to fail
};

// 9 files: sizes change mid-stream (and back), a corrupt file and one too small for the net.
Inputs make_inputs(const fs::path& dir) {
  fs::create_directories(dir);
  Inputs in;
  const int sizes[][2] = {{61, 47}, {61, 47}, {61, 47}, {0, 0}, {61, 47}, {53, 49},
                          {53, 49}, {20, 20}, {61, 47}};
  for (int i = 0; i < 9; ++i) {
    const std::string f = (dir / ("img" + std::to_string(i) + ".png")).string();
    if (sizes[i][0] == 0) {
      std::ofstream(f) << "\x89PNG\r\n\x1a\n not really";
      in.bad.push_back(i);
    } else {
      save_png(f, random_image(sizes[i][0], sizes[i][1], 10 + uint32_t(i)));
      if (sizes[i][0] == 20) in.bad.push_back(i);  // below the reference net's smallest input
    }
    in.files.push_back(f);
  }
  return in;
}

}  // namespace

TEST(Pipeline, SameLabelsAsTheSingleImagePathForAnyThreadsAndBatch) {
  const fs::path dir = fs::path(::testing::TempDir()) / "scenelab_pipeline";
  fs::remove_all(dir);
  const Inputs in = make_inputs(dir);
  const Model m = make_random_model("reference", 5, 4);
  Labeler single(m, std::make_unique<CpuBackend>(2));
  std::vector<LabelMap> want(in.files.size());
  for (size_t i = 0; i < in.files.size(); ++i)
    if (std::find(in.bad.begin(), in.bad.end(), int(i)) == in.bad.end())
      want[i] = single.label(load_image(in.files[i]));
  for (int threads : {1, 2, 7})
    for (int batch : {1, 2, 3}) {
      SCOPED_TRACE("pool threads " + std::to_string(threads) + ", batch " + std::to_string(batch));
      PipelineOptions o;
      o.device = "cpu";
      o.threads = 2;
      o.pool_threads = threads;
      o.batch = batch;
      Pipeline p(m, o);
      FileSource src(in.files);
      std::vector<size_t> order;
      std::atomic<int> finished{0};
      const PipelineStats st = p.run(
          src, [&](Frame&) { ++finished; },
          [&](Frame& f) {
            order.push_back(f.index);
            ASSERT_LT(f.index, in.files.size());
            EXPECT_EQ(f.name, in.files[f.index]);
            const bool bad = std::find(in.bad.begin(), in.bad.end(), int(f.index)) != in.bad.end();
            if (bad) {
              EXPECT_FALSE(f.error.empty()) << f.name;
              EXPECT_NE(f.error.find(fs::path(f.name).filename().string()), std::string::npos) << f.error;
              return;
            }
            ASSERT_TRUE(f.error.empty()) << f.error;
            EXPECT_LE(f.batch, batch);
            EXPECT_EQ(f.labels.width, want[f.index].width);
            EXPECT_TRUE(f.labels.labels == want[f.index].labels) << "labels differ: " << f.name;
          });
      EXPECT_EQ(finished.load(), int(in.files.size()));
      ASSERT_EQ(order.size(), in.files.size());
      for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);
      EXPECT_EQ(st.frames, in.files.size());
      EXPECT_EQ(st.failed, in.bad.size());
    }
}

// A run's short last batch (7 frames, batch 3: 3 + 3 + 1) runs on the batch-3 plan instead of
// planning batch 1 (on a GPU a new plan costs its planning and a first pass of 0.1-0.3 s); its
// labels are still those of the single-image path.
TEST(Pipeline, ShortLastBatchRunsOnTheFullBatchPlan) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("scenelab_pipeline_tail_" + std::to_string(::getpid()));
  const std::vector<std::string> files = noise_pngs(dir, 7, 61, 47, 40);
  const Model m = make_random_model("reference", 5, 4);
  Labeler single(m, std::make_unique<CpuBackend>(2));
  PipelineOptions o;
  o.device = "cpu";
  o.threads = 2;
  o.batch = 3;
  Pipeline p(m, o);
  FileSource src(files);
  std::vector<int> batches;
  const PipelineStats st = p.run(src, [](Frame&) {}, [&](Frame& f) {
    ASSERT_TRUE(f.error.empty()) << f.error;
    batches.push_back(f.batch);
    EXPECT_TRUE(f.labels.labels == single.label(load_image(f.name)).labels) << "labels differ: " << f.name;
  });
  EXPECT_EQ(st.frames, 7u);
  EXPECT_EQ(st.plans, 1u) << "the last frame should run on the batch-3 plan";
  EXPECT_EQ(batches, (std::vector<int>{3, 3, 3, 3, 3, 3, 1}));
  fs::remove_all(dir);
}

// The pyramid detector on the pipeline's workers (PipelineOptions::pyramid), beside a labelling
// model and alone (a worker a thread): each frame's boxes are the detector's run by itself on the
// image, bit for bit; the labels are still the single-image path's; a bad spec fails at once.
TEST(Pipeline, PyramidDetectorOnTheWorkersEqualsItsOwnRun) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("scenelab_pipeline_pyramid_" + std::to_string(::getpid()));
  std::vector<std::string> files = noise_pngs(dir, 3, 150, 170, 70);
  const auto more = noise_pngs(dir / "b", 2, 131, 200, 80);
  files.insert(files.end(), more.begin(), more.end());
  const Model hog = read_model(std::string(SCENELAB_SOURCE_DIR) + "/weights/hog-people.h5");
  const Model m = make_random_model("reference", 5, 4);
  const std::string spec = "threshold=-1e30";
  CpuBackend one(1);
  PyramidDetector alone(hog, one, spec);
  Labeler single(m, std::make_unique<CpuBackend>(2));
  for (const bool labels : {true, false}) {
    PipelineOptions o = test::cpu_pipeline(2);
    o.pyramid = PipelineOptions::Pyramid{&hog, spec};
    auto p = labels ? std::make_unique<Pipeline>(m, o) : std::make_unique<Pipeline>(o);
    EXPECT_EQ(p->workers(), labels ? 1 : 2);
    const size_t frames = test::run_files(*p, files, [&](Frame& f) {
      const Image8 img = load_image(f.name);
      const auto want = alone.detect(img.pixels.data(), img.height, img.width, 3);
      ASSERT_FALSE(want.empty());
      ASSERT_EQ(f.window_detections.size(), want.size()) << f.name;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(f.window_detections[i].score, want[i].score) << f.name;
        EXPECT_EQ(f.window_detections[i].box.x1, want[i].box.x1) << f.name;
        EXPECT_EQ(f.window_detections[i].box.y2, want[i].box.y2) << f.name;
      }
      EXPECT_GT(f.pyramid_times.levels, 0);
      if (labels) EXPECT_TRUE(f.labels.labels == single.label(img).labels) << f.name;
      else EXPECT_TRUE(f.labels.labels.empty());
    });
    EXPECT_EQ(frames, files.size());
  }
  PipelineOptions bad;
  bad.device = "cpu";
  bad.pyramid = PipelineOptions::Pyramid{&hog, "nope=1"};
  EXPECT_THROW({ Pipeline p(bad); }, Error);
  EXPECT_THROW({ Pipeline p(PipelineOptions{}); }, Error);  // neither a model nor a detector
  fs::remove_all(dir);
}

// The detection head on the pipeline's workers (PipelineOptions::detect): for batch 1 and 3, each
// frame's boxes are those of the single-image path (the scores fetched, class_probabilities,
// nms::detect_windows_cpu), bit for bit, class after class.
TEST(Pipeline, DetectionsEqualTheHostHeadOnTheFetchedScores) {
  const fs::path dir = fs::path(::testing::TempDir()) / "scenelab_pipeline_detect";
  fs::remove_all(dir);
  fs::create_directories(dir);
  Inputs in;  // large enough for maps of some windows: 160x120 gives 29x19 class scores
  const int sizes[][2] = {{160, 120}, {160, 120}, {151, 133}, {160, 120}, {160, 120}};
  for (int i = 0; i < 5; ++i) {
    in.files.push_back((dir / ("d" + std::to_string(i) + ".png")).string());
    save_png(in.files.back(), random_image(sizes[i][0], sizes[i][1], 30 + uint32_t(i)));
  }
  const Model m = make_random_model("reference", 5, 4);
  nms::WindowHeadOptions head;  // every window a candidate: the random model's maps are flat
  head.threshold = -1.f;
  head.min_area = 0;
  head.nms.max_outputs = 20;
  const std::vector<int> classes{1, 3};
  Labeler single(m, std::make_unique<CpuBackend>(2));
  std::vector<std::vector<nms::Detection>> want(in.files.size());
  for (size_t i = 0; i < in.files.size(); ++i) {
    if (std::find(in.bad.begin(), in.bad.end(), int(i)) != in.bad.end()) continue;
    const Image8 img = load_image(in.files[i]);
    single.label(img);
    int h = 0, w = 0;
    Geometry g;
    const auto probs = single.class_probabilities(classes, &h, &w, &g);
    for (size_t k = 0; k < classes.size(); ++k) {
      const auto d = nms::detect_windows_cpu(probs[k].data(), h, w, classes[k], head,
                                             nms::MapGeometry{g.stride_y, g.stride_x, g.offset_y, g.offset_x},
                                             img.width, img.height);
      want[i].insert(want[i].end(), d.begin(), d.end());
    }
    ASSERT_GT(want[i].size(), 10u);
  }
  for (int batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    PipelineOptions o;
    o.device = "cpu";
    o.threads = 2;
    o.batch = batch;
    for (int c : classes) o.detect.push_back({c, head});
    Pipeline p(m, o);
    FileSource src(in.files);
    size_t reported = 0;
    p.run(src, nullptr, [&](Frame& f) {
      ++reported;
      ASSERT_TRUE(f.error.empty()) << f.error;
      const auto& got = f.detections;
      ASSERT_EQ(got.size(), want[f.index].size()) << f.name;
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(std::memcmp(&got[k].box, &want[f.index][k].box, sizeof(nms::Box)), 0) << f.name << " box " << k;
        EXPECT_EQ(got[k].score, want[f.index][k].score) << f.name << " box " << k;
        EXPECT_EQ(got[k].cls, want[f.index][k].cls);
      }
    });
    EXPECT_EQ(reported, in.files.size());
  }
  PipelineOptions bad;
  bad.device = "cpu";
  bad.detect.push_back({1, head});
  bad.detect_node = "no_such_node";
  EXPECT_THROW(Pipeline(m, bad), Error);
}

namespace {
// Counts frames between the source and the report.
class CountingSource : public FileSource {
 public:
  CountingSource(std::vector<std::string> f, std::atomic<int>* alive, std::atomic<int>* peak)
      : FileSource(std::move(f)), alive_(alive), peak_(peak) {}
  bool next(Frame& f) override {
    if (!FileSource::next(f)) return false;
    const int a = ++*alive_;
    int p = peak_->load();
    while (a > p && !peak_->compare_exchange_weak(p, a)) {
    }
    return true;
  }

 private:
  std::atomic<int>*alive_, *peak_;
};
}  // namespace

TEST(Pipeline, FramesInFlightNeverExceedTheQueueDepth) {
  const std::vector<std::string> files =
      noise_pngs(fs::path(::testing::TempDir()) / "scenelab_pipeline_depth", 40, 48, 48);
  const Model m = make_random_model("reference", 3, 1);
  PipelineOptions o = test::cpu_pipeline(1, 4, 5);
  o.batch = 3;
  Pipeline p(m, o);
  std::atomic<int> alive{0}, peak{0};
  CountingSource src(files, &alive, &peak);
  size_t reported = 0;
  p.run(src, nullptr, [&](Frame& f) {
    EXPECT_TRUE(f.error.empty()) << f.error;
    ++reported;
    --alive;
  });
  EXPECT_EQ(reported, files.size());
  EXPECT_LE(peak.load(), 5);
  EXPECT_GE(peak.load(), 3);  // a whole batch was in flight
}

TEST(Pipeline, CancelStopsTakingFramesAndReportsWhatWasTaken) {
  const std::vector<std::string> files =
      noise_pngs(fs::path(::testing::TempDir()) / "scenelab_pipeline_cancel", 30, 48, 48);
  const Model m = make_random_model("reference", 3, 1);
  Pipeline p(m, test::cpu_pipeline(0, 2, 4));
  FileSource src(files);
  size_t reported = 0;
  const PipelineStats st = p.run(src, nullptr, [&](Frame& f) {
    EXPECT_EQ(f.index, reported);
    if (++reported == 3) p.cancel();
  });
  EXPECT_EQ(st.frames, reported);
  EXPECT_LT(reported, files.size());
  EXPECT_TRUE(p.cancelled());
}

TEST(Pipeline, BadOptionsAreClearErrors) {
  const Model m = make_random_model("reference", 3, 1);
  PipelineOptions o;
  o.device = "cpu";
  o.batch = -1;
  EXPECT_THROW({ Pipeline p(m, o); }, Error);
  o.batch = 0;
  o.device = "gpu";
  try {
    Pipeline p(m, o);
    FAIL() << "an unknown device was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown device 'gpu'"), std::string::npos) << e.what();
  }
  o.device = "cpu";
  o.labels_node = "nope";
  EXPECT_THROW({ Pipeline p(m, o); }, Error);
}

TEST(Pipeline, OverlayRowsAreLeftToTheCallerOnTheCpu) {
  // PipelineOptions::overlay is made by GPU workers (tests/job/overlay_rows_gpu_test.cpp); a
  // CPU worker leaves the rows empty (the caller's pool blends) and the labels as they were.
  const auto files = noise_pngs(fs::path(::testing::TempDir()) / "scenelab_pipeline_overlay", 3, 61, 47);
  const Model m = make_random_model("reference", 3, 1);
  PipelineOptions o = test::cpu_pipeline(1);
  std::vector<std::vector<uint8_t>> plain(files.size());
  {
    Pipeline p(m, o);
    test::run_files(p, files, [&](Frame& f) { plain[f.index] = f.labels.labels; });
  }
  o.overlay = PipelineOptions::Overlay{true, m.palette};
  Pipeline p(m, o);
  const size_t seen = test::run_files(p, files, [&](Frame& f) {
    EXPECT_TRUE(f.overlay_rows.empty());
    EXPECT_EQ(f.labels.labels, plain[f.index]);
  });
  EXPECT_EQ(seen, files.size());
  // Bad overlay options are refused by name.
  o.overlay.palette.clear();
  EXPECT_THROW({ Pipeline q(m, o); }, Error);
  o.overlay.palette = m.palette;
  o.overlay.alpha = 1.5f;
  EXPECT_THROW({ Pipeline q(m, o); }, Error);
}
