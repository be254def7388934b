// The interface every layer implements (one layer a file under layers/). The engine sees layers
// only through this interface and the registry; it never knows a particular layer.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/graph_desc.h"
#include "core/tensor.h"

namespace scenelab {

// Where the centres of a feature map's pixels lie in input-image pixel coordinates:
// pixel i of the map is centred on input coordinate offset + stride * i (input pixel centres are
// at integer coordinates). Used to bring coarse maps back onto the input image.
struct Geometry {
  double stride_y = 1, stride_x = 1, offset_y = 0, offset_x = 0;
};

// Geometry after a k x k window applied with this stride and padding (convs, pools, block means):
// output pixel i is centred on the middle of its window.
inline Geometry after_window(Geometry g, int k, int stride, int pad = 0) {
  g.offset_y += g.stride_y * ((k - 1) / 2.0 - pad);
  g.offset_x += g.stride_x * ((k - 1) / 2.0 - pad);
  g.stride_y *= stride;
  g.stride_x *= stride;
  return g;
}

// A parameter tensor a layer needs: dataset `group/name` of the model file, with these dims.
struct ParamSpec {
  std::string name;
  std::vector<int> dims;
};

// Parameters of one layer, already validated against its ParamSpecs.
class LayerParams {
 public:
  void set(const std::string& name, const Tensor* t) { map_[name] = t; }
  const Tensor& get(const std::string& name) const;
  // Where the backend keeps each bound parameter: where(tensor) for every one (the host tensor's
  // data on the CPU, its device copy on the GPU). data() reads it.
  template <typename Where>
  void place(Where where) {
    for (const auto& [name, t] : map_) data_[name] = where(*t);
  }
  const float* data(const std::string& name) const;

 private:
  std::map<std::string, const Tensor*> map_;
  std::map<std::string, const float*> data_;
};

// A layer that another may apply to its own output before writing it (an epilogue), described
// by what it does, so that the planner can fuse without knowing layer types: the follower's
// output is then the producer's memory and the follower does not run (Layer::as_epilogue,
// Layer::can_fuse).
struct Epilogue {
  // Pixelwise: a 1x1 convolution (its weights and bias among the follower's parameters).
  enum class Kind : uint8_t { None, Relu, MaxPool, Argmax, Standardize, ContrastNorm, Pixelwise };
  Kind kind = Kind::None;
  int k = 0, stride = 0;  // MaxPool: window and stride; ContrastNorm: window; Pixelwise: outputs
  // ContrastNorm: its eps and the window's k normalised Gaussian taps (host memory, the layer's).
  float eps = 0;
  const float* taps = nullptr;
  // The follower's parameters (e.g. Standardize's mean and std), set by the planner.
  const LayerParams* params = nullptr;
  bool bias = false;  // Pixelwise: whether it adds a bias ("bias" among the params)
};

// Arguments of one layer's forward pass. All pointers live in the backend's memory: host on the
// CPU, device on the GPU (parameters: LayerParams::data). Views carry the format the layer said
// it computes in (Layer::format).
struct ForwardArgs {
  std::vector<TensorView> in;
  std::vector<Geometry> in_geometry;
  TensorView out;
  Geometry out_geometry;
  float* workspace = nullptr;  // workspace_floats() floats, planned once per input size
  const LayerParams* params = nullptr;
  int threads = 1;
  CpuConv cpu_conv = CpuConv::Auto;  // the CPU backend's convolution method
  bool fused_relu = false;  // the following ReLU was fused into this layer
  // Every follower fused into this layer, in order (a ReLU among them also sets fused_relu);
  // `out` is then the last one's output (e.g. the pooled map). Null: none.
  const std::vector<Epilogue>* epilogue = nullptr;
};

class Layer {
 public:
  explicit Layer(const NodeDesc& desc) : name_(desc.name) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  virtual const char* type() const = 0;
  // Number of inputs, or -1 for any number >= 1.
  virtual int num_inputs() const { return 1; }
  // Output shape for these input shapes; throws a clear error naming the layer if impossible.
  virtual Shape infer_shape(const std::vector<Shape>& in) const = 0;
  // Where the output's pixels lie on the input image, given the inputs' (and their shapes).
  virtual Geometry infer_geometry(const std::vector<Geometry>& in, const std::vector<Shape>& /*shapes*/) const {
    return in[0];
  }
  // Parameters needed, given the input shapes (only channel counts may matter).
  virtual std::vector<ParamSpec> param_specs(const std::vector<Shape>& /*in*/) const { return {}; }
  // Parameter group (dataset folder) this layer reads; layers sharing weights name one group.
  virtual std::string param_group() const { return name_; }
  // Scratch memory needed by forward (in the backend's memory; planned once per input size).
  virtual size_t workspace_floats(const std::vector<Shape>& /*in*/, const Shape& /*out*/,
                                  const Backend& /*backend*/) const {
    return 0;
  }
  // Scratch memory when `chain` is fused into this layer (ForwardArgs::epilogue, which can_fuse
  // accepted): by default what the layer needs alone.
  virtual size_t fused_workspace_floats(const std::vector<Epilogue>& /*chain*/, const std::vector<Shape>& in,
                                        const Shape& out, const Backend& backend) const {
    return workspace_floats(in, out, backend);
  }
  // Operations by the paper's metric (2 x multiply-adds of conv layers); 0 for others.
  virtual double ops(const std::vector<Shape>& /*in*/, const Shape& /*out*/) const { return 0; }
  // The format this layer computes in on this backend, given its inputs' formats: inputs in
  // another format are converted by the planner (once), and the output is in this format. The
  // default, f32 NCHW, is the CPU path's; GPU layers taking f16/bf16 NHWC say so.
  virtual Format format(const std::vector<Format>& /*in*/, const Backend& /*backend*/) const {
    return Format{};
  }
  // The format of its output: by default the one it computes in; a layer may write another
  // (e.g. the last preprocessing step writing the network's activation format).
  virtual Format output_format(const std::vector<Format>& in, const Backend& backend) const {
    return format(in, backend);
  }
  // False for an input whose values are not read (only its size: upsample's reference).
  virtual bool reads_values(int /*input*/) const { return true; }
  // True where the output is input 0 itself at these shapes and geometries (an upsample onto its
  // own grid): the planner gives the node input 0's memory and runs nothing for it.
  virtual bool is_identity(const std::vector<Shape>& /*in*/, const std::vector<Geometry>& /*in_geometry*/,
                           const Shape& /*out*/) const {
    return false;
  }
  // What this layer is as an epilogue of another (Kind::None: it cannot be one). A layer saying
  // so has one input and computes exactly that.
  virtual Epilogue as_epilogue() const { return {}; }
  // True when this layer can apply `chain` (its followers in order, each the only reader of the
  // one before) to its own output, at these input shapes and formats on this backend
  // (ForwardArgs::epilogue). Asked once per plan for each longer chain.
  virtual bool can_fuse(const std::vector<Epilogue>& /*chain*/, const std::vector<Shape>& /*in*/,
                        const std::vector<Format>& /*in_formats*/, const Backend& /*backend*/) const {
    return false;
  }
  // What this layer timed to choose how it runs at these input shapes on this backend (e.g. a
  // convolution algorithm), as one line of text; empty when it timed nothing. Plan caches keep
  // it, keyed by the size, the model and Backend::identity().
  virtual std::string tuning(const std::vector<Shape>& /*in*/, const Backend& /*backend*/) const {
    return {};
  }
  // Restores a choice tuning() returned for the same shapes and backend identity, before the
  // first run; false when the text does not apply here (the layer then times anew).
  virtual bool restore_tuning(const std::vector<Shape>& /*in*/, const Backend& /*backend*/,
                              const std::string& /*text*/) const {
    return false;
  }
  // How the last forward pass computed this layer, when it chooses (e.g. the convolution
  // algorithm picked by --conv auto); empty otherwise. For reports.
  virtual std::string detail() const { return {}; }
  virtual void forward_cpu(const ForwardArgs& a) const = 0;
  // The GPU path (layers/*.cpp, kernels in kernels/*.cu); stream-ordered, no allocation, no sync.
  virtual void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const;

 protected:
  std::string name_;
};

using LayerFactory = std::unique_ptr<Layer> (*)(const NodeDesc&);

// Implemented in layers/registry.cpp: the one table of layer types.
std::unique_ptr<Layer> create_layer(const NodeDesc& desc);
std::vector<std::string> layer_types();

}  // namespace scenelab
