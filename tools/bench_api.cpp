// The C++ side of the Python overhead benchmark (tools/bench_python.py): the public API's
// Labeler::label from the caller's memory into the caller's memory, timed on the host (the call
// returns with the labels in place, so wall time is the caller's time), median of --runs.
//   bench_api --device cpu|cuda --precision fp32 --size 480x360 --batch 1 --runs 50 --warmup 5
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <scenelab/scenelab.h>

int main(int argc, char** argv) {
  std::string device = "auto", precision = "fp32", size = "480x360";
  int runs = 50, warmup = 5, batch = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--device") device = v;
    else if (k == "--precision") precision = v;
    else if (k == "--size") size = v;
    else if (k == "--runs") runs = std::atoi(v.c_str());
    else if (k == "--warmup") warmup = std::atoi(v.c_str());
    else if (k == "--batch") batch = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "bench_api: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  int w = 0, h = 0;
  if (std::sscanf(size.c_str(), "%dx%d", &w, &h) != 2 || w <= 0 || h <= 0 || runs <= 0 || batch <= 0) {
    std::fprintf(stderr, "bench_api: bad --size %s, --runs or --batch\n", size.c_str());
    return 2;
  }
  try {
    scenelab::api::ModelOptions o;
    o.device = device;
    o.precision = precision;
    scenelab::api::Labeler labeler(o);
    std::vector<uint8_t> rgb(size_t(batch) * h * w * 3), labels(size_t(batch) * h * w);
    std::mt19937 rng(1);
    for (auto& p : rgb) p = uint8_t(rng());
    for (int i = 0; i < warmup; ++i) labeler.label(rgb.data(), batch, h, w, labels.data());
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      labeler.label(rgb.data(), batch, h, w, labels.data());
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("{\"device\": \"%s\", \"median_ms\": %.6f, \"runs\": %d}\n", labeler.device().c_str(),
                ms[ms.size() / 2], runs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_api: %s\n", e.what());
    return 1;
  }
  return 0;
}
