// A layer graph built from a Model, planned once for an input size (shapes and geometry
// inferred, buffers sized and reused, one shared workspace), then run many times. Planning also
// picks each tensor's format (element type and layout): every layer says which format it
// computes in on the backend (Layer::format), and the planner places a conversion only where a
// tensor is read in another format than its producer wrote, once per tensor and format; and it
// fuses a layer into its producer where the producer's layer says it can apply it on the way out
// (Layer::as_epilogue, Layer::can_fuse: a ReLU or pool into a convolution, an argmax into an
// upsample...), decided per plan.
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

// How a plan meets the host. u8_input: feed_u8() takes the input as interleaved 8-bit pixels
// (n x h x w x c), uploaded as bytes and converted to the graph's float input on the backend;
// u8_outputs: these nodes are also kept as bytes (e.g. class indices), for fetch_u8().
// f32_outputs: these nodes are also kept as f32 NCHW where they run in another format, for
// fetch_async().
struct PlanIO {
  bool u8_input = false;
  // u8_input pixels of another size (source_h x source_w), resized to the planned size on the
  // backend (Backend::resize_u8_to_float): an image pyramid's level planned from the image.
  int source_h = 0, source_w = 0;
  // u8_input pixels already in the backend's memory, given to feed_u8 (e.g. another graph's
  // upload, u8_input_in_backend()) and read where they are: no input buffer of its own.
  bool u8_shared = false;
  std::vector<std::string> u8_outputs;
  std::vector<std::string> f32_outputs;
  // Inner nodes kept to the end of the pass for output()/fetch() (their memory is otherwise
  // reused once their last reader ran; fetching such a node is an error).
  std::vector<std::string> keep;
  bool operator==(const PlanIO& o) const {
    return u8_input == o.u8_input && source_h == o.source_h && source_w == o.source_w && u8_shared == o.u8_shared &&
           u8_outputs == o.u8_outputs && f32_outputs == o.f32_outputs && keep == o.keep;
  }
};

// What layers timed to choose how they run at one planned size (node name -> the layer's own
// text, e.g. a convolution algorithm): saved by a plan cache, restored before the first run.
using Tuning = std::map<std::string, std::string>;

class Graph {
 public:
  // Keeps a reference to `model` (its parameters are not copied): the model must outlive this.
  explicit Graph(const Model& model);
  ~Graph();

  // Plans for an NCHW input of this size. Throws, naming the layer, if the input is too small,
  // or, naming the size and the bytes needed, if the backend's free memory cannot hold the plan.
  void plan(int n, int h, int w, const Backend& backend, const PlanIO& io = PlanIO{});
  bool planned() const { return planned_; }
  Shape input_shape() const { return input_shape_; }

  // Feeding and running: an input is fed (feed, feed_u8), then the pass runs on it (run; enqueue
  // into a caller's recording), as often as wanted; the shorthands feed and run at once.
  //
  // feed: an f32 NCHW input in host memory (shape must equal input_shape()); on the GPU it goes
  // up (a host-to-device copy).
  void feed(const TensorView& input);
  // Where 8-bit pixels are: in host memory (on the GPU, page-locked memory from
  // Backend::allocate_host uploads beside other work), or already in the backend's memory (a
  // caller's CUDA tensor, another graph's upload: u8_input_in_backend()).
  enum class Pixels { Host, Backend };
  // feed_u8: interleaved 8-bit pixels (n x h x w x c; needs PlanIO::u8_input), asynchronous on the
  // GPU. From the host they go up into the plan's buffer (the CPU converts straight from them);
  // in the backend's memory they are copied into it, ordered with the backend's work, or, where
  // the plan has none (PlanIO::u8_shared), read where they are and must stay there.
  void feed_u8(const uint8_t* pixels, Pixels where = Pixels::Host);
  // The pass on the input last fed. On the GPU it is recorded on the second run after a plan
  // (the first may time algorithms) and replayed from then on; asynchronous: synchronize()
  // before reading outputs fetched with async copies.
  void run();
  // The pass enqueued as it is: no replay and no recording of its own (for a caller recording
  // several graphs into one replay, Backend::capture_branches).
  void enqueue();
  // Shorthands: feed(input) then run(); feed_u8(pixels) (from the host) then run().
  void run(const TensorView& input) {
    feed(input);
    run();
  }
  void run_u8(const uint8_t* pixels) {
    feed_u8(pixels);
    run();
  }
  // Where a PlanIO::u8_outputs node's bytes are after a run, in the backend's memory.
  const uint8_t* u8_output_in_backend(const std::string& node) const;
  // Where the pixels of the last feed_u8() are, in the backend's memory.
  const uint8_t* u8_input_in_backend() const { return input_u8_src_; }
  void synchronize() const { backend_->synchronize(); }

  // Output (or any node's output) of the last run, in the backend's memory (device memory on
  // the GPU) and its format; valid until the next plan().
  TensorView output(const std::string& node) const;
  // The same, copied to a host f32 NCHW tensor (waits for the GPU).
  Tensor fetch(const std::string& node) const;
  // Copies of a node into host memory without waiting (see run_u8): its floats, or its bytes
  // (a PlanIO::u8_outputs node; shape_of(node).numel() bytes).
  void fetch_async(const std::string& node, float* host) const;
  void fetch_u8_async(const std::string& node, uint8_t* host) const;
  // What the layers timed at this planned size (after a run), and restoring it (after plan(),
  // before the first run). Returns the nodes whose saved choice did not apply (they time anew).
  Tuning tuning() const;
  std::vector<std::string> restore_tuning(const Tuning& t);
  Shape shape_of(const std::string& node) const;
  Geometry geometry_of(const std::string& node) const;
  Format format_of(const std::string& node) const;
  size_t conversions() const;  // format conversions the plan placed
  const std::vector<std::string>& outputs() const { return model_.graph.outputs; }

  double total_ops() const;  // per run, paper's metric
  size_t planned_bytes() const { return planned_bytes_; }  // backend memory this plan placed
  void set_profiling(bool on) { profiling_ = on; }
  bool replaying() const { return replay_ != nullptr; }
  const std::vector<LayerStat>& stats() const { return stats_; }
  size_t activation_bytes() const;  // planned activation buffers, bytes
  size_t workspace_bytes() const { return workspace_floats_ * sizeof(float); }

 private:
  struct Node;
  struct Value;
  struct Step;
  int index_of(const std::string& name) const;  // -1: the input
  int owner(int value) const;                   // the value whose memory it is
  TensorView view_of(int value) const;

  const Model& model_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<std::string, int> index_;  // node name -> index
  std::vector<Value> values_;
  std::vector<Step> steps_;
  std::vector<BackendMemory> buffers_;
  std::vector<size_t> buffer_bytes_;
  BackendMemory workspace_, input_buffer_, input_u8_;
  const uint8_t* input_u8_src_ = nullptr;
  size_t u8_bytes_ = 0;  // the u8 input's size (the source's when resized)
  PlanIO io_;
  std::vector<bool> kept_;                    // per node: its memory holds it after the pass
  int kept_index(const std::string& name, const char* what) const;
  void try_fuse(size_t node, const std::vector<int>& readers, const Backend& backend);
  // plan()'s phases (engine/graph_plan.cpp).
  std::vector<int> node_indices(const std::vector<std::string>& names) const;
  void infer_nodes(const Backend& backend);
  void place_steps();
  std::vector<size_t> assign_buffers(const Backend& backend);
  void allocate(const Backend& backend, const std::vector<size_t>& sizes, const std::vector<int>& u8_nodes,
                const std::vector<int>& f32_nodes);
  std::map<int, BackendMemory> u8_outputs_;   // node index -> its bytes
  std::map<int, BackendMemory> f32_outputs_;  // node index -> its f32 NCHW copy
  std::map<const Tensor*, BackendMemory> device_params_;  // per model tensor, off the host
  const Backend* params_backend_ = nullptr;
  // The forward pass as a replayable graph (CUDA): recorded on the second run after a plan
  // (the first one may time convolution algorithms), replayed from then on.
  BackendMemory replay_;
  int runs_since_plan_ = 0;
  bool has_input_ = false;  // run() has uploaded an input since plan()
  bool capture_failed_ = false;
  void run_layers();
  size_t workspace_floats_ = 0, planned_bytes_ = 0;
  std::vector<Shape> input_shapes(const Node& n) const;
  Shape input_shape_;
  TensorView input_view_;
  const Backend* backend_ = nullptr;
  bool planned_ = false;
  bool profiling_ = false;
  std::vector<LayerStat> stats_;
};

}  // namespace scenelab
