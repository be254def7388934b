// PNG rows made on the GPU (engine/png_rows_cuda.h, job/overlay_rows.h; label gpu): every
// byte equals the host's png_filter_rows of the same pixels (plain, 1-4 bytes a pixel, odd sizes,
// n = 3 frames, the output poisoned first) and of overlay_labels' overlay (alpha 0.5 and 0.3,
// labels past the palette); the pipeline's GPU workers return those rows for each frame, and
// encode_png_filtered of them is encode_png's file of the overlay.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "engine/image_io.h"
#include "job/labeler.h"
#include "job/overlay_rows.h"
#include "job/pipeline.h"
#include "engine/png_deflate.h"
#include "tests/gpu_skip.h"
#include "tests/job/pipeline_util.h"
#include "weights/default_model.h"

#ifdef SCENELAB_WITH_CUDA
#include "core/cuda_check.h"
#include "engine/png_rows_cuda.h"
#endif

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

// Smooth gradients with noise and flat patches: every filter wins some rows.
std::vector<uint8_t> test_pixels(int n, int h, int w, int bpp, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> px(size_t(n) * h * w * bpp);
  for (int f = 0; f < n; ++f)
    for (int y = 0; y < h; ++y) {
      const int kind = int(rng() % 4);  // per row: noise, horizontal ramp, vertical ramp, flat
      for (int x = 0; x < w; ++x)
        for (int k = 0; k < bpp; ++k) {
          int v = 0;
          if (kind == 0) v = int(rng() & 255);
          else if (kind == 1) v = 3 * x + 7 * k + int(rng() % 3);
          else if (kind == 2) v = 5 * y + 11 * k + int(rng() % 3);
          else v = 40 * k + f;
          px[((size_t(f) * h + y) * w + x) * bpp + k] = uint8_t(v);
        }
    }
  return px;
}

std::vector<uint8_t> cpu_rows(const uint8_t* px, int n, int h, int w, int bpp) {
  const size_t frame = size_t(h) * (1 + size_t(w) * bpp);
  std::vector<uint8_t> out(size_t(n) * frame);
  for (int f = 0; f < n; ++f)
    png_filter_rows(px + size_t(f) * h * w * bpp, size_t(w), size_t(h), size_t(bpp), out.data() + f * frame);
  return out;
}

}  // namespace

TEST(PngRowsGpu, EqualTheHostFilterForEveryPixelSize) {
  SCENELAB_REQUIRE_GPU();
#ifdef SCENELAB_WITH_CUDA
  const int sizes[][2] = {{1, 1}, {1, 5}, {7, 1}, {37, 5}, {97, 61}, {300, 3}};
  int types[5] = {0, 0, 0, 0, 0};
  for (int bpp = 1; bpp <= 4; ++bpp)
    for (const auto& sz : sizes) {
      const int w = sz[0], h = sz[1], n = 3;
      SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) + " bpp " + std::to_string(bpp));
      const std::vector<uint8_t> px = test_pixels(n, h, w, bpp, uint32_t(w * 131 + h * 7 + bpp));
      const std::vector<uint8_t> want = cpu_rows(px.data(), n, h, w, bpp);
      DeviceBuffer dpx(px.size()), dout(want.size());
      ASSERT_EQ(cudaMemcpy(dpx.get(), px.data(), px.size(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(dout.get(), 0xAB, want.size()), cudaSuccess);  // poison
      cuda::png_rows(dpx.get<uint8_t>(), n, h, w, bpp, dout.get<uint8_t>(), nullptr);
      std::vector<uint8_t> got(want.size());
      ASSERT_EQ(cudaMemcpy(got.data(), dout.get(), got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(got, want);
      const size_t row = 1 + size_t(w) * bpp;
      for (size_t r = 0; r < got.size(); r += row) types[got[r] % 5]++;
    }
  // The check means something only if the rows took every filter.
  for (int t = 1; t <= 4; ++t) EXPECT_GT(types[t], 0) << "filter type " << t << " never chosen";
#endif
}

TEST(OverlayRowsGpu, EqualTheHostOverlayFiltered) {
  SCENELAB_REQUIRE_GPU();
#ifdef SCENELAB_WITH_CUDA
  auto backend = make_backend("cuda", 0);
  const std::vector<std::array<uint8_t, 3>> palette = {{128, 64, 128}, {0, 0, 0}, {255, 255, 0}, {12, 200, 31}, {250, 3, 99}};
  for (float alpha : {0.5f, 0.3f}) {
    OverlayRows maker(*backend, palette, alpha);
    for (const auto& sz : {std::array<int, 2>{97, 61}, std::array<int, 2>{5, 3}}) {
      const int w = sz[0], h = sz[1], n = 3;
      SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) + " alpha " + std::to_string(alpha));
      const std::vector<uint8_t> px = test_pixels(n, h, w, 3, uint32_t(w + h));
      std::vector<uint8_t> lab(size_t(n) * h * w);
      std::mt19937 rng(7);
      for (auto& l : lab) l = rng() % 9 == 0 ? 255 : uint8_t(rng() % 7);  // some past the palette
      DeviceBuffer dpx(px.size()), dlab(lab.size());
      ASSERT_NO_THROW(upload_now(dpx.get(), px.data(), px.size(), "pixels"));  // read on the backend's stream
      ASSERT_NO_THROW(upload_now(dlab.get(), lab.data(), lab.size(), "labels"));
      const size_t fb = OverlayRows::frame_bytes(h, w);
      BackendMemory host = backend->allocate_host(size_t(n) * fb);
      std::memset(host.get(), 0xAB, size_t(n) * fb);  // poison
      maker.enqueue(dpx.get<uint8_t>(), dlab.get<uint8_t>(), n, h, w, static_cast<uint8_t*>(host.get()));
      backend->synchronize();
      for (int f = 0; f < n; ++f) {
        Image8 rgb{w, h, 3, std::vector<uint8_t>(px.begin() + f * h * w * 3, px.begin() + (f + 1) * h * w * 3)};
        LabelMap m{w, h, std::vector<uint8_t>(lab.begin() + f * h * w, lab.begin() + (f + 1) * h * w)};
        const Image8 over = overlay_labels(rgb, m, palette, alpha);
        const std::vector<uint8_t> want = cpu_rows(over.pixels.data(), 1, h, w, 3);
        const auto* got = static_cast<const uint8_t*>(host.get()) + f * fb;
        ASSERT_EQ(std::vector<uint8_t>(got, got + fb), want) << "frame " << f;
      }
    }
  }
#endif
}

TEST(OverlayRowsGpu, PipelineWorkersReturnTheOverlaysRows) {
  SCENELAB_REQUIRE_GPU();
  const fs::path dir = fs::path(::testing::TempDir()) / "scenelab_overlay_rows";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> files;
  const bool quick = scenelab_test_quick();  // three files (the odd size among them), batch 2
  for (int i = 0; i < 7; ++i) {
    if (quick && i != 0 && i != 4 && i != 6) continue;
    const int w = i == 4 ? 64 : 97, h = i == 4 ? 48 : 61;
    Image8 img{w, h, 3, test_pixels(1, h, w, 3, uint32_t(i))};
    files.push_back((dir / ("f" + std::to_string(i) + ".png")).string());
    save_png(files.back(), img);
  }
  const Model m = make_random_model("multiscale", 6, 5);
  for (int batch : scenelab_quick_or<int>({2}, {1, 3})) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    PipelineOptions o;
    o.device = "cuda";
    o.batch = batch;
    o.pool_threads = 2;
    o.overlay = PipelineOptions::Overlay{true, m.palette};
    Pipeline p(m, o);
    const size_t seen = test::run_files(p, files, [&](Frame& f) {
      const Image8 over = overlay_labels(f.image, f.labels, m.palette);
      std::vector<uint8_t> want(OverlayRows::frame_bytes(over.height, over.width));
      png_filter_rows(over.pixels.data(), size_t(over.width), size_t(over.height), 3, want.data());
      ASSERT_EQ(f.overlay_rows, want) << f.name;
      EXPECT_EQ(encode_png_filtered(f.overlay_rows.data(), over.width, over.height, 3), encode_png(over)) << f.name;
    });
    EXPECT_EQ(seen, files.size());
    // Off for the next run: no rows.
    p.set_overlay(PipelineOptions::Overlay{});
    FileSource again(files);
    p.run(again, nullptr, [&](Frame& f) { EXPECT_TRUE(f.overlay_rows.empty()); });
  }
}
