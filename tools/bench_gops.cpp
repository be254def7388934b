// bench_gops: throughput of the paper's networks by the paper's metric (GOp = 2 x MACs of the
// conv layers, feature extraction and classifier). For each network and size: median forward
// time over --runs runs after --warmup runs, GOp/s, and a per-layer breakdown.
//   bench_gops [--nets reference,multiscale] [--sizes 320x240,640x480,1920x1080]
//              [--runs 7] [--warmup 2] [--threads N] [--layers] [--model FILE.h5]
//              [--device cpu|cuda] [--conv ALGO] [--precision fp32|tf32|fp16|bf16] [--peak]
// Without --model the networks get deterministic random weights (speed does not depend on them).
// --peak: the paper's peak mode, one big convolution layer alone (64 -> 256 channels, 7x7, the
// size given being its input), so GOp/s is that of the convolution only.
// On the GPU the table also gives the fraction of the GEMM ceiling: the throughput of one large
// GEMM (8192^3) at the same precision, measured here in the same run; and, where NVML reads the
// board's energy counter (tools/energy_meter.h) and --power-s SECONDS is given (2 or more is
// sensible), the average board power while the pass is replayed back to back for that long,
// GOp/s per watt and mJ per image.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "engine/graph.h"
#include "engine/model.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "core/cuda_timer.h"
#include "tools/energy_meter.h"
// The timed passes are one NVTX range, "timed", so that a profiler can take only them
// (ncu --nvtx --nvtx-include "timed/": tools/gpu_check.sh BENCH=ncu). Header-only.
#include <nvtx3/nvToolsExt.h>
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

// The paper's peak mode: one convolution layer of the third stage, alone.
Model peak_model() {
  Model m;
  m.graph = GraphDesc::parse("input x channels=64\nc = conv2d(x) out=256 k=7\noutput c\n");
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (const auto& r : required_params(m.graph)) {
    Tensor t(param_shape(r.dims));
    for (size_t i = 0; i < t.numel(); ++i) t[i] = u(rng);
    m.params.emplace(r.dataset, std::move(t));
  }
  return m;
}

#ifdef SCENELAB_WITH_CUDA
// TOp/s of one 8192^3 GEMM at the backend's precision (cuBLAS, median of 5 after a warm-up).
double gemm_ceiling(const CudaContext& ctx) {
  const int n = 8192;
  const bool fp16 = ctx.precision == Precision::FP16;
  const size_t elem = fp16 ? 2 : 4;
  DeviceBuffer a(size_t(n) * n * elem), b(size_t(n) * n * elem), c(size_t(n) * n * sizeof(float));
  SL_CUDA_CHECK(cudaMemsetAsync(a.get(), 0, a.bytes(), ctx.stream), "ceiling");
  SL_CUDA_CHECK(cudaMemsetAsync(b.get(), 0, b.bytes(), ctx.stream), "ceiling");
  const float one = 1.f, zero = 0.f;
  auto gemm = [&] {
    if (fp16)
      SL_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.get(),
                                   CUDA_R_16F, n, b.get(), CUDA_R_16F, n, &zero, c.get(),
                                   CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      "ceiling GEMM");
    else  // the handle's math mode: tensor cores under tf32 only
      SL_CUBLAS_CHECK(cublasSgemm(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one,
                                  a.get<float>(), n, b.get<float>(), n, &zero, c.get<float>(), n),
                      "ceiling GEMM");
  };
  StreamTimer timer;
  gemm();
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) t.push_back(timer.time(ctx.stream, gemm, "ceiling"));
  return 2.0 * n * n * double(n) / (median(t) * 1e-3) * 1e-12;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  try {
    Cli cli(argc, argv, {"nets", "sizes", "runs", "warmup", "threads", "device", "classes", "model",
                         "conv", "precision", "conv-workspace", "batch", "power-s"},
            {"layers", "peak", "help"});
    if (cli.has("help")) {
      std::puts("usage: bench_gops [--nets reference,multiscale] [--sizes 320x240,...] "
                "[--runs N] [--warmup N] [--threads N] [--batch N] [--layers] [--peak] [--device cpu|cuda]\n"
                "                  [--conv direct|gemm|gemm2s|cudnn|split|winograd|auto] [--precision fp32|tf32|fp16|bf16]\n"
                "                  [--conv-workspace MiB] [--model FILE.h5] [--power-s SECONDS]");
      return 0;
    }
    const int runs = std::max(1, cli.get_int("runs", 7));
    const int warmup = std::max(0, cli.get_int("warmup", 2));
    const int batch = cli.get_int("batch", 1);
    SL_REQUIRE(batch >= 1, "--batch must be >= 1");
    auto backend = make_backend(cli.get("device", "cpu"), cli.get_int("threads", 0), cuda_options(cli));
#ifdef SCENELAB_WITH_CUDA
    // GPU runs are timed with CUDA events on the backend's stream (made only for a GPU backend).
    std::unique_ptr<StreamTimer> timer;
    if (backend->cuda()) timer = std::make_unique<StreamTimer>();
#endif
    double ceiling = 0;  // TOp/s of a large GEMM at this precision (GPU only)
    const double power_s = cli.get_double("power-s", 0.0);
    bool power = false;
#ifdef SCENELAB_WITH_CUDA
    if (const CudaContext* ctx = backend->cuda()) ceiling = gemm_ceiling(*ctx);
    std::unique_ptr<tools::EnergyMeter> meter;
    if (backend->cuda() && !cli.has("layers") && power_s > 0) {
      int dev = 0;
      SL_CUDA_CHECK(cudaGetDevice(&dev), "bench_gops");
      meter = std::make_unique<tools::EnergyMeter>(dev);
      power = meter->ok();
      if (!power) std::fprintf(stderr, "bench_gops: no board power figures: %s\n", meter->why().c_str());
    }
#endif
    std::printf("# bench_gops on %s, median of %d runs after %d warm-up", backend->describe().c_str(),
                runs, warmup);
    if (ceiling > 0)
      std::printf("; GEMM ceiling (cuBLAS 8192^3, same precision) %.1f TOp/s", ceiling);
    const bool events = backend->cuda() != nullptr && !cli.has("layers");
    std::printf("%s%s; batch %d\n| network | size | GOp | median ms | GOp/s |%s%s images/s |%s\n|---|---|---|---|---|%s%s---|%s\n",
                events ? "; GPU: CUDA events, the pass on the device-resident image (median ms), "
                         "and with the image's upload from host memory" : "",
                power ? "; board power by NVML's energy counter over the pass replayed back to back" : "",
                batch, ceiling > 0 ? " of ceiling |" : "", events ? " with upload ms |" : "",
                power ? " board W | GOp/s/W | mJ/image |" : "", ceiling > 0 ? "---|" : "", events ? "---|" : "",
                power ? "---|---|---|" : "");
    std::fflush(stdout);
    std::vector<std::string> layer_reports;
    const std::vector<std::string> nets =
        cli.has("peak")    ? std::vector<std::string>{"peak-conv-64x256-7x7"}
        : cli.has("model") ? std::vector<std::string>{cli.get("model")}
                           : split(cli.get("nets", "reference,multiscale"));
    for (const auto& net : nets) {
      Model model = cli.has("peak")    ? peak_model()
                    : cli.has("model") ? read_model(net)
                                       : make_random_model(net, cli.get_int("classes", 8), 1);
      const int in_channels = model.graph.input_channels;
      Graph g(model);
      for (const auto& sz : split(cli.get("sizes", "320x240,640x480,1920x1080"))) {
        auto [w, h] = parse_size(sz);
        g.plan(batch, h, w, *backend);
        Tensor x(Shape(batch, in_channels, h, w));
        std::mt19937 rng(7);
        for (size_t i = 0; i < x.numel(); ++i) x[i] = float(rng() % 256) / 255.f;
        g.set_profiling(cli.has("layers"));
        const bool gpu_events = backend->cuda() != nullptr && !cli.has("layers");
        for (int i = 0; i < std::max(warmup, gpu_events ? 1 : 0); ++i) g.run(x.view());
        std::vector<double> ms, ms_upload;
        std::map<std::string, std::vector<double>> layer_ms;
        backend->synchronize();
#ifdef SCENELAB_WITH_CUDA
        if (backend->cuda()) nvtxRangePushA("timed");
#endif
        for (int i = 0; i < runs; ++i) {
#ifdef SCENELAB_WITH_CUDA
          if (gpu_events) {
            // The pass on the device-resident input (as a peer times its network on a GPU
            // tensor), and separately the same with the image's upload from host memory.
            const CudaContext* ctx = backend->cuda();
            for (bool upload : {false, true}) {
              auto pass = [&] {
                if (upload)
                  g.run(x.view());
                else
                  g.run();
              };
              (upload ? ms_upload : ms).push_back(timer->time(ctx->stream, pass, "bench"));
            }
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
#ifdef SCENELAB_WITH_CUDA
        if (backend->cuda()) nvtxRangePop();
#endif
        const double med = median(ms), gop = g.total_ops() * 1e-9;
        std::printf("| %s | %s | %.2f | %.2f | %.1f |", net.c_str(), sz.c_str(), gop, med,
                    gop / (med * 1e-3));
        if (ceiling > 0) std::printf(" %.2f |", gop / (med * 1e-3) * 1e-3 / ceiling);
        if (!ms_upload.empty()) std::printf(" %.2f |", median(ms_upload));
        std::printf(" %.0f |", batch / (med * 1e-3));
#ifdef SCENELAB_WITH_CUDA
        if (power && gpu_events) {
          // The pass replayed back to back for power_s seconds (checked every 16 passes), the
          // board's energy counter read around it.
          backend->synchronize();
          const double mj0 = meter->millijoules();
          const auto t0 = std::chrono::steady_clock::now();
          long passes = 0;
          double secs = 0;
          do {
            for (int i = 0; i < 16; ++i) g.run();
            passes += 16;
            backend->synchronize();
            secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          } while (secs < power_s);
          const double joules = (meter->millijoules() - mj0) * 1e-3;
          if (joules > 0)
            std::printf(" %.0f | %.1f | %.2f |", joules / secs, gop * passes / joules,
                        joules * 1e3 / double(passes * batch));
          else
            std::printf(" n/a | n/a | n/a |");
        }
#endif
        std::printf("\n");
        std::fflush(stdout);
        if (cli.has("layers")) {
          std::ostringstream os;
          os << "\n## " << net << " " << sz << " per layer (median ms)\n"
             << "| layer | type | output | GOp | ms | GOp/s | how |\n|---|---|---|---|---|---|---|\n";
          for (const auto& s : g.stats()) {
            double lm = median(layer_ms[s.name]);
            if (lm < 0.05 && s.ops == 0) continue;  // fused or negligible
            char buf[256];
            std::snprintf(buf, sizeof buf, "| %s | %s | %s | %.3f | %.2f | %s | %s |\n",
                          s.name.c_str(), s.type.c_str(), s.out.str().c_str(), s.ops * 1e-9, lm,
                          s.ops > 0 && lm > 0 ? std::to_string(int(s.ops * 1e-6 / lm)).c_str()
                                              : "",
                          s.detail.c_str());
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
