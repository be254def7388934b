// ONNX models in (issue 70's door): an .onnx file's graph mapped onto the engine's layers and
// parameters, so that it is planned, fused and run like a model file of our own (weights/FORMAT.md).
// read_model() takes this path for files named *.onnx.
//
// The file is parsed with ONNX's own protobuf classes (Debian's libonnx-dev, libprotobuf-dev),
// checked before anything is allocated for it (its size, every initialiser's element count
// against its data, the operator set), then each node is mapped in order (weights/onnx_ops.cpp):
//   Conv -> conv2d where it takes the shape (odd square kernel, stride 1, no dilation, one group,
//   pads 0 or k/2 on every side), else conv (any kernel, strides, dilations, pads, groups;
//   auto_pad SAME only at stride 1), a BatchNormalization after it folded into its weights and
//   bias; ConvTranspose (no output_shape, no auto_pad SAME) -> conv_transpose; Relu -> relu;
//   Sigmoid, Tanh, LeakyRelu, Clip, HardSigmoid, HardSwish -> activation; PRelu, and Add, Sub,
//   Mul, Div with a constant of one value or one a channel -> channel_op; Add, Sub, Mul of two
//   computed values (the second of the first's shape or one value a channel) -> binary;
//   MaxPool -> maxpool2d (square, no pads) or pool (any window, strides, pads; no dilation;
//   floor); AveragePool -> downscale (k x k at stride k) or pool (any window, strides, pads;
//   floor); BatchNormalization -> folded into the convolution it follows, else channel_op mul
//   and add; GlobalAveragePool ->
//   global_avgpool; Concat (channels) -> concat; Softmax (channels, opset >= 13) -> softmax;
//   ArgMax (channels, keepdims) -> argmax; Resize / Upsample (the same whole factor on both
//   axes; linear with half_pixel or pytorch_half_pixel, nearest with asymmetric and floor) ->
//   upsample; Identity, Dropout: the value itself; Constant, initialisers: parameters.
// Tensors of rank below 4 are N x C x H x W with leading 1s (an axis must be the channels).
// Anything else is refused by name: the node, its operator and what is missing.
//
// A labelling model (read_onnx_model): one image input, N x 3 x H x W float32 (RGB in [0, 1]
// unless the model's metadata says otherwise); its first output is the class scores `scores`
// (N x C x h x w), `full` those brought back onto the input (bilinear, as F.interpolate with
// align_corners=False), `labels_full` their argmax. Class names and palette from the model's
// metadata_props ("class_names": comma-separated; "palette": R,G,B;R,G,B;...) when present, else
// class0.. and a generated palette. Preprocessing from metadata_props "input_mean" and
// "input_std" (comma-separated, per channel, on the [0, 1] values): a standardize node first.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/model.h"

namespace scenelab {

struct OnnxLimits {
  uint64_t max_file_bytes = uint64_t(2) << 30;   // protobuf's own limit
  uint64_t max_param_bytes = uint64_t(4) << 30;  // all initialisers together, as float32
  size_t max_nodes = 100000;
};

// Operator sets of the default domain this importer reads.
constexpr int kOnnxMinOpset = 1, kOnnxMaxOpset = 21;  // older semantics: their attributes are refused

// What the importer cannot map (an operator, an attribute, a shape): a node test reports it as
// unsupported, where any other Error is a failure.
class OnnxUnsupported : public Error {
 public:
  using Error::Error;
};

// The graph alone, as the engine's: the input named "image" with the ONNX input's channels, the
// node of each ONNX output listed as the graph's outputs (in order). `given`: the values of the
// graph inputs after the first that are not initialisers (a node test's weights), in order,
// taken as initialisers.
struct OnnxImport {
  Model model;                       // graph and params (no classes)
  std::vector<std::string> outputs;  // the engine's node for each ONNX output
  std::vector<std::string> onnx_outputs;
  int64_t opset = 0;
};
OnnxImport import_onnx(const std::string& path, const std::vector<Tensor>& given = {},
                       const OnnxLimits& limits = OnnxLimits{});

// A labelling model from an .onnx file (the conventions above).
Model read_onnx_model(const std::string& path, const OnnxLimits& limits = OnnxLimits{});

// An ONNX TensorProto file (a node test's input_0.pb, output_0.pb): float32 (or int64, as
// floats), rank 0 to 4, padded in front to N x C x H x W (rank 3 [c, h, w] -> 1 x c x h x w).
Tensor read_onnx_tensor(const std::string& path, std::vector<int64_t>* dims = nullptr);

bool onnx_supported();  // false in builds without libonnx / libprotobuf

}  // namespace scenelab
