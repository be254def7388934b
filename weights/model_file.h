// The HDF5 model file (format: weights/FORMAT.md). The reader validates everything and throws
// scenelab::Error naming the file, the dataset and what was expected vs found; it never crashes
// on a malformed file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/model.h"

namespace scenelab {

constexpr int kModelFormatVersion = 1;

// What a model file may ask for, checked before anything is allocated for it: an attacker's or a
// corrupt file fails fast with an error naming the file and the limit.
struct ModelLimits {
  size_t max_graph_bytes = size_t(16) << 20;     // the graph's text
  size_t max_nodes = 100000;                     // layers in the graph
  uint64_t max_param_bytes = uint64_t(4) << 30;  // all parameter tensors together
  // The file is read first in a child process with this time limit (weights/isolated.h), then
  // here: a crash or hang of the HDF5 library on a malformed file becomes an error naming the
  // file, and so does a file that makes it allocate more than max_param_bytes + 1 GiB (the
  // child's memory cap). 0: read in this process only (trusted files).
  double isolate_timeout_s = 120;
};

// A file named *.onnx is read by read_onnx_model (weights/onnx_model.h).
Model read_model(const std::string& path, const ModelLimits& limits = ModelLimits{});
void write_model(const std::string& path, const Model& model);

// Number of classes the model's graph produces (channels of node `scores`).
int model_num_classes(const GraphDesc& g);

}  // namespace scenelab
