// Models the project generates: deterministic random weights for a named network (used as the
// shipped default until a trained model lands, and by tests and benchmarks).
#pragma once
#include <cstdint>
#include <string>

#include "engine/model.h"

namespace scenelab {

// He-uniform weights, zero-mean small biases, identity standardisation; same seed, same model.
Model make_random_model(const std::string& network, int num_classes, uint32_t seed);

// The paper's Stanford-background classes and a palette, for generated 8-class models.
std::vector<std::string> paper_class_names();

}  // namespace scenelab
