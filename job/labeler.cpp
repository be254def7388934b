#include "job/labeler.h"

#include <chrono>
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"

namespace scenelab {

Labeler::Labeler(const Model& model, std::unique_ptr<Backend> backend, int keep)
    : plans_(model, std::move(backend), Plans::Options{nullptr, "", keep}) {
  SL_REQUIRE(model.graph.find("labels_full"), "model '", model.name,
             "' has no node 'labels_full' (class index per input pixel)");
}

const PlanIO& Labeler::plan_io() {
  static const PlanIO io = [] {
    PlanIO p;
    p.u8_input = true;  // the 8-bit pixels go up as they are, converted on the backend
    p.u8_outputs = {"labels_full"};
    return p;
  }();
  return io;
}

LabelMap Labeler::label(const Image8& rgb) {
  SL_REQUIRE(rgb.channels == 3, "Labeler::label expects RGB, got ", rgb.channels, " channels");
  Graph& g = plans_.get(1, rgb.height, rgb.width, plan_io()).graph;
  const Shape lab = g.shape_of("labels_full");
  SL_REQUIRE(lab.h == rgb.height && lab.w == rgb.width && lab.c == 1, "node 'labels_full' has shape ",
             lab.str(), ", expected 1x1x", rgb.height, "x", rgb.width);
  auto t0 = std::chrono::steady_clock::now();
  LabelMap m{rgb.width, rgb.height, std::vector<uint8_t>(lab.numel())};
  g.run_u8(rgb.pixels.data());
  g.fetch_u8_async("labels_full", m.labels.data());
  g.synchronize();
  last_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

std::vector<std::vector<float>> Labeler::class_probabilities(const std::vector<int>& cls, int* h,
                                                             int* w, Geometry* geometry) const {
  const Graph& g = graph();
  Tensor st = g.fetch("scores");
  *h = st.shape().h;
  *w = st.shape().w;
  *geometry = g.geometry_of("scores");
  return scenelab::class_probabilities(st.view(), cls);
}

std::vector<std::vector<float>> class_probabilities(const TensorView& s, const std::vector<int>& cls) {
  for (int c : cls)
    SL_REQUIRE(c >= 0 && c < s.shape.c, "class ", c, " out of range 0..", s.shape.c - 1);
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

namespace {
// (1 - alpha) * a + alpha * b in integers, alpha in 256ths (overlay_weight): the same bytes on
// every build (a float blend's rounding moved with the compiler's fused multiply-adds) and on the
// GPU (engine/png_rows_cuda.h); at alpha 0.5 (the default) exactly (a + b + 1) / 2, which `half`
// computes with no multiply.
inline uint8_t blend(uint8_t a, uint8_t b, int w256, bool half) {
  return half ? uint8_t((unsigned(a) + b + 1) >> 1)
              : uint8_t(((256 - unsigned(w256)) * a + unsigned(w256) * b + 128) >> 8);
}
}  // namespace

int overlay_weight(float alpha) {
  SL_REQUIRE(alpha >= 0.f && alpha <= 1.f, "overlay: alpha ", alpha, " not in 0..1");
  return int(std::lround(alpha * 256.f));
}

Image8 overlay(const Image8& rgb, const Image8& color, float alpha) {
  SL_REQUIRE(rgb.pixels.size() == color.pixels.size(), "overlay: image and labels differ in size");
  Image8 out = rgb;
  const int w256 = overlay_weight(alpha);
  const bool half = w256 == 128;
  for (size_t i = 0; i < out.pixels.size(); ++i) out.pixels[i] = blend(rgb.pixels[i], color.pixels[i], w256, half);
  return out;
}

ColourTable colour_table(const std::vector<std::array<uint8_t, 3>>& palette) {
  SL_REQUIRE(!palette.empty(), "overlay: empty palette");
  ColourTable t;
  for (size_t v = 0; v < 256; ++v)
    for (size_t k = 0; k < 3; ++k) t[3 * v + k] = palette[std::min(v, palette.size() - 1)][k];
  return t;
}

Image8 overlay_labels(const Image8& rgb, const LabelMap& m,
                      const std::vector<std::array<uint8_t, 3>>& palette, float alpha) {
  SL_REQUIRE(rgb.channels == 3 && rgb.width == m.width && rgb.height == m.height,
             "overlay: image and labels differ in size");
  Image8 out{rgb.width, rgb.height, 3, std::vector<uint8_t>(rgb.pixels.size())};
  const ColourTable lut = colour_table(palette);  // no clamp in the loop
  const uint8_t* src = rgb.pixels.data();
  const uint8_t* lab = m.labels.data();
  uint8_t* dst = out.pixels.data();
  // `half` a compile-time constant in each loop, so the integer blend has no test per pixel;
  // the pointers by value (stores through dst could alias captured references)
  const size_t n = m.labels.size();
  const int w256 = overlay_weight(alpha);
  const uint8_t* table = lut.data();
  auto fill = [src, lab, dst, n, w256, table](auto half) {
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < 3; ++k) dst[3 * i + k] = blend(src[3 * i + k], table[3 * size_t(lab[i]) + k], w256, half);
  };
  if (w256 == 128) fill(std::true_type{});
  else fill(std::false_type{});
  return out;
}

std::vector<size_t> histogram(const LabelMap& m, int classes) {
  std::vector<size_t> h(size_t(classes), 0);
  for (uint8_t l : m.labels)
    if (l < classes) h[l]++;
  return h;
}

}  // namespace scenelab
