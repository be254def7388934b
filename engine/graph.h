// A layer graph built from a Model, planned once for an input size (shapes and geometry
// inferred, buffers sized and reused, one shared workspace), then run many times.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/layer.h"
#include "engine/model.h"

namespace scenelab {

struct LayerStat {
  std::string name, type;
  Shape out;
  double ops = 0;      // paper's metric (2 x MACs of conv layers)
  double time_ms = 0;  // of the last run, when profiling
  std::string detail;  // Layer::detail() after the last profiled run
};

class Graph {
 public:
  // Keeps a reference to `model` (its parameters are not copied): the model must outlive this.
  explicit Graph(const Model& model);
  ~Graph();

  // Plans for an NCHW input of this size. Throws, naming the layer, if the input is too small.
  void plan(int n, int h, int w, const Backend& backend);
  bool planned() const { return planned_; }
  Shape input_shape() const { return input_shape_; }

  // Runs the planned graph on `input` (shape must equal input_shape()). On the GPU the input
  // goes up first (a host-to-device copy), then the pass runs.
  void run(const TensorView& input);
  // Runs the pass again on the input the last run() uploaded, already in device memory: the GPU
  // pass alone, as a peer timing its network on a device-resident tensor measures it.
  void run_resident();

  // Output (or any node's output) of the last run, in the backend's memory (device memory on
  // the GPU); valid until the next plan().
  TensorView output(const std::string& node) const;
  // The same, copied to a host tensor (waits for the GPU).
  Tensor fetch(const std::string& node) const;
  Shape shape_of(const std::string& node) const;
  Geometry geometry_of(const std::string& node) const;
  const std::vector<std::string>& outputs() const { return model_.graph.outputs; }

  double total_ops() const;  // per run, paper's metric
  void set_profiling(bool on) { profiling_ = on; }
  bool replaying() const { return replay_ != nullptr; }
  const std::vector<LayerStat>& stats() const { return stats_; }
  size_t activation_bytes() const;  // planned activation buffers
  size_t workspace_bytes() const { return workspace_floats_ * sizeof(float); }

 private:
  struct Node;
  int index_of(const std::string& name) const;  // -1: the input

  const Model& model_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<BackendMemory> buffers_;
  std::vector<size_t> buffer_floats_;
  BackendMemory workspace_, input_buffer_;
  std::map<const Tensor*, BackendMemory> device_params_;  // per model tensor, off the host
  const Backend* params_backend_ = nullptr;
  // The forward pass as a replayable graph (CUDA): recorded on the second run after a plan
  // (the first one may time convolution algorithms), replayed from then on.
  BackendMemory replay_;
  int runs_since_plan_ = 0;
  bool has_input_ = false;  // run() has uploaded an input since plan()
  bool capture_failed_ = false;
  void run_layers();
  size_t workspace_floats_ = 0;
  Shape input_shape_;
  TensorView input_view_;
  const Backend* backend_ = nullptr;
  bool planned_ = false;
  bool profiling_ = false;
  std::vector<LayerStat> stats_;
};

}  // namespace scenelab
