#include "weights/default_model.h"

#include <cmath>
#include <random>

#include "core/error.h"
#include "engine/networks.h"

namespace scenelab {

std::vector<std::string> paper_class_names() {
  return {"sky", "tree", "road", "grass", "water", "building", "mountain", "foreground"};
}

Model make_random_model(const std::string& network, int classes, uint32_t seed) {
  Model m;
  m.name = str_cat(network, "-random-seed", seed);
  m.graph = GraphDesc::parse(network_text(network, classes));
  std::mt19937 rng(seed);
  // mt19937 output is specified by the standard; map it to [-1, 1) ourselves (distributions are
  // implementation-defined) so every platform generates the same model.
  auto uniform = [&rng] { return float(double(rng()) / 4294967296.0 * 2.0 - 1.0); };
  for (const auto& r : required_params(m.graph)) {
    Tensor t(param_shape(r.dims));
    const std::string leaf = r.dataset.substr(r.dataset.rfind('/') + 1);
    if (leaf == "weight") {
      const double fan_in = double(t.numel()) / r.dims[0];
      const float bound = float(std::sqrt(6.0 / fan_in));
      for (size_t i = 0; i < t.numel(); ++i) t[i] = bound * uniform();
    } else if (leaf == "bias") {
      for (size_t i = 0; i < t.numel(); ++i) t[i] = 0.05f * uniform();
    } else if (leaf == "std") {
      t.fill(1.f);
    } else {
      t.fill(0.f);
    }
    m.params.emplace(r.dataset, std::move(t));
  }
  auto paper = paper_class_names();
  for (int c = 0; c < classes; ++c) {
    m.class_names.push_back(c < int(paper.size()) ? paper[size_t(c)] : str_cat("class", c));
    // Well separated hues from a fixed generator.
    uint32_t h = uint32_t(c) * 2654435761u;
    m.palette.push_back({uint8_t(64 + (h >> 24) % 192), uint8_t(64 + (h >> 16) % 192),
                         uint8_t(64 + (h >> 8) % 192)});
  }
  return m;
}

}  // namespace scenelab
