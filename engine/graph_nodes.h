// The planned graph's own records (engine/graph.h's Graph::Node, Value and Step), shared by
// engine/graph.cpp (building and running) and engine/graph_plan.cpp (planning). Internal to the
// engine floor.
#pragma once
#include <memory>
#include <vector>

#include "engine/graph.h"

namespace scenelab {

struct Graph::Node {
  std::unique_ptr<Layer> layer;
  std::vector<int> inputs;  // node indices, -1 for the graph input
  LayerParams params;
  Shape shape;
  Geometry geometry;
  Format in_format;         // what it reads (inputs in another format are converted)
  Format format;            // what it writes
  double ops = 0;
  int alias_of = -2;        // >= 0: this node was fused into that one, whose memory holds its output
  bool identity = false;    // its output is its input's memory (Layer::is_identity): alias_of is that
  bool fused_relu = false;  // this node applies a following ReLU
  std::vector<Epilogue> epilogue;  // the followers fused into this node, in order
  Shape written;            // what its memory holds: its shape, or its last fused follower's
};

// A tensor of the plan: a node's output (value id = node index), the graph input (-1), or a
// conversion the planner placed (ids after the nodes).
struct Graph::Value {
  Shape shape;
  Format format;
  int alias_of = -2;  // >= -1: the same memory as that value (a fused follower's output)
  int buffer = -1;
  int last_use = 0;   // the last step reading it
};

// One step of the pass: a node, or a conversion of value `src` into value `dst`.
struct Graph::Step {
  int node = -1;                // >= 0: this node
  int src = 0, dst = 0;         // a conversion
  std::vector<int> in_values;   // the node's inputs (after conversions)
};

}  // namespace scenelab
