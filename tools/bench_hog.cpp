// bench_hog: the HOG pedestrian detector (weights/hog-people.h5 through job/pyramid_detector.h)
// on frames of several sizes, end to end from the 8-bit image to the fused boxes, every level of
// the 1.05 pyramid. Median of --runs after --warmup runs. On a GPU the frame sits in page-locked
// memory (Backend::allocate_host, as a streaming pipeline holds it); "ms" brackets each detect()
// by CUDA events on the detector's stream (the upload inside), "device ms" is the detector's own
// measure from the uploaded image to the fused boxes in host memory (PyramidTimes::device_ms,
// CUDA events). Then one profiled run gives milliseconds per stage (layer type, summed over the
// levels; profiling waits after each layer, so these add up to more than the run).
// Frames: --image FILE resized to each size (bilinear); by default a CamVid val frame when
// ../shared is beside the working directory, else a synthetic pattern.
//   bench_hog [--device cpu|cuda] [--threads N] [--sizes 640x480,1920x1080,3840x2160]
//             [--runs 10] [--warmup 2] [--image FILE] [--model FILE] [--fusion greedy] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "engine/backend.h"
#include "engine/image_io.h"
#include "job/pyramid_detector.h"
#include "engine/resize_linear.h"
#include "tools/cli.h"
#include "weights/model_file.h"
#include "weights/model_locator.h"
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include "engine/cuda_backend.h"
#include "core/cuda_check.h"
#endif

using namespace scenelab;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Image8 resized(const Image8& src, int w, int h) {
  Image8 out{w, h, src.channels, std::vector<uint8_t>(size_t(w) * h * size_t(src.channels))};
  for (int y = 0; y < h; ++y) {
    const LinearTap ty = linear_tap(y, src.height, h);
    for (int x = 0; x < w; ++x) {
      const LinearTap tx = linear_tap(x, src.width, w);
      for (int c = 0; c < src.channels; ++c)
        out.pixels[(size_t(y) * w + x) * size_t(src.channels) + size_t(c)] =
            linear_sample(src.pixels.data(), src.width, src.channels, c, ty, tx);
    }
  }
  return out;
}

// Times one detect() in milliseconds: CUDA events on a GPU backend, the steady clock on the CPU.
class Timer {
 public:
  explicit Timer(const Backend& b) : backend_(b) {
#ifdef SCENELAB_WITH_CUDA
    if (b.cuda()) {
      SL_CUDA_CHECK(cudaEventCreate(&start_), "bench_hog");
      SL_CUDA_CHECK(cudaEventCreate(&stop_), "bench_hog");
    }
#endif
  }
  ~Timer() {
#ifdef SCENELAB_WITH_CUDA
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
#endif
  }
  template <typename F>
  double time(F&& f) {
#ifdef SCENELAB_WITH_CUDA
    if (const CudaContext* ctx = backend_.cuda()) {
      SL_CUDA_CHECK(cudaEventRecord(start_, ctx->stream), "bench_hog");
      f();
      SL_CUDA_CHECK(cudaEventRecord(stop_, ctx->stream), "bench_hog");
      SL_CUDA_CHECK(cudaEventSynchronize(stop_), "bench_hog");
      float ms = 0;
      SL_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_), "bench_hog");
      return ms;
    }
#endif
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  const Backend& backend_;
#ifdef SCENELAB_WITH_CUDA
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
#endif
};

std::string default_image() {
  for (const char* p : {"../shared/data/camvid/val/images/0016E5_07959.jpg",
                        "../../shared/data/camvid/val/images/0016E5_07959.jpg"})
    if (std::ifstream(p).good()) return p;
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Cli cli(argc, argv, {"device", "threads", "sizes", "runs", "warmup", "image", "model", "fusion", "json"},
            {"help"});
    if (cli.has("help")) {
      std::puts("usage: bench_hog [--device cpu|cuda] [--threads N] [--sizes WxH,..] [--runs N] "
                "[--warmup N] [--image FILE] [--model FILE] [--fusion F] [--json FILE]");
      return 0;
    }
    const std::string device = cli.get("device", "cpu");
    const int runs = cli.get_int("runs", 10), warmup = cli.get_int("warmup", 2);
    SL_REQUIRE(runs >= 1 && warmup >= 0, "--runs must be at least 1, --warmup at least 0");
    const Model model = read_model(cli.has("model") ? cli.get("model") : find_weights("hog-people.h5"));
    auto backend = make_backend(device, cli.get_int("threads", 0), CudaOptions{});
    PyramidDetector det(model, *backend, cli.has("fusion") ? "fusion=" + cli.get("fusion") : "");
    const std::string image_path = cli.has("image") ? cli.get("image") : default_image();
    Image8 base;
    if (!image_path.empty()) {
      base = load_image(image_path, 3);
    } else {  // no frame at hand: a smooth synthetic one
      base = Image8{640, 480, 3, std::vector<uint8_t>(640 * 480 * 3)};
      for (size_t i = 0; i < base.pixels.size(); ++i) base.pixels[i] = uint8_t((i * 2654435761u) >> 27);
    }
    std::vector<std::pair<int, int>> sizes;
    std::stringstream ss(cli.get("sizes", "640x480,1920x1080,3840x2160"));
    for (std::string item; std::getline(ss, item, ',');) sizes.push_back(parse_size(item));
    std::printf("# bench_hog: %s, model %s, fusion %s, frame %s, median of %d runs after %d\n",
                backend->describe().c_str(), model.name.c_str(), fusion_name(det.options().fusion),
                image_path.empty() ? "synthetic" : image_path.c_str(), runs, warmup);
    std::printf("| size | levels | windows | hits | boxes | ms (median) | device ms (median) | frames/s | fused on | stages (ms, one profiled run) |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    std::ostringstream js;
    js << "[";
    for (size_t k = 0; k < sizes.size(); ++k) {
      const auto [w, h] = sizes[k];
      const Image8 frame = resized(base, w, h);
      const BackendMemory pinned = backend->allocate_host(frame.pixels.size());
      uint8_t* px = static_cast<uint8_t*>(pinned.get());
      std::copy(frame.pixels.begin(), frame.pixels.end(), px);
      Timer timer(*backend);
      std::vector<double> ms, dev_ms;
      size_t boxes = 0;
      PyramidTimes t;
      for (int r = 0; r < warmup + runs; ++r) {
        const double v = timer.time([&] { boxes = det.detect(px, h, w, 3, &t).size(); });
        if (r >= warmup) ms.push_back(v), dev_ms.push_back(t.device_ms);
      }
      const bool on_device = t.on_device;
      const size_t hits = det.hits(px, h, w, 3).size();
      size_t windows = 0;
      for (double s : det.level_scales(h, w)) {
        const int lw = int(std::nearbyint(w / s)), lh = int(std::nearbyint(h / s));
        if (lw >= det.options().window_w && lh >= det.options().window_h)
          windows += size_t((lw - det.options().window_w) / 8 + 1) * size_t((lh - det.options().window_h) / 8 + 1);
      }
      det.set_profiling(true);
      det.detect(px, h, w, 3, &t);
      det.set_profiling(false);
      std::string stages;
      for (const auto& [type, v] : det.stage_ms()) {
        stages += str_cat(stages.empty() ? "" : ", ", type, " ", v);
      }
      const double med = median(ms), dev = median(dev_ms);
      std::printf("| %dx%d | %d | %zu | %zu | %zu | %.3f | %.3f | %.1f | %s | %s; host after %.3f |\n", w, h, t.levels,
                  windows, hits, boxes, med, dev, 1000.0 / med, on_device ? "device" : "host", stages.c_str(),
                  t.fuse_ms);
      js << (k ? "," : "") << "\n  {\"width\": " << w << ", \"height\": " << h << ", \"levels\": " << t.levels
         << ", \"hits\": " << hits << ", \"boxes\": " << boxes << ", \"median_ms\": " << med
         << ", \"device_median_ms\": " << dev << ", \"fused_on_device\": " << (on_device ? "true" : "false") << "}";
      std::fflush(stdout);
    }
    js << "\n]\n";
    if (cli.has("json")) {
      std::ofstream f(cli.get("json"));
      f << js.str();
      SL_REQUIRE(f.good(), cli.get("json"), ": cannot write");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_hog: %s\n", e.what());
    return 1;
  }
}
