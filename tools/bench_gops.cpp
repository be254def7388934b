// bench_gops: throughput of the paper's networks by the paper's metric (GOp = 2 x MACs of the
// conv layers, feature extraction and classifier). For each network and size: median forward
// time over --runs runs after --warmup runs, GOp/s, and a per-layer breakdown.
//   bench_gops [--nets reference,multiscale] [--sizes 320x240,640x480,1920x1080]
//              [--runs 7] [--warmup 2] [--threads N] [--layers] [--model FILE.h5]
// Without --model the networks get deterministic random weights (speed does not depend on them).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "engine/graph.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#endif
#include "tools/cli.h"
#include "weights/default_model.h"
#include "weights/model_file.h"

using namespace scenelab;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string t;
  while (std::getline(ss, t, ',')) out.push_back(t);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Cli cli(argc, argv, {"nets", "sizes", "runs", "warmup", "threads", "device", "classes", "model",
                         "conv", "precision"},
            {"layers", "help"});
    if (cli.has("help")) {
      std::puts("usage: bench_gops [--nets reference,multiscale] [--sizes 320x240,...] "
                "[--runs N] [--warmup N] [--threads N] [--layers]");
      return 0;
    }
    const int runs = std::max(1, cli.get_int("runs", 7));
    const int warmup = std::max(0, cli.get_int("warmup", 2));
    auto backend = make_backend(cli.get("device", "cpu"), cli.get_int("threads", 0), cuda_options(cli));
#ifdef SCENELAB_WITH_CUDA
    // GPU runs are timed with CUDA events on the backend's stream (made only for a GPU backend).
    std::unique_ptr<CudaEvent> e0, e1;
    if (backend->cuda()) e0 = std::make_unique<CudaEvent>(), e1 = std::make_unique<CudaEvent>();
#endif
    std::printf("# bench_gops on %s, median of %d runs after %d warm-up\n",
                backend->describe().c_str(), runs, warmup);
    std::printf("| network | size | GOp | median ms | GOp/s |\n|---|---|---|---|---|\n");
    std::fflush(stdout);
    std::vector<std::string> layer_reports;
    const std::vector<std::string> nets =
        cli.has("model") ? std::vector<std::string>{cli.get("model")}
                         : split(cli.get("nets", "reference,multiscale"));
    for (const auto& net : nets) {
      Model model = cli.has("model") ? read_model(net)
                                     : make_random_model(net, cli.get_int("classes", 8), 1);
      Graph g(model);
      for (const auto& sz : split(cli.get("sizes", "320x240,640x480,1920x1080"))) {
        auto [w, h] = parse_size(sz);
        g.plan(1, h, w, *backend);
        Tensor x(Shape(1, 3, h, w));
        std::mt19937 rng(7);
        for (size_t i = 0; i < x.numel(); ++i) x[i] = float(rng() % 256) / 255.f;
        g.set_profiling(cli.has("layers"));
        for (int i = 0; i < warmup; ++i) g.run(x.view());
        std::vector<double> ms;
        std::map<std::string, std::vector<double>> layer_ms;
        backend->synchronize();
        for (int i = 0; i < runs; ++i) {
#ifdef SCENELAB_WITH_CUDA
          if (const CudaContext* ctx = backend->cuda(); ctx && !cli.has("layers")) {
            SL_CUDA_CHECK(cudaEventRecord(e0->get(), ctx->stream), "bench");
            g.run(x.view());
            SL_CUDA_CHECK(cudaEventRecord(e1->get(), ctx->stream), "bench");
            SL_CUDA_CHECK(cudaEventSynchronize(e1->get()), "bench");
            float t = 0;
            SL_CUDA_CHECK(cudaEventElapsedTime(&t, e0->get(), e1->get()), "bench");
            ms.push_back(t);
            continue;
          }
#endif
          auto t0 = std::chrono::steady_clock::now();
          g.run(x.view());
          backend->synchronize();
          ms.push_back(std::chrono::duration<double, std::milli>(
                           std::chrono::steady_clock::now() - t0)
                           .count());
          for (const auto& s : g.stats()) layer_ms[s.name].push_back(s.time_ms);
        }
        const double med = median(ms), gop = g.total_ops() * 1e-9;
        std::printf("| %s | %s | %.2f | %.1f | %.1f |\n", net.c_str(), sz.c_str(), gop, med,
                    gop / (med * 1e-3));
        std::fflush(stdout);
        if (cli.has("layers")) {
          std::ostringstream os;
          os << "\n## " << net << " " << sz << " per layer (median ms)\n"
             << "| layer | type | output | GOp | ms | GOp/s |\n|---|---|---|---|---|---|\n";
          for (const auto& s : g.stats()) {
            double lm = median(layer_ms[s.name]);
            if (lm < 0.05 && s.ops == 0) continue;  // fused or negligible
            char buf[256];
            std::snprintf(buf, sizeof buf, "| %s | %s | %s | %.3f | %.2f | %s |\n",
                          s.name.c_str(), s.type.c_str(), s.out.str().c_str(), s.ops * 1e-9, lm,
                          s.ops > 0 && lm > 0 ? std::to_string(int(s.ops * 1e-6 / lm)).c_str()
                                              : "");
            os << buf;
          }
          layer_reports.push_back(os.str());
        }
      }
    }
    for (const auto& r : layer_reports) std::printf("%s", r.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gops: %s\n", e.what());
    return 1;
  }
}
