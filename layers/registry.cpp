// The one table of layer types. A new layer adds its file and one line here.
#include <cstring>
#include <memory>

#include "core/error.h"
#include "engine/layer.h"

namespace scenelab {

std::unique_ptr<Layer> make_conv2d(const NodeDesc&);
std::unique_ptr<Layer> make_relu(const NodeDesc&);
std::unique_ptr<Layer> make_maxpool2d(const NodeDesc&);
std::unique_ptr<Layer> make_downscale(const NodeDesc&);
std::unique_ptr<Layer> make_upsample(const NodeDesc&);
std::unique_ptr<Layer> make_concat(const NodeDesc&);
std::unique_ptr<Layer> make_argmax(const NodeDesc&);
std::unique_ptr<Layer> make_softmax(const NodeDesc&);
std::unique_ptr<Layer> make_rgb_to_yuv(const NodeDesc&);
std::unique_ptr<Layer> make_contrast_norm(const NodeDesc&);
std::unique_ptr<Layer> make_standardize(const NodeDesc&);
std::unique_ptr<Layer> make_hog_gradient(const NodeDesc&);
std::unique_ptr<Layer> make_hog_blocks(const NodeDesc&);
std::unique_ptr<Layer> make_linear_window(const NodeDesc&);
std::unique_ptr<Layer> make_flip(const NodeDesc&);
std::unique_ptr<Layer> make_softmax_mean(const NodeDesc&);
std::unique_ptr<Layer> make_refine(const NodeDesc&);
std::unique_ptr<Layer> make_activation(const NodeDesc&);
std::unique_ptr<Layer> make_channel_op(const NodeDesc&);
std::unique_ptr<Layer> make_binary(const NodeDesc&);
std::unique_ptr<Layer> make_global_avgpool(const NodeDesc&);
std::unique_ptr<Layer> make_conv(const NodeDesc&);
std::unique_ptr<Layer> make_pool(const NodeDesc&);
std::unique_ptr<Layer> make_conv_transpose(const NodeDesc&);

namespace {
struct Entry {
  const char* type;
  LayerFactory make;
};
constexpr Entry kLayers[] = {
    {"conv2d", make_conv2d},           {"relu", make_relu},
    {"maxpool2d", make_maxpool2d},     {"downscale", make_downscale},
    {"upsample", make_upsample},       {"concat", make_concat},
    {"argmax", make_argmax},           {"softmax", make_softmax},
    {"rgb_to_yuv", make_rgb_to_yuv},   {"contrast_norm", make_contrast_norm},
    {"standardize", make_standardize}, {"hog_gradient", make_hog_gradient},
    {"hog_blocks", make_hog_blocks},   {"linear_window", make_linear_window},
    {"flip", make_flip},               {"softmax_mean", make_softmax_mean},
    {"refine", make_refine},           {"activation", make_activation},
    {"channel_op", make_channel_op},   {"binary", make_binary},
    {"global_avgpool", make_global_avgpool}, {"conv", make_conv},
    {"pool", make_pool},            {"conv_transpose", make_conv_transpose},
};
}  // namespace

std::unique_ptr<Layer> create_layer(const NodeDesc& d) {
  for (const auto& e : kLayers)
    if (d.type == e.type) return e.make(d);
  std::string known;
  for (const auto& e : kLayers) known += std::string(known.empty() ? "" : ", ") + e.type;
  throw_error("graph line ", d.line, ": node '", d.name, "' has unknown layer type '", d.type,
              "' (known: ", known, ")");
}

std::vector<std::string> layer_types() {
  std::vector<std::string> t;
  for (const auto& e : kLayers) t.push_back(e.type);
  return t;
}

}  // namespace scenelab
