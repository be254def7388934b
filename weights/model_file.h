// The HDF5 model file (format: weights/FORMAT.md). The reader validates everything and throws
// scenelab::Error naming the file, the dataset and what was expected vs found; it never crashes
// on a malformed file.
#pragma once
#include <string>

#include "engine/model.h"

namespace scenelab {

constexpr int kModelFormatVersion = 1;

Model read_model(const std::string& path);
void write_model(const std::string& path, const Model& model);

// Number of classes the model's graph produces (channels of node `scores`).
int model_num_classes(const GraphDesc& g);

}  // namespace scenelab
