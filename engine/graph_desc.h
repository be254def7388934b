// The textual description of a layer graph, as stored in model files (weights/FORMAT.md):
//
//   input image channels=3
//   c1 = conv2d(image) out=16 k=7 pad=valid
//   cat = concat(a, b)
//   output scores labels
//
// One statement a line; '#' starts a comment. Nodes appear after their inputs.
#pragma once
#include <string>
#include <vector>

#include "engine/attrs.h"

namespace scenelab {

struct NodeDesc {
  std::string name;
  std::string type;
  std::vector<std::string> inputs;
  Attrs attrs;
  int line = 0;  // 1-based line in the text, for error messages
};

struct GraphDesc {
  std::string input_name = "image";
  int input_channels = 3;
  std::vector<NodeDesc> nodes;
  std::vector<std::string> outputs;

  static GraphDesc parse(const std::string& text);
  std::string to_text() const;
  const NodeDesc* find(const std::string& name) const;
};

}  // namespace scenelab
