// libFuzzer: graph text (parser, layer attributes, shape inference, planning) on arbitrary text,
// then every graph that plans is run on the CPU, so that the layers' own code meets the shapes
// and geometries a fuzzed graph gives them (flip about another map's middle, resampling onto a
// map of another grid, refinement guided by an image of another size, odd and tiny maps).
// Each graph is planned at 24x20 (batch 1) and at 7x5 (batch 2), width x height, and run three
// times: input A, input B, input A again. The third run must give the first's outputs bit for
// bit: the CPU backend is deterministic on one thread, so a difference means a layer read memory
// its pass did not write (a buffer reused by the planner, a workspace, a stale tail).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "engine/graph.h"
#include "engine/graph_desc.h"
#include "capped_cpu.h"

namespace {

// Bounds that keep one execution to milliseconds: the paper's operation count of a pass (2 x the
// convolutions' multiply-adds) and the backend memory a plan places.
constexpr double kMaxOps = 4e7;
constexpr size_t kMaxPlannedBytes = size_t(32) << 20;

// FUZZ_GRAPH_VERBOSE=1: say why an input was refused, or that it ran (to check seeds by hand).
const bool verbose = std::getenv("FUZZ_GRAPH_VERBOSE") != nullptr;

scenelab::Tensor input_pattern(const scenelab::Shape& s, uint32_t seed) {
  scenelab::Tensor t(s);
  uint32_t x = seed;
  for (size_t i = 0; i < t.numel(); ++i) {
    x = x * 1664525u + 1013904223u;
    t[i] = float(x >> 8) / float(1u << 24);  // [0, 1), as an image's values
  }
  return t;
}

std::vector<scenelab::Tensor> run_and_fetch(scenelab::Graph& g, const scenelab::Tensor& in) {
  g.run(in.view());
  std::vector<scenelab::Tensor> out;
  for (const auto& name : g.outputs()) out.push_back(g.fetch(name));
  return out;
}

void plan_and_run(scenelab::Graph& g, int n, int h, int w) {
  const scenelab::fuzz::CappedCpu cpu;
  g.plan(n, h, w, cpu);
  if (g.total_ops() > kMaxOps || g.planned_bytes() > kMaxPlannedBytes) {
    if (verbose) std::fprintf(stderr, "fuzz_graph: %dx%d (batch %d) planned, too large to run\n", w, h, n);
    return;
  }
  const scenelab::Tensor a = input_pattern(g.input_shape(), 1), b = input_pattern(g.input_shape(), 2);
  const auto first = run_and_fetch(g, a);
  run_and_fetch(g, b);
  const auto again = run_and_fetch(g, a);
  for (size_t k = 0; k < first.size(); ++k) {
    if (first[k].numel() == again[k].numel() &&
        std::memcmp(first[k].data(), again[k].data(), first[k].numel() * sizeof(float)) == 0)
      continue;
    std::fprintf(stderr, "fuzz_graph: output '%s' at %dx%d (batch %d) differs between two runs on one input\n",
                 g.outputs()[k].c_str(), w, h, n);
    std::abort();
  }
  if (verbose) std::fprintf(stderr, "fuzz_graph: %dx%d (batch %d) ran three times alike\n", w, h, n);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  scenelab::Model m;
  try {
    m.graph = scenelab::GraphDesc::parse(text);
    long double bytes = 0;
    for (const auto& r : scenelab::required_params(m.graph)) {
      long double n = 1;
      for (int d : r.dims) n *= d;
      bytes += n * 4;
    }
    if (bytes > (1 << 24)) return 0;
    // Parameters of a fixed, varied pattern (all 0.5 would make every channel alike); a
    // standardisation's deviations positive, as a model file must have them.
    uint32_t seed = 7;
    for (const auto& r : scenelab::required_params(m.graph)) {
      scenelab::Tensor t = input_pattern(scenelab::param_shape(r.dims), seed++);
      const bool positive = r.dataset.size() >= 4 && r.dataset.compare(r.dataset.size() - 4, 4, "/std") == 0;
      for (size_t i = 0; i < t.numel(); ++i) t[i] += positive ? 0.5f : -0.25f;
      m.params.emplace(r.dataset, std::move(t));
    }
  } catch (const scenelab::Error& e) {
    if (verbose) std::fprintf(stderr, "fuzz_graph: refused: %s\n", e.what());
    return 0;
  }
  for (const auto& [n, h, w] : {std::tuple{1, 20, 24}, std::tuple{2, 5, 7}}) {
    try {
      scenelab::Graph g(m);
      plan_and_run(g, n, h, w);
    } catch (const scenelab::Error& e) {
      if (verbose) std::fprintf(stderr, "fuzz_graph: %dx%d (batch %d): %s\n", w, h, n, e.what());
    }
  }
  return 0;
}
