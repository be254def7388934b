// libFuzzer: graph text (parser, layer attributes, shape inference, planning) on arbitrary text.
#include <cstdint>
#include <string>

#include "engine/error.h"
#include "engine/graph.h"
#include "engine/graph_desc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    scenelab::Model m;
    m.graph = scenelab::GraphDesc::parse(text);
    long double bytes = 0;
    for (const auto& r : scenelab::required_params(m.graph)) {
      long double n = 1;
      for (int d : r.dims) n *= d;
      bytes += n * 4;
    }
    if (bytes > (1 << 24)) return 0;
    for (const auto& r : scenelab::required_params(m.graph)) {
      scenelab::Tensor t(scenelab::param_shape(r.dims), 0.5f);
      m.params.emplace(r.dataset, std::move(t));
    }
    scenelab::Graph g(m);
    scenelab::CpuBackend cpu(1);
    g.plan(1, 20, 24, cpu);
  } catch (const scenelab::Error&) {
  }
  return 0;
}
