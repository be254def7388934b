// bench_nms: NMS on clustered boxes in a 1920x1080 frame (about 20 candidates per object), each
// algorithm timed with CUDA events after warm-up (median of --runs), the CPU greedy reference
// beside it. --dump DIR writes the boxes, scores and our exact-greedy result per n for
// tools/peer_nms.py (torchvision.ops.nms on the same boxes).
//   bench_nms [--sizes 200,1000,3000,10000,30000,100000] [--runs 20] [--threshold 0.5] [--dump DIR]
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <random>
#include <sstream>

#include "nms/nms.h"
#include "nms/nms_cuda.h"
#include "nms/sliding_window.h"
#include "tools/cli.h"

using namespace scenelab;
using namespace scenelab::nms;

namespace {

std::vector<Detection> clustered_boxes(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  const int objects = std::max(1, n / 20);
  std::vector<Box> obj;
  for (int k = 0; k < objects; ++k) {
    float w = 24 + 180 * u(rng), h = 24 + 180 * u(rng);
    float x = (1920 - w) * u(rng), y = (1080 - h) * u(rng);
    obj.push_back({x, y, x + w, y + h});
  }
  std::vector<Detection> d;
  for (int i = 0; i < n; ++i) {
    const Box& c = obj[size_t(rng() % obj.size())];
    float w = c.x2 - c.x1, h = c.y2 - c.y1;
    float dx = (u(rng) - 0.5f) * 0.25f * w, dy = (u(rng) - 0.5f) * 0.25f * h;
    float s = 0.85f + 0.3f * u(rng);
    d.push_back({{c.x1 + dx, c.y1 + dy, c.x1 + dx + w * s, c.y1 + dy + h * s}, u(rng), 0});
  }
  return d;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The other kinds of set: "uniform" (boxes of 5-150 pixels anywhere in the frame) and "large"
// (the clustered set with one box in a thousand 400-1900 pixels wide: a few boxes over many).
std::vector<Detection> box_set(const std::string& kind, int n, uint32_t seed) {
  if (kind == "clustered") return clustered_boxes(n, seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  if (kind == "uniform") {
    std::vector<Detection> d;
    for (int i = 0; i < n; ++i) {
      const float w = 5 + 145 * u(rng), h = 5 + 145 * u(rng), x = (1920 - w) * u(rng), y = (1080 - h) * u(rng);
      d.push_back({{x, y, x + w, y + h}, u(rng), 0});
    }
    return d;
  }
  SL_REQUIRE(kind == "large", "bench_nms: set kinds are clustered, uniform, large; got '", kind, "'");
  std::vector<Detection> d = clustered_boxes(n, seed);
  for (size_t i = 0; i < d.size(); i += 1000) {
    const float w = 400 + 1500 * u(rng), h = 300 + 780 * u(rng), x = (1920 - w) * u(rng), y = (1080 - h) * u(rng);
    d[i].box = {x, y, x + w, y + h};
  }
  return d;
}

double ms_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The CPU: the sparse exact greedy (greedy_nms_sparse) against the plain loop (greedy_nms,
// where it takes under a minute: up to 30,000 boxes), the same indices checked; then batched
// images (batched_greedy_nms) against the images one after another.
int cpu_bench(const std::vector<int>& sizes, const std::vector<std::string>& kinds, int runs, const Options& o,
              int batch, int batch_n) {
  std::printf("# bench_nms --cpu: exact greedy NMS on the CPU, IoU > %.2f, median of %d runs\n", o.threshold, runs);
  std::printf("| set | n | kept | sparse ms | plain loop ms | same indices |\n|---|---|---|---|---|---|\n");
  int bad = 0;
  for (const auto& kind : kinds)
    for (int n : sizes) {
      const auto d = box_set(kind, n, uint32_t(n) + 7);
      std::vector<int> sparse, plain;
      std::vector<double> t;
      for (int r = 0; r < runs; ++r) t.push_back(ms_of([&] { sparse = greedy_nms_sparse(d, o); }));
      std::string plain_ms = "not run", same = "-";
      if (n <= 30000) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f", ms_of([&] { plain = greedy_nms(d, o); }));
        plain_ms = buf;
        same = plain == sparse ? "yes" : "NO";
        bad += plain != sparse;
      }
      std::printf("| %s | %d | %zu | %.2f | %s | %s |\n", kind.c_str(), n, sparse.size(), median(t), plain_ms.c_str(),
                  same.c_str());
      std::fflush(stdout);
    }
  if (batch > 0) {
    std::vector<float> boxes, scores;
    for (int b = 0; b < batch; ++b)
      for (const auto& x : clustered_boxes(batch_n, 100u + uint32_t(b))) {
        boxes.insert(boxes.end(), {x.box.x1, x.box.y1, x.box.x2, x.box.y2});
        scores.push_back(x.score);
      }
    std::vector<double> t1, tall;
    for (int r = 0; r < runs; ++r) {
      t1.push_back(ms_of([&] { batched_greedy_nms(boxes.data(), scores.data(), nullptr, nullptr, batch, batch_n, o, 1); }));
      tall.push_back(ms_of([&] { batched_greedy_nms(boxes.data(), scores.data(), nullptr, nullptr, batch, batch_n, o, 0); }));
    }
    std::printf("\nbatched_greedy_nms, %d images of %d clustered boxes: %.2f ms on one thread, %.2f ms on all\n",
                batch, batch_n, median(t1), median(tall));
  }
  return bad ? 1 : 0;
}

}  // namespace

#ifdef SCENELAB_WITH_CUDA
namespace {

template <typename T>
void dump(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
  SL_REQUIRE(f.good(), path, ": cannot write");
}

// The sliding-window head after the class map exists: one class's probabilities of a 1920x1080
// frame at the networks' stride 4 (480 x 270), 40 object-like blobs (up to 45 x 90 map pixels)
// and 40 person-like ones (8-40 high, a quarter to a half as wide)
// over background noise below 0.35, the head's default settings or `spec` over them (a model
// file's kind of class setting, --head-spec); GPU by CUDA events around GpuWindowHead::detect
// (its two count read-backs included), CPU on one thread.
void head_bench(int runs, cudaStream_t s, const std::string& spec) {
  const int H = 270, W = 480;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> p(size_t(H) * W);
  for (auto& v : p) v = 0.35f * u(rng);
  for (int b = 0; b < 80; ++b) {
    // 40 object-like blobs as before, then 40 person-like ones (width 0.25-0.45 of the height)
    int bh = 4 + int(u(rng) * 41), bw = 4 + int(u(rng) * 86);
    if (b >= 40) bh = 8 + int(u(rng) * 33), bw = std::max(2, int(std::lround(bh * (0.25f + 0.2f * u(rng)))));
    const int y0 = int(u(rng) * (H - bh)), x0 = int(u(rng) * (W - bw));
    for (int y = y0; y < y0 + bh; ++y)
      for (int x = x0; x < x0 + bw; ++x) p[size_t(y) * W + x] = 0.7f + 0.3f * u(rng);
  }
  WindowHeadOptions o;
  parse_window_spec(spec, o);
  const MapGeometry g{4, 4, 1.5, 1.5};
  DeviceBuffer d(p.size() * sizeof(float));
  upload_now(d.get(), p.data(), p.size() * sizeof(float), "upload");
  GpuWindowHead head;
  head.reserve(H, W, o);
  CudaEvent e0, e1;
  std::vector<Detection> got;
  std::vector<double> t;
  for (int i = 0; i < runs + 3; ++i) {
    SL_CUDA_CHECK(cudaEventRecord(e0.get(), s), "event");
    got = head.detect(d.get<float>(), H, W, 0, o, g, 4 * W, 4 * H, s);
    SL_CUDA_CHECK(cudaEventRecord(e1.get(), s), "event");
    SL_CUDA_CHECK(cudaEventSynchronize(e1.get()), "event");
    float ms = 0;
    SL_CUDA_CHECK(cudaEventElapsedTime(&ms, e0.get(), e1.get()), "event");
    if (i >= 3) t.push_back(ms);  // after 3 warm-up runs
  }
  std::vector<double> tc;
  std::vector<Detection> want;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    want = detect_windows_cpu(p.data(), H, W, 0, o, g, 4 * W, 4 * H);
    tc.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const size_t cand = window_candidates_cpu(p.data(), H, W, 0, o, g, 4 * W, 4 * H).size();
  bool same = got.size() == want.size();
  for (size_t i = 0; same && i < got.size(); ++i)
    same = got[i].score == want[i].score && std::memcmp(&got[i].box, &want[i].box, sizeof(Box)) == 0;
  std::printf("\n# sliding-window head, one class of a 1920x1080 frame (map %dx%d, settings: %s; %zu window "
              "sizes, %zu candidates, %zu boxes kept)\n| path | median ms |\n|---|---|\n| GPU (CUDA events, "
              "median of %d) | %.3f |\n| CPU, one thread (median of 5) | %.2f |\n%s\n",
              W, H, spec.empty() ? "the defaults" : spec.c_str(), o.sizes.size(), cand, want.size(), runs, median(t), median(tc),
              same ? "GPU boxes and scores identical to the CPU's" : "bench_nms: the GPU head DIFFERS from the CPU head!");
}


// The median of `runs` timings of f() by CUDA events on `stream`, after `warm` untimed runs.
template <typename F>
double time_on(cudaStream_t stream, CudaEvent& e0, CudaEvent& e1, int warm, int runs, F&& f) {
  for (int i = 0; i < warm; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    SL_CUDA_CHECK(cudaEventRecord(e0.get(), stream), "event");
    f();
    SL_CUDA_CHECK(cudaEventRecord(e1.get(), stream), "event");
    SL_CUDA_CHECK(cudaEventSynchronize(e1.get()), "event");
    float ms = 0;
    SL_CUDA_CHECK(cudaEventElapsedTime(&ms, e0.get(), e1.get()), "event");
    t.push_back(ms);
  }
  return median(t);
}

// The sparse exact greedy (GpuSparseNms) at every scale and on every kind of set, by CUDA events
// (median of runs after warm-up), the dense bitmask path beside it where its n^2 / 64 words fit
// (to 100,000 boxes), the indices checked against the CPU's sparse greedy; then B images of N boxes as one call (groups: the images). --dump
// writes each set, our result and the time of the path nms_on_device takes for that n, for
// tools/peer_nms.py --sparse (torchvision.ops.nms and batched_nms on the same boxes).
int sparse_bench(const std::vector<int>& sizes, const std::vector<std::string>& kinds, int runs, const Options& o,
                 int batch, int batch_n, const std::string& dump_dir, int lanes, int cell_shift) {
  cudaDeviceProp prop{};
  SL_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0), "bench_nms");
  std::printf("# bench_nms --sparse on %s: IoU > %.2f, median of %d runs (CUDA events) after 2 warm-up; lanes %d, "
              "cell shift %d\n", prop.name, o.threshold, runs, lanes, cell_shift);
  std::printf("| set | n | kept | sparse ms | rounds | dense ms (its rank + mask) | nms_on_device's path (sampled share "
              "no better box overlaps, its bar) | sparse workspace MiB | same as the CPU |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  CudaStream stream;
  CudaEvent e0, e1;
  int bad = 0;
  auto time_gpu = [&](auto&& f) { return time_on(stream.get(), e0, e1, 2, runs, f); };
  auto run_set = [&](const std::string& name, const std::vector<Detection>& d, const std::vector<int>& groups,
                     const std::string& dump_name) {
    const int n = int(d.size());
    std::vector<float4> b(static_cast<size_t>(n));
    std::vector<float> sc(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      b[size_t(i)] = make_float4(d[size_t(i)].box.x1, d[size_t(i)].box.y1, d[size_t(i)].box.x2, d[size_t(i)].box.y2);
      sc[size_t(i)] = d[size_t(i)].score;
    }
    DeviceBuffer db(size_t(n) * sizeof(float4)), ds(size_t(n) * sizeof(float)), dg(size_t(n) * sizeof(int)),
        keep(size_t(n) * sizeof(int)), count(sizeof(int));
    upload_now(db.get(), b.data(), b.size() * sizeof(float4), "upload");
    upload_now(ds.get(), sc.data(), sc.size() * sizeof(float), "upload");
    if (!groups.empty()) upload_now(dg.get(), groups.data(), groups.size() * sizeof(int), "upload");
    DeviceBoxes in{db.get<float4>(), ds.get<float>(), groups.empty() ? nullptr : dg.get<int>(), n};
    size_t free0 = 0, free1 = 0, total = 0;
    SL_CUDA_CHECK(cudaMemGetInfo(&free0, &total), "memory");
    GpuSparseNms sparse(n);
    SL_CUDA_CHECK(cudaMemGetInfo(&free1, &total), "memory");
    sparse.tune(lanes, cell_shift);
    const double sparse_ms = time_gpu([&] { sparse.greedy(in, o, keep.get<int>(), count.get<int>(), stream.get()); });
    int kept = 0;
    SL_CUDA_CHECK(cudaMemcpy(&kept, count.get(), sizeof(int), cudaMemcpyDeviceToHost), "count");
    std::vector<int> got(static_cast<size_t>(kept));
    SL_CUDA_CHECK(cudaMemcpy(got.data(), keep.get(), size_t(kept) * sizeof(int), cudaMemcpyDeviceToHost), "keep");
    std::string dense = "n/a";
    GreedyChooser chooser;  // the path nms_on_device takes for this set
    const bool auto_sparse = chooser.sparse(in, o, stream.get());
    double auto_ms = sparse_ms;
    char path[96];
    std::snprintf(path, sizeof path, "%s", auto_sparse ? "sparse" : "dense");
    if (chooser.last_share() >= 0)
      std::snprintf(path, sizeof path, "%s (%.3f, %.3f)", auto_sparse ? "sparse" : "dense", chooser.last_share(),
                    GreedyChooser::sparse_share_above(n));
    if (n <= 100000) {
      GpuNms nms(n);
      const double dense_ms = time_gpu([&] { nms.greedy(in, o, keep.get<int>(), count.get<int>(), stream.get()); });
      const double rank_ms = time_gpu([&] { nms.rank(in, o, stream.get()); });
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.3f (rank+mask %.3f)", dense_ms, rank_ms);
      dense = buf;
      if (!auto_sparse) auto_ms = dense_ms;
    }
    std::vector<Detection> g = d;
    Options og = o;
    if (!groups.empty()) {
      for (int i = 0; i < n; ++i) g[size_t(i)].cls = groups[size_t(i)];
      og.per_class = true;
    }
    const bool same = greedy_nms_sparse(g, og) == got;
    bad += !same;
    std::printf("| %s | %d | %d | %.3f | %d | %s | %s | %.0f | %s |\n", name.c_str(), n, kept, sparse_ms,
                sparse.last_rounds(), dense.c_str(), path, double(free0 - free1) / 1048576.0, same ? "yes" : "NO");
    std::fflush(stdout);
    if (!dump_dir.empty()) {
      const std::string p = dump_dir + "/" + dump_name;
      std::vector<float> flat;
      for (const auto& x : b) flat.insert(flat.end(), {x.x, x.y, x.z, x.w});
      dump(p + "_boxes.f32", flat);
      dump(p + "_scores.f32", sc);
      dump(p + "_keep.i32", got);
      if (!groups.empty()) dump(p + "_groups.i32", groups);
      std::ofstream(p + "_ms.txt") << auto_ms << "\n";
    }
  };
  for (const auto& kind : kinds)
    for (int n : sizes) run_set(kind, box_set(kind, n, uint32_t(n) + 7), {}, kind + "_" + std::to_string(n));
  if (batch > 0) {
    std::vector<Detection> all;
    std::vector<int> groups;
    for (int i = 0; i < batch; ++i)
      for (const auto& x : clustered_boxes(batch_n, 100u + uint32_t(i))) {
        all.push_back(x);
        groups.push_back(i);
      }
    run_set("batched " + std::to_string(batch) + "x" + std::to_string(batch_n), all, groups, "batched");
  }
  return bad ? 1 : 0;
}
}  // namespace
#endif

int main(int argc, char** argv) {
  try {
    Cli cli(argc, argv, {"sizes", "runs", "threshold", "dump", "head-spec", "sets", "batch", "lanes", "cell-shift"}, {"help", "cpu", "sparse"});
    if (cli.has("help")) {
      std::puts("usage: bench_nms [--sizes 200,1000,...] [--runs 20] [--threshold 0.5] [--dump DIR]\n"
                "                 [--head-spec 'key=value ...; key=value ...'] (the head also with these settings)\n"
                "       bench_nms --cpu [--sizes ...] [--sets clustered,uniform,large] [--batch BxN] [--runs N]\n"
                "                 (the CPU's sparse exact greedy against the plain loop; batched images)\n"
                "       bench_nms --sparse [--sizes ...] [--sets ...] [--batch BxN] [--runs N] [--dump DIR]\n"
                "                 [--lanes 8|32] [--cell-shift 0..3] (GpuSparseNms::tune)\n"
                "                 (the GPU's sparse exact greedy, the dense path beside it; batched images)");
      return 0;
    }
    std::vector<int> sizes;
    {
      std::stringstream ss(cli.get("sizes", "200,1000,3000,10000,30000,100000"));
      std::string t;
      while (std::getline(ss, t, ',')) sizes.push_back(std::atoi(t.c_str()));
    }
    const int runs = std::max(1, cli.get_int("runs", 20));
    Options o;
    o.threshold = float(std::atof(cli.get("threshold", "0.5").c_str()));
    if (cli.has("cpu") || cli.has("sparse")) {
      std::vector<std::string> kinds;
      std::stringstream ks(cli.get("sets", "clustered,uniform,large"));
      for (std::string k; std::getline(ks, k, ',');) kinds.push_back(k);
      int batch = 0, batch_n = 0;
      const std::string bspec = cli.get("batch", "16x10000");
      SL_REQUIRE(std::sscanf(bspec.c_str(), "%dx%d", &batch, &batch_n) == 2 && batch >= 0 && batch_n > 0,
                 "--batch ", bspec, ": expected BxN, e.g. 16x10000");
      if (cli.has("cpu")) return cpu_bench(sizes, kinds, std::max(1, cli.get_int("runs", 3)), o, batch, batch_n);
#ifdef SCENELAB_WITH_CUDA
      return sparse_bench(sizes, kinds, std::max(1, cli.get_int("runs", 10)), o, batch, batch_n, cli.get("dump", ""),
                          cli.get_int("lanes", 32), cli.get_int("cell-shift", 2));
#else
      std::fprintf(stderr, "bench_nms: built without CUDA; --sparse times the GPU\n");
      return 1;
#endif
    }
#ifndef SCENELAB_WITH_CUDA
    (void)runs;
    std::fprintf(stderr, "bench_nms: built without CUDA; it times the GPU algorithms (--cpu: the CPU's)\n");
    return 1;
#else
    cudaDeviceProp prop{};
    SL_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0), "bench_nms");
    std::printf("# bench_nms on %s: clustered boxes in 1920x1080, IoU > %.2f, median of %d runs "
                "(CUDA events) after 3 warm-up\n", prop.name, o.threshold, runs);
    const int ks[] = {1, 2, 4, 8, 16, 32};
    std::printf("| n | kept | CPU greedy ms | GPU greedy ms | of which sort+mask ms | "
                "Cluster-NMS ms (iterations) |");
    for (int k : ks) std::printf(" Oro k=%d ms |", k);
    std::printf("\n|---|---|---|---|---|---|");
    for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); ++i) std::printf("---|");
    std::printf("\n");
    CudaStream stream;
    CudaEvent e0, e1;
    for (int n : sizes) {
      auto d = clustered_boxes(n, uint32_t(n));
      std::vector<float4> b(static_cast<size_t>(n));
      std::vector<float> sc(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        b[size_t(i)] = make_float4(d[size_t(i)].box.x1, d[size_t(i)].box.y1, d[size_t(i)].box.x2, d[size_t(i)].box.y2);
        sc[size_t(i)] = d[size_t(i)].score;
      }
      DeviceBuffer db(size_t(n) * sizeof(float4)), ds(size_t(n) * sizeof(float)),
          keep(size_t(n) * sizeof(int)), count(sizeof(int)), flags(static_cast<size_t>(n));
      upload_now(db.get(), b.data(), b.size() * sizeof(float4), "upload");
      upload_now(ds.get(), sc.data(), sc.size() * sizeof(float), "upload");
      DeviceBoxes in{db.get<float4>(), ds.get<float>(), nullptr, n};
      GpuNms nms(n);
      auto time_gpu = [&](auto&& f) { return time_on(stream.get(), e0, e1, 3, runs, f); };
      Options o0 = o;  // max_outputs 0: ranking and the mask kernel, the scan stops at once
      o0.max_outputs = 0;
      const double rank_ms = time_gpu([&] { nms.greedy(in, o0, keep.get<int>(), count.get<int>(), stream.get()); });
      const double greedy_ms = time_gpu([&] { nms.greedy(in, o, keep.get<int>(), count.get<int>(), stream.get()); });
      int kept = 0;
      SL_CUDA_CHECK(cudaMemcpy(&kept, count.get(), sizeof(int), cudaMemcpyDeviceToHost), "count");
      std::vector<int> gpu_keep(static_cast<size_t>(kept));
      SL_CUDA_CHECK(cudaMemcpy(gpu_keep.data(), keep.get(), size_t(kept) * sizeof(int), cudaMemcpyDeviceToHost), "keep");
      int iters = 0;
      const double cluster_ms = time_gpu([&] { iters = nms.cluster(in, o, keep.get<int>(), count.get<int>(), stream.get()); });
      std::vector<double> cpu_t;
      std::vector<int> cpu_keep;
      for (int i = 0; i < (n >= 30000 ? 1 : 3); ++i) {
        auto t0 = std::chrono::steady_clock::now();
        cpu_keep = greedy_nms(d, o);
        cpu_t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      if (cpu_keep != gpu_keep) std::fprintf(stderr, "bench_nms: n=%d GPU greedy differs from the CPU reference!\n", n);
      std::printf("| %d | %d | %.2f | %.3f | %.3f | %.3f (%d) |", n, kept, median(cpu_t), greedy_ms,
                  rank_ms, cluster_ms, iters);
      const int dmax = (n + 31) / 32 * 32;
      if (dmax / 1 <= 1024 * 32) nms.reserve_oro(dmax);
      for (int k : ks) {
        if ((dmax + k - 1) / k > 1024 || nms.oro_capacity() < dmax) {
          std::printf(" n/a |");
          continue;
        }
        std::printf(" %.3f |", time_gpu([&] { nms.oro(in, o, k, flags.get<uint8_t>(), stream.get()); }));
      }
      std::printf("\n");
      std::fflush(stdout);
      if (cli.has("dump")) {
        const std::string p = cli.get("dump") + "/n" + std::to_string(n);
        std::vector<float> flat;
        for (const auto& x : b) flat.insert(flat.end(), {x.x, x.y, x.z, x.w});
        dump(p + "_boxes.f32", flat);
        dump(p + "_scores.f32", sc);
        dump(p + "_keep.i32", gpu_keep);
      }
    }
    std::printf("(Oro n/a: the published reduce maps Dmax/k threads to a block, at most 1024)\n");
    head_bench(runs, stream.get(), "");
    std::stringstream specs(cli.get("head-spec", ""));
    for (std::string spec; std::getline(specs, spec, ';');)
      if (spec.find_first_not_of(' ') != std::string::npos) head_bench(runs, stream.get(), spec);
    return 0;
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_nms: %s\n", e.what());
    return 1;
  }
}
