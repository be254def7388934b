// GPU NMS against its CPU rule (tests/nms/nms_cpu_test.cpp checks those rules): exact greedy and
// Cluster-NMS equal nms::greedy_nms index for index; Oro's map/reduce equals nms::fast_nms; on
// random, clustered and adversarial sets, n in {0, 1, 2, 63, 64, 65, 1000, 5000}.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/error.h"
#include "nms/nms.h"
#include "tests/nms/box_sets.h"
#include "nms/nms_cuda.h"
#include "tests/gpu_skip.h"

using namespace scenelab;
using namespace scenelab::nms;

#ifdef SCENELAB_WITH_CUDA
namespace {

void check_all(const std::vector<Detection>& d, const Options& o, const std::string& what) {
  SCOPED_TRACE(what + " n=" + std::to_string(d.size()));
  auto want = greedy_nms(d, o);
  EXPECT_EQ(greedy_nms_gpu(d, o), want) << "exact greedy";
  int it = 0;
  EXPECT_EQ(cluster_nms_gpu(d, o, &it), want) << "Cluster-NMS";
  int cpu_it = 0;
  cluster_nms(d, o, &cpu_it);
  EXPECT_EQ(it, cpu_it) << "Cluster-NMS iterations";
  auto fast = fast_nms(d, o);
  const int n = int(d.size());
  for (int k : {1, 2, 7, 32}) {
    const int dmax = std::max(k, (n + k - 1) / k * k + (k == 7 ? 3 : 0));  // k=7: not dividing Dmax
    if ((dmax + k - 1) / k > 1024) continue;
    EXPECT_EQ(oro_nms_gpu(d, o, k, dmax), fast) << "Oro map/reduce k=" << k << " Dmax=" << dmax;
  }
}

}  // namespace
#endif

TEST(NmsGpu, RandomAndClusteredSets) {
  SCENELAB_REQUIRE_GPU();
#ifdef SCENELAB_WITH_CUDA
  for (int n : {0, 1, 2, 63, 64, 65, 1000, 5000})
    for (bool clustered : {false, true}) {
      Options o;
      o.threshold = 0.45f;
      check_all(scenelab::test::make_box_set(n, uint32_t(31 * n + clustered), clustered, 1, 200), o,
                clustered ? "clustered IoU" : "random IoU");
      o.criterion = Criterion::OverCandidate;
      o.pixel_inclusive = true;
      check_all(scenelab::test::make_box_set(n, uint32_t(17 * n + clustered), clustered, 1, 200), o, "over-candidate +1");
    }
#endif
}

// Up to 12288 boxes are ranked by one counting kernel, larger sets by the radix sort: both paths,
// at the boundary, with many equal scores (ties broken by index) and a score threshold.
TEST(NmsGpu, LargeSetsBothRankPaths) {
  SCENELAB_REQUIRE_GPU();
#ifdef SCENELAB_WITH_CUDA
  for (int n : {12288, 12289, 20000}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto d = scenelab::test::make_box_set(n, uint32_t(n), true, 1, 50);
    Options o;
    o.threshold = 0.5f;
    EXPECT_EQ(greedy_nms_gpu(d, o), greedy_nms(d, o));
    o.score_threshold = 0.3f;
    o.max_outputs = 700;
    EXPECT_EQ(greedy_nms_gpu(d, o), greedy_nms(d, o));
  }
#endif
}

TEST(NmsGpu, PerClassTopKScoreThreshold) {
  SCENELAB_REQUIRE_GPU();
#ifdef SCENELAB_WITH_CUDA
  auto d = scenelab::test::make_box_set(5000, 9, true, 5);
  Options o;
  o.per_class = true;
  check_all(d, o, "per class");
  o.max_outputs = 17;
  o.score_threshold = 0.3f;
  EXPECT_EQ(greedy_nms_gpu(d, o), greedy_nms(d, o));
  EXPECT_EQ(cluster_nms_gpu(d, o), greedy_nms(d, o));
#endif
}

TEST(NmsGpu, AdversarialSets) {
  SCENELAB_REQUIRE_GPU();
#ifdef SCENELAB_WITH_CUDA
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Options o;
  check_all(std::vector<Detection>(300, Detection{{10, 10, 50, 50}, 0.7f, 0}), o, "identical");
  std::vector<Detection> eq = scenelab::test::make_box_set(1000, 4, true);
  for (auto& x : eq) x.score = 0.5f;
  check_all(eq, o, "equal scores");
  std::vector<Detection> deg = scenelab::test::make_box_set(200, 5, true);
  for (size_t i = 0; i < deg.size(); i += 3) deg[i].box.x2 = deg[i].box.x1;        // zero area
  for (size_t i = 1; i < deg.size(); i += 3) std::swap(deg[i].box.y1, deg[i].box.y2);  // inverted
  check_all(deg, o, "zero-area and inverted");
  std::vector<Detection> huge = scenelab::test::make_box_set(200, 6, true);
  for (auto& x : huge) x.box = {x.box.x1 * 1e15f, x.box.y1 * 1e15f, x.box.x2 * 1e15f, x.box.y2 * 1e15f};
  check_all(huge, o, "huge coordinates");
  std::vector<Detection> odd = scenelab::test::make_box_set(500, 7, true);
  for (size_t i = 0; i < odd.size(); i += 7) odd[i].score = nan;
  for (size_t i = 3; i < odd.size(); i += 11) odd[i].score = inf;
  for (size_t i = 5; i < odd.size(); i += 13) odd[i].score = -inf;
  for (size_t i = 6; i < odd.size(); i += 17) odd[i].score = -0.f;
  for (size_t i = 8; i < odd.size(); i += 17) odd[i].score = 0.f;
  check_all(odd, o, "NaN/Inf/signed-zero scores");
#endif
}

#ifdef SCENELAB_WITH_CUDA
// The sparse exact greedy (GpuSparseNms) against the CPU's greedy: random, clustered and
// adversarial sets, every option set; a large clustered and a large uniform set against the
// CPU's sparse greedy (which equals the plain loop: tests/nms/nms_sparse_test.cpp).
TEST(NmsGpuSparse, EqualsGreedyOnEverySet) {
  SCENELAB_REQUIRE_GPU();
  // IoU at 0.5, 0.7, 0.45, 0.3 and 0.2 (probe points: 1, 1, 2, 3 and 4 an axis), 0.1 and 0 (the
  // cells covered), 1 (nothing suppresses); over-candidate; the +1 convention; per class, top-k.
  std::vector<Options> opts(12);
  const float thresholds[] = {0.5f, 0.f, 0.6f, 0.5f, 0.5f, 0.7f, 0.45f, 0.3f, 0.2f, 0.1f, 1.f, 0.45f};
  for (size_t i = 0; i < opts.size(); ++i) opts[i].threshold = thresholds[i];
  opts[2].criterion = Criterion::OverCandidate;
  opts[3].pixel_inclusive = true;
  opts[4].per_class = true, opts[4].max_outputs = 37, opts[4].score_threshold = 0.2f;
  opts[11].pixel_inclusive = true;
  for (int n : {0, 1, 2, 65, 3000, 20000})
    for (bool clustered : {false, true}) {
      const auto d = test::make_box_set(n, uint32_t(n) * 3 + 1, clustered, 3);
      for (const auto& o : opts)
        ASSERT_EQ(sparse_greedy_nms_gpu(d, o), greedy_nms(d, o)) << n << (clustered ? " clustered" : " random");
    }
  for (const auto& [name, d] : test::adversarial_sets())
    for (const auto& o : opts) ASSERT_EQ(sparse_greedy_nms_gpu(d, o), greedy_nms(d, o)) << name;
  for (bool clustered : {true, false}) {
    const auto d = test::make_box_set(300000, 77, clustered);
    for (float t : {0.5f, 0.3f}) {
      Options o;
      o.threshold = t;
      ASSERT_EQ(sparse_greedy_nms_gpu(d, o), greedy_nms_sparse(d, o)) << "300000 boxes, IoU > " << t;
    }
  }
  // The tuning never changes the result.
  const auto d = test::make_box_set(20000, 5, true);
  const auto want = greedy_nms(d, Options{});
  for (int lanes : {8, 32})
    for (int shift : {0, 1, 2, 3}) {
      GpuSparseNms nms(int(d.size()));
      nms.tune(lanes, shift);
      EXPECT_EQ(sparse_greedy_nms_gpu(d, Options{}, &nms), want) << lanes << " lanes, cell shift " << shift;
    }
  Options negative;
  negative.threshold = -0.1f;
  EXPECT_THROW(sparse_greedy_nms_gpu(test::make_box_set(10, 1, false), negative), Error);
}

// Batched: one sparse call over all images (groups: image x class) gives each image's own
// greedy result, empty images and per-image caps included.
TEST(NmsGpuSparse, BatchedEqualsEachImageAlone) {
  SCENELAB_REQUIRE_GPU();
  std::vector<std::vector<Detection>> images;
  for (int b = 0; b < 6; ++b) images.push_back(test::make_box_set(b == 2 ? 0 : 1500 + 400 * b, 90u + uint32_t(b), b % 2, 2));
  for (bool per_class : {false, true})
    for (int cap : {-1, 25}) {
      Options o;
      o.per_class = per_class;
      o.max_outputs = cap;
      const auto got = batched_greedy_nms_gpu(images, o);
      ASSERT_EQ(got.size(), images.size());
      for (size_t b = 0; b < images.size(); ++b) EXPECT_EQ(got[b], greedy_nms(images[b], o)) << "image " << b;
    }
}

// batched_nms_on_device (the public call on device memory, (B, N, 4) boxes): one call, each image
// what the CPU's batched greedy gives for it, with valid counts (0, some, all), NaN scores,
// classes and per-image caps; the dense path (few boxes in all) and the sparse one (more than
// 30,000), the indices in device memory, the counts returned. A class out of range is refused.
TEST(NmsGpu, BatchedOnDeviceEqualsEachImage) {
  SCENELAB_REQUIRE_GPU();
  for (const auto& [batch, n] : {std::pair<int, int>{5, 997}, std::pair<int, int>{4, 9001}}) {
    std::vector<float> boxes, scores;
    std::vector<int64_t> classes;
    for (int b = 0; b < batch; ++b)
      for (const auto& x : test::make_box_set(n, 300u + uint32_t(b), b % 2 == 0, 3)) {
        boxes.insert(boxes.end(), {x.box.x1, x.box.y1, x.box.x2, x.box.y2});
        scores.push_back(x.score);
        classes.push_back(x.cls);
      }
    scores[7] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<int64_t> valid = {n, 0, n / 3, n - 1, n}, valid_b(valid.begin(), valid.begin() + batch);
    DeviceBuffer db(boxes.size() * sizeof(float)), ds(scores.size() * sizeof(float)),
        dc(classes.size() * sizeof(int64_t)), dk(scores.size() * sizeof(int64_t));
    SL_CUDA_CHECK(cudaMemcpy(db.get(), boxes.data(), boxes.size() * sizeof(float), cudaMemcpyHostToDevice), "up");
    SL_CUDA_CHECK(cudaMemcpy(ds.get(), scores.data(), scores.size() * sizeof(float), cudaMemcpyHostToDevice), "up");
    SL_CUDA_CHECK(cudaMemcpy(dc.get(), classes.data(), classes.size() * sizeof(int64_t), cudaMemcpyHostToDevice), "up");
    for (bool per_class : {false, true})
      for (int cap : {-1, 20}) {
        SCOPED_TRACE(std::to_string(batch) + " x " + std::to_string(n) + (per_class ? ", per class" : "") +
                     ", cap " + std::to_string(cap));
        Options o;
        o.per_class = per_class;
        o.max_outputs = cap;
        const auto want = batched_greedy_nms(boxes.data(), scores.data(), per_class ? classes.data() : nullptr,
                                             valid_b.data(), batch, n, o);
        SL_CUDA_CHECK(cudaMemset(dk.get(), 0xff, scores.size() * sizeof(int64_t)), "poison");
        const std::vector<int> counts =
            batched_nms_on_device(db.get<float>(), ds.get<float>(), per_class ? dc.get<int64_t>() : nullptr,
                                  valid_b.data(), batch, n, o, dk.get<int64_t>());
        std::vector<int64_t> got(scores.size());
        SL_CUDA_CHECK(cudaMemcpy(got.data(), dk.get(), got.size() * sizeof(int64_t), cudaMemcpyDeviceToHost), "down");
        ASSERT_EQ(counts.size(), size_t(batch));
        for (int b = 0; b < batch; ++b) {
          ASSERT_EQ(counts[size_t(b)], int(want[size_t(b)].size())) << "image " << b;
          for (int k = 0; k < counts[size_t(b)]; ++k)
            ASSERT_EQ(got[size_t(b) * n + size_t(k)], want[size_t(b)][size_t(k)]) << "image " << b << " kept " << k;
        }
      }
    std::vector<int64_t> out_of_range = classes;
    out_of_range[3] = -1;
    SL_CUDA_CHECK(cudaMemcpy(dc.get(), out_of_range.data(), classes.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
                  "up");
    Options o;
    o.per_class = true;
    EXPECT_THROW(batched_nms_on_device(db.get<float>(), ds.get<float>(), dc.get<int64_t>(), nullptr, batch, n, o,
                                       dk.get<int64_t>()),
                 Error);
  }
}

TEST(NmsGpu, CapacityAndPartitionErrorsAreClear) {
  SCENELAB_REQUIRE_GPU();
  GpuNms nms(10);
  DeviceBoxes in;
  in.n = 20;
  try {
    nms.greedy(in, Options{}, nullptr, nullptr, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the reserved capacity 10"), std::string::npos) << e.what();
  }
  nms.reserve_oro(4096);
  in.n = 100;
  try {
    nms.oro(in, Options{}, 2, nullptr, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use k >= 4"), std::string::npos) << e.what();
  }
  in.n = 5000;
  EXPECT_THROW(nms.oro(in, Options{}, 8, nullptr, nullptr), Error);  // n above Dmax
}
#endif

// The scan kernel's shared-memory limit belongs to the kernel, not to a GpuNms: a smaller
// instance reserved after a larger one must not lower it under the larger one's launches (it
// did: "scan_kernel: invalid argument" when two pipeline workers' detection heads had grown to
// different capacities).
TEST(NmsGpu, InstancesOfDifferentCapacitiesRunInAnyOrder) {
  SCENELAB_REQUIRE_GPU();
#ifdef SCENELAB_WITH_CUDA
  const auto big = scenelab::test::make_box_set(20000, 3, true, 1, 50);
  const auto small = scenelab::test::make_box_set(100, 4, true, 1, 50);
  Options o;
  o.threshold = 0.5f;
  CudaStream s;
  auto on_device = [&](const std::vector<Detection>& d, DeviceBuffer& b, DeviceBuffer& sc) {
    std::vector<float4> bx;
    std::vector<float> scores;
    for (const auto& x : d) bx.push_back(make_float4(x.box.x1, x.box.y1, x.box.x2, x.box.y2)), scores.push_back(x.score);
    b.resize(bx.size() * sizeof(float4));
    sc.resize(scores.size() * sizeof(float));
    EXPECT_NO_THROW(upload_now(b.get(), bx.data(), bx.size() * sizeof(float4), "boxes"));
    EXPECT_NO_THROW(upload_now(sc.get(), scores.data(), scores.size() * sizeof(float), "scores"));
    return DeviceBoxes{b.get<float4>(), sc.get<float>(), nullptr, int(d.size())};
  };
  DeviceBuffer bb, bs, sb, ss, keep(20000 * sizeof(int)), count(sizeof(int));
  const DeviceBoxes in_big = on_device(big, bb, bs), in_small = on_device(small, sb, ss);
  GpuNms large(20000);
  GpuNms little(100);  // reserved after the large one
  for (int round = 0; round < 2; ++round) {
    for (const auto* in : {&in_big, &in_small}) {
      GpuNms& nms = in == &in_big ? large : little;
      ASSERT_NO_THROW(nms.greedy(*in, o, keep.get<int>(), count.get<int>(), s.get()));
      int kept = 0;
      ASSERT_EQ(cudaMemcpyAsync(&kept, count.get(), sizeof(int), cudaMemcpyDeviceToHost, s.get()), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
      std::vector<int> got(static_cast<size_t>(kept));
      ASSERT_EQ(cudaMemcpy(got.data(), keep.get(), got.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(got, greedy_nms(in == &in_big ? big : small, o)) << "round " << round;
    }
  }
#endif
}

// nms_on_device's greedy chooses dense or sparse by size and, between 8,192 and 30,000 boxes, by
// the sampled share of boxes no better box overlaps (GreedyChooser): that share within sampling
// error of Fast NMS's on the CPU (512 samples: about 0.02 standard error; bound 0.08), the
// sparse path for a spread-out set (60% survive) and the dense one for a clustered set (6%); the
// kept indices equal the CPU's greedy either way.
TEST(NmsGpu, OnDeviceChoosesThePathByDensity) {
  SCENELAB_REQUIRE_GPU();
#ifdef SCENELAB_WITH_CUDA
  CudaStream s;
  for (const auto& [n, clustered] : {std::pair<int, bool>{12000, false}, {12000, true}, {5000, false}, {40000, true}}) {
    SCOPED_TRACE(std::to_string(n) + (clustered ? " clustered" : " spread out"));
    const auto d = test::make_box_set(n, 5u, clustered);
    const Options o;
    std::vector<float> boxes, scores;
    for (const auto& x : d) {
      boxes.insert(boxes.end(), {x.box.x1, x.box.y1, x.box.x2, x.box.y2});
      scores.push_back(x.score);
    }
    DeviceBuffer db(boxes.size() * sizeof(float)), ds(scores.size() * sizeof(float)), dk(size_t(n) * sizeof(int64_t));
    SL_CUDA_CHECK(cudaMemcpy(db.get(), boxes.data(), boxes.size() * sizeof(float), cudaMemcpyHostToDevice), "up");
    SL_CUDA_CHECK(cudaMemcpy(ds.get(), scores.data(), scores.size() * sizeof(float), cudaMemcpyHostToDevice), "up");
    GreedyChooser path;
    const bool sparse = path.sparse(DeviceBoxes{db.get<float4>(), ds.get<float>(), nullptr, n}, o, s.get());
    if (n <= kDenseAlways || n > kDenseGreedyMax) {
      EXPECT_EQ(path.last_share(), -1.0);
      EXPECT_EQ(sparse, n > kDenseGreedyMax);
    } else {
      const double cpu = double(fast_nms(d, o).size()) / n;
      EXPECT_NEAR(path.last_share(), cpu, 0.08);
      EXPECT_EQ(sparse, !clustered) << "share " << path.last_share() << ", bar " << GreedyChooser::sparse_share_above(n);
    }
    SL_CUDA_CHECK(cudaMemset(dk.get(), 0xff, size_t(n) * sizeof(int64_t)), "poison");
    const int count = nms_on_device(db.get<float>(), ds.get<float>(), nullptr, n, o, Method::Greedy, dk.get<int64_t>());
    std::vector<int64_t> got(static_cast<size_t>(count));
    SL_CUDA_CHECK(cudaMemcpy(got.data(), dk.get(), got.size() * sizeof(int64_t), cudaMemcpyDeviceToHost), "down");
    const auto want = greedy_nms_auto(d, o);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(got[k], want[k]) << "kept " << k;
  }
#endif
}
