// A model: graph description, parameter tensors by dataset name ("group/name"), class names and
// colour palette. Files: weights/model_file.h; format: weights/FORMAT.md.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/graph_desc.h"
#include "engine/layer.h"
#include "core/tensor.h"

namespace scenelab {

struct ParamRequirement {
  std::string dataset;  // "group/name"
  std::vector<int> dims;
  std::string node;  // first node that reads it
};

struct Model {
  std::string name;
  GraphDesc graph;
  std::map<std::string, Tensor> params;
  std::vector<std::string> class_names;
  std::vector<std::array<uint8_t, 3>> palette;
  // Detection head settings per class name (nms::parse_window_spec text), where the model file
  // has them (optional attribute `detect`); classes without keep the head's defaults.
  std::map<std::string, std::string> detect;
  // A sliding-window detector over an image pyramid (optional attribute `pyramid`, e.g. a HOG +
  // linear SVM model: "window=64x128 scale=1.05 levels=64 threshold=0"; job/pyramid_detector.h).
  std::string pyramid;
};

// The parameters a graph needs, with their shapes (inferred from channel counts), in node order.
// Shared groups appear once; two nodes disagreeing on a shared group's shape is an error.
std::vector<ParamRequirement> required_params(const GraphDesc& g);

// Channels of a node's output (they do not depend on the input size).
int node_channels(const GraphDesc& g, const std::string& node);

// Shape of a parameter tensor with these dims (rank 1..4, leading dims padded with 1 at the end).
Shape param_shape(const std::vector<int>& dims);

}  // namespace scenelab
