// The GPU window head against the CPU head: identical detections (boxes and scores bit for bit),
// scored by objectness alone and with the size weight and minimum area of the defaults.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "nms/sliding_window.h"
#include "tests/gpu_skip.h"

using namespace scenelab::nms;

TEST(SlidingWindowGpu, SameDetectionsAsCpu) {
  SCENELAB_REQUIRE_GPU();
#ifdef SCENELAB_WITH_CUDA
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (auto [H, W] : {std::pair{60, 80}, std::pair{37, 53}, std::pair{270, 480}}) {
    std::vector<float> p(size_t(H) * W);
    for (auto& v : p) v = 0.4f * u(rng);
    for (int b = 0; b < 12; ++b) {  // blobs of high probability
      int y0 = int(u(rng) * H), x0 = int(u(rng) * W), bh = 3 + int(u(rng) * 20), bw = 3 + int(u(rng) * 30);
      for (int y = y0; y < std::min(H, y0 + bh); ++y)
        for (int x = x0; x < std::min(W, x0 + bw); ++x) p[size_t(y) * W + x] = 0.7f + 0.3f * u(rng);
    }
    for (float weight : {0.f, 0.03f}) {  // objectness alone, every size; a minimum area, weighted
      WindowHeadOptions o;
      o.nms.max_outputs = -1;
      o.threshold = 0.1f;  // many candidates: the NMS has work too
      o.nms.threshold = 0.3f;
      o.min_area = weight == 0.f ? 0.f : 100.f;
      o.size_weight = weight;
      MapGeometry g{4, 4, 1.5, 1.5};
      auto want = detect_windows_cpu(p.data(), H, W, 2, o, g, W * 4, H * 4);
      scenelab::DeviceBuffer d(p.size() * sizeof(float));
      ASSERT_NO_THROW(scenelab::upload_now(d.get(), p.data(), p.size() * sizeof(float), "scores"));
      scenelab::CudaStream s;
      GpuWindowHead head;
      head.reserve(H, W, o);
      auto got = head.detect(d.get<float>(), H, W, 2, o, g, W * 4, H * 4, s.get());
      ASSERT_EQ(got.size(), want.size()) << W << "x" << H;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(std::memcmp(&got[i].box, &want[i].box, sizeof(Box)), 0) << i;
        EXPECT_EQ(got[i].score, want[i].score) << i;
        EXPECT_EQ(got[i].cls, 2);
      }
      EXPECT_GT(want.size(), 3u);
    }
  }
#endif
}

// Every window a candidate (threshold 0): 270 x 480 gives more than the dense NMS path takes
// (30,000), so the head fuses them on the sparse path nms_on_device takes; the same detections as
// the CPU's.
TEST(SlidingWindowGpu, EveryWindowACandidateTakesTheSparsePath) {
  SCENELAB_REQUIRE_GPU();
#ifdef SCENELAB_WITH_CUDA
  const int H = 270, W = 480;
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> p(size_t(H) * W);
  for (auto& v : p) v = u(rng);
  WindowHeadOptions o;
  o.nms.max_outputs = -1;
  o.threshold = 0.f;
  o.nms.threshold = 0.3f;
  MapGeometry g{4, 4, 1.5, 1.5};
  const size_t candidates = window_candidates_cpu(p.data(), H, W, 1, o, g, W * 4, H * 4).size();
  EXPECT_GT(candidates, size_t(scenelab::nms::kDenseGreedyMax));
  const auto want = detect_windows_cpu(p.data(), H, W, 1, o, g, W * 4, H * 4);
  scenelab::DeviceBuffer d(p.size() * sizeof(float));
  scenelab::upload_now(d.get(), p.data(), p.size() * sizeof(float), "scores");
  scenelab::CudaStream s;
  GpuWindowHead head;
  head.reserve(H, W, o);
  const auto got = head.detect(d.get<float>(), H, W, 1, o, g, W * 4, H * 4, s.get());
  ASSERT_EQ(got.size(), want.size()) << candidates << " candidates";
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(std::memcmp(&got[i].box, &want[i].box, sizeof(Box)), 0) << i;
    EXPECT_EQ(got[i].score, want[i].score) << i;
  }
#endif
}
