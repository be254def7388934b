// JPEG decoding on the GPU (engine/jpeg_gpu.h, nvJPEG's hardware decoder; label gpu; skipped with a
// message where the decoder is not available): a batch of baseline JPEGs (4:2:0 and 4:4:4, an odd
// size, the output poisoned first) decodes close to libjpeg-turbo's pixels (another IDCT and chroma
// upsampling: mean |difference| and the largest bounded below; seen on the H100: 4:4:4 equal,
// 4:2:0 within 2 levels, mean 0.1); the decoder works on after a corrupt stream; the pipeline
// with gpu_decode labels every good file, one cut short fails alone by name, PNG and progressive
// files among them decode on the CPU, and its labels do not depend on the batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "engine/error.h"
#include "engine/file_io.h"
#include "engine/image_io.h"
#include "engine/jpeg_gpu.h"
#include "engine/pipeline.h"
#include "tests/gpu_skip.h"
#include "tests/jpeg_writer.h"
#include "weights/default_model.h"

#ifdef SCENELAB_WITH_CUDA
#include "kernels/cuda_check.h"
#endif

using namespace scenelab;
namespace fs = std::filesystem;

namespace {

#define SCENELAB_REQUIRE_GPU_JPEG()                                                                  \
  do {                                                                                               \
    SCENELAB_REQUIRE_GPU();                                                                          \
    if (!GpuJpegDecoder::available())                                                                \
      GTEST_SKIP() << "nvJPEG's hardware decoder is not available (no libnvjpeg.so.13, no JPEG "     \
                      "engine, or a build without nvjpeg.h): GPU JPEG test skipped";                 \
  } while (0)

// A street-like picture: smooth gradients, edges between flat regions, mild noise.
Image8 scene(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  Image8 img{w, h, 3, std::vector<uint8_t>(size_t(w) * h * 3)};
  const int split = h / 3 + int(seed % 7);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 3; ++k) {
        int v = y < split ? 150 + 30 * k - y : ((x / 17 + y / 13) % 3) * 60 + 20 * k + x / 4;
        v += int(rng() % 7) - 3;
        img.pixels[(size_t(y) * w + x) * 3 + k] = uint8_t(std::clamp(v, 0, 255));
      }
  return img;
}

}  // namespace

TEST(JpegGpu, BatchDecodesCloseToLibjpegTurbo) {
  SCENELAB_REQUIRE_GPU_JPEG();
#ifdef SCENELAB_WITH_CUDA
  const fs::path dir = fs::path(::testing::TempDir()) / "scenelab_jpeg_gpu";
  fs::create_directories(dir);
  auto backend = make_backend("cuda", 0);
  GpuJpegDecoder dec(*backend);
  const int w = 97, h = 61;
  for (bool full : {false, true}) {
    SCOPED_TRACE(full ? "4:4:4" : "4:2:0");
    std::vector<std::vector<uint8_t>> files;
    for (int i = 0; i < 3; ++i) {
      const std::string p = (dir / ("s" + std::to_string(i) + (full ? "f" : "") + ".jpg")).string();
      test::write_jpeg(p, scene(w, h, uint32_t(i)), JCS_RGB, false, 90, full);
      files.push_back(read_file(p));
    }
    std::vector<const std::vector<uint8_t>*> ptrs;
    for (const auto& f : files) ptrs.push_back(&f);
    const size_t frame = size_t(w) * h * 3;
    DeviceBuffer out(files.size() * frame);
    ASSERT_EQ(cudaMemset(out.get(), 0xAB, out.bytes()), cudaSuccess);  // poison
    std::vector<uint8_t*> outs;
    for (size_t i = 0; i < files.size(); ++i) outs.push_back(out.get<uint8_t>() + i * frame);
    dec.decode(ptrs, h, w, outs);
    backend->synchronize();
    std::vector<uint8_t> got(out.bytes());
    ASSERT_EQ(cudaMemcpy(got.data(), out.get(), got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < files.size(); ++i) {
      const Image8 want = decode_image(files[i].data(), files[i].size(), "cpu", 3);
      double sum = 0;
      int worst = 0;
      for (size_t k = 0; k < frame; ++k) {
        const int d = std::abs(int(got[i * frame + k]) - int(want.pixels[k]));
        sum += d;
        worst = std::max(worst, d);
      }
      const double mean = sum / double(frame);
      std::printf("GPU JPEG %s frame %zu: mean |difference| %.3f, largest %d\n", full ? "4:4:4" : "4:2:0", i, mean, worst);
      EXPECT_LT(mean, 2.0) << "frame " << i;
      EXPECT_LE(worst, 48) << "frame " << i;
    }
  }
  // A corrupt stream given to the decoder directly (noise in its scan, cut short): refused, or (as
  // seen on the H100) decoded without an error - the pipeline keeps streams cut short from it
  // (decodable()) - and the decoder works on after it.
  std::vector<uint8_t> bad = read_file((dir / "s0.jpg").string());
  std::mt19937 rng(9);
  for (size_t k = bad.size() / 2; k < bad.size(); ++k) bad[k] = uint8_t(rng());
  bad.resize(bad.size() * 3 / 4);
  std::vector<uint8_t> good = read_file((dir / "s1.jpg").string());
  DeviceBuffer out(2 * size_t(w) * h * 3);
  std::vector<const std::vector<uint8_t>*> ptrs = {&good, &bad};
  bool threw = false;
  try {
    dec.decode(ptrs, h, w, {out.get<uint8_t>(), out.get<uint8_t>() + size_t(w) * h * 3});
    backend->synchronize();
  } catch (const Error&) {
    threw = true;
  }
  std::printf("corrupt stream in a batch: %s\n", threw ? "refused" : "decoded without an error");
  // The decoder works on after a refused batch.
  std::vector<const std::vector<uint8_t>*> one = {&good};
  dec.decode(one, h, w, {out.get<uint8_t>()});
  backend->synchronize();
#endif
}

TEST(JpegGpu, PipelineDecodesOnTheGpuAndABadFileFailsAlone) {
  SCENELAB_REQUIRE_GPU_JPEG();
  const fs::path dir = fs::path(::testing::TempDir()) / "scenelab_jpeg_gpu_pipeline";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int w = 97, h = 61;
  std::vector<std::string> files;
  for (int i = 0; i < 7; ++i) {
    const std::string p = (dir / ("f" + std::to_string(i) + ".jpg")).string();
    test::write_jpeg(p, scene(w, h, uint32_t(10 + i)), JCS_RGB, /*progressive=*/i == 5, 90);
    files.push_back(p);
  }
  const std::string png = (dir / "g.png").string();
  save_png(png, scene(w, h, 3));
  files.insert(files.begin() + 2, png);
  // f3: its scan replaced by noise and cut (the header still says baseline 97x61)
  {
    std::vector<uint8_t> b = read_file(files[4]);
    std::mt19937 rng(4);
    for (size_t k = b.size() / 2; k < b.size(); ++k) b[k] = uint8_t(rng());
    b.resize(b.size() * 3 / 4);
    write_file_atomic(files[4], b);
  }
  const Model m = make_random_model("reference", 5, 4);
  auto run = [&](bool gpu_decode, int batch, std::vector<std::string>* errors) {
    PipelineOptions o;
    o.device = "cuda";
    o.cuda.conv = "direct";
    o.batch = batch;
    o.pool_threads = 2;
    o.gpu_decode = gpu_decode;
    Pipeline p(m, o);
    EXPECT_EQ(p.gpu_decoding(), gpu_decode);
    FileSource src(files);
    std::vector<LabelMap> out(files.size());
    p.run(src, nullptr, [&](Frame& f) {
      if (!f.error.empty()) {
        if (errors) errors->push_back(f.error);
        return;
      }
      EXPECT_TRUE(f.jpeg.empty());
      out[f.index] = f.labels;
    });
    return out;
  };
  std::vector<std::string> errors;
  const auto gpu3 = run(true, 3, &errors);
  const auto gpu1 = run(true, 1, nullptr);
  const auto cpu = run(false, 3, nullptr);
  size_t same = 0, total = 0, labelled = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (gpu3[i].labels.empty()) continue;
    ++labelled;
    EXPECT_EQ(gpu3[i].labels, gpu1[i].labels) << files[i] << ": labels depend on the batch";
    ASSERT_EQ(gpu3[i].labels.size(), cpu[i].labels.size()) << files[i];
    for (size_t k = 0; k < gpu3[i].labels.size(); ++k) same += gpu3[i].labels[k] == cpu[i].labels[k];
    total += gpu3[i].labels.size();
  }
  // The file cut short (no EOI: the CPU's) fails by name, alone.
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("f3.jpg"), std::string::npos) << errors[0];
  EXPECT_EQ(labelled, files.size() - 1);
  EXPECT_GE(double(same), 0.98 * double(total)) << "GPU-decoded labels far from the CPU-decoded ones";
  std::printf("GPU-decoded pipeline: %zu of %zu files labelled, %zu errors, labels %.3f%% equal to CPU decoding\n",
              labelled, files.size(), errors.size(), 100.0 * double(same) / double(std::max<size_t>(1, total)));
}
