#include "engine/labeler.h"

#include <chrono>
#include <algorithm>
#include <cmath>

#include "engine/error.h"

namespace scenelab {

Labeler::Labeler(const Model& model, std::unique_ptr<Backend> backend)
    : model_(model), backend_(std::move(backend)), graph_(model) {
  SL_REQUIRE(model.graph.find("labels_full"), "model '", model.name,
             "' has no node 'labels_full' (class index per input pixel)");
}

LabelMap Labeler::label(const Image8& rgb) {
  Tensor x = image_to_tensor(rgb);
  if (!graph_.planned() || graph_.input_shape() != x.shape())
    graph_.plan(1, rgb.height, rgb.width, *backend_);
  auto t0 = std::chrono::steady_clock::now();
  graph_.run(x.view());
  Tensor lab_t = graph_.fetch("labels_full");  // waits for the backend
  last_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  TensorView lab = lab_t.view();
  SL_REQUIRE(lab.shape.h == rgb.height && lab.shape.w == rgb.width && lab.shape.c == 1,
             "node 'labels_full' has shape ", lab.shape.str(), ", expected 1x1x", rgb.height, "x",
             rgb.width);
  LabelMap m{rgb.width, rgb.height, std::vector<uint8_t>(lab.shape.plane())};
  for (size_t i = 0; i < m.labels.size(); ++i) m.labels[i] = uint8_t(lab.data[i]);
  return m;
}

std::vector<std::vector<float>> Labeler::class_probabilities(const std::vector<int>& cls, int* h,
                                                             int* w, Geometry* geometry) const {
  Tensor st = graph_.fetch("scores");
  const TensorView s = st.view();
  for (int c : cls)
    SL_REQUIRE(c >= 0 && c < s.shape.c, "class ", c, " out of range 0..", s.shape.c - 1);
  *h = s.shape.h;
  *w = s.shape.w;
  *geometry = graph_.geometry_of("scores");
  const size_t plane = s.shape.plane();
  std::vector<std::vector<float>> p(cls.size(), std::vector<float>(plane));
  for (size_t i = 0; i < plane; ++i) {
    float m = s.channel(0, 0)[i];
    for (int c = 1; c < s.shape.c; ++c) m = std::max(m, s.channel(0, c)[i]);
    double sum = 0;
    for (int c = 0; c < s.shape.c; ++c) sum += std::exp(double(s.channel(0, c)[i] - m));
    for (size_t k = 0; k < cls.size(); ++k)
      p[k][i] = float(std::exp(double(s.channel(0, cls[k])[i] - m)) / sum);
  }
  return p;
}

Image8 colorize(const LabelMap& m, const std::vector<std::array<uint8_t, 3>>& palette) {
  Image8 img{m.width, m.height, 3, std::vector<uint8_t>(m.labels.size() * 3)};
  for (size_t i = 0; i < m.labels.size(); ++i) {
    const auto& c = palette.at(m.labels[i]);
    for (int k = 0; k < 3; ++k) img.pixels[i * 3 + size_t(k)] = c[size_t(k)];
  }
  return img;
}

Image8 overlay(const Image8& rgb, const Image8& color, float alpha) {
  Image8 out = rgb;
  for (size_t i = 0; i < out.pixels.size(); ++i)
    out.pixels[i] = uint8_t(std::lround((1 - alpha) * rgb.pixels[i] + alpha * color.pixels[i]));
  return out;
}

std::vector<size_t> histogram(const LabelMap& m, int classes) {
  std::vector<size_t> h(size_t(classes), 0);
  for (uint8_t l : m.labels)
    if (l < classes) h[l]++;
  return h;
}

}  // namespace scenelab
