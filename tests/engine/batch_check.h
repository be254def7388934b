// Batch n through one plan gives what n single runs give: one graph per layer type (every type in
// the registry is covered) and both whole networks. Used by the CPU test (exact) and the GPU test.
#pragma once
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "tests/reference.h"
#include "weights/default_model.h"

namespace scenelab::test {

struct BatchCase {
  std::string what;  // a layer type, or a network name
  Model model;
  int h, w;
};

inline std::vector<BatchCase> batch_cases() {
  auto one = [](const std::string& type, const std::string& body, int h, int w) {
    return BatchCase{type, random_model_from_text("input x channels=3\n" + body, 7), h, w};
  };
  std::vector<BatchCase> c{
      one("conv2d", "y = conv2d(x) out=5 k=3 pad=same\nz = conv2d(y) out=4 k=1\noutput z\n", 23, 17),
      one("relu", "y = relu(x)\noutput y\n", 23, 17),
      one("maxpool2d", "y = maxpool2d(x) k=2\noutput y\n", 23, 17),
      one("downscale", "y = downscale(x) factor=2\noutput y\n", 23, 17),
      one("upsample", "d = downscale(x) factor=2\ny = upsample(d, x) mode=bilinear\noutput y\n", 23, 17),
      one("upsample", "y = upsample(x) scale=0.7\noutput y\n", 23, 17),
      one("concat", "a = relu(x)\ny = concat(x, a)\noutput y\n", 23, 17),
      one("argmax", "y = argmax(x)\noutput y\n", 23, 17),
      one("softmax", "y = softmax(x)\noutput y\n", 23, 17),
      one("rgb_to_yuv", "y = rgb_to_yuv(x)\noutput y\n", 23, 17),
      one("contrast_norm", "y = contrast_norm(x) size=5\noutput y\n", 23, 17),
      one("standardize", "y = standardize(x)\noutput y\n", 23, 17),
      one("hog_gradient", "y = hog_gradient(x)\noutput y\n", 23, 17),
      one("hog_blocks", "g = hog_gradient(x)\ny = hog_blocks(g) cell=4 cells=2 stride=4\noutput y\n", 23, 17),
      one("linear_window",
          "g = hog_gradient(x)\nb = hog_blocks(g) cell=4 cells=2 stride=4\n"
          "y = linear_window(b) out=2 kh=3 kw=2\noutput y\n", 31, 21),
      one("flip", "p = maxpool2d(x) k=2\na = flip(p)\nb = flip(p, x) axis=h\ny = concat(a, b)\noutput y\n", 23, 17),
      one("softmax_mean", "a = relu(x)\nf = flip(x)\ny = softmax_mean(x, a, f)\noutput y\n", 23, 17),
      one("refine", "s = conv2d(x) out=4 k=3 pad=same\ny = refine(s, x) sigma_s=9 sigma_r=0.3\noutput y\n", 23, 17),
      one("conv", "y = conv(x) out=6 kernel=3,2 stride=2,1 dilation=1,2 pads=1,0,1,2 groups=3\noutput y\n", 23, 17),
      one("pool", "a = pool(x) kernel=3 stride=2 pads=1,1,1,1 count_pad=1\nm = pool(x) mode=max kernel=3,2 stride=2 pads=1,0,1,1\n"
          "y = concat(a, m)\noutput y\n", 23, 17),
      one("activation", "y = activation(x) fn=hard_swish\noutput y\n", 23, 17),
      one("conv_transpose", "y = conv_transpose(x) out=4 kernel=3 stride=2 pads=1,1,1,1 output_pad=1\noutput y\n", 23,
          17),
      one("channel_op", "y = channel_op(x) op=prelu\noutput y\n", 23, 17),
      one("channel_op", "y = channel_op(x) op=affine\nr = relu(y)\noutput r\n", 23, 17),
      one("global_avgpool", "g = global_avgpool(x)\ny = binary(x, g) op=mul\noutput y\n", 23, 17),
      one("binary", "a = activation(x) fn=sigmoid\ny = binary(x, a) op=sub\noutput y\n", 23, 17),
  };
  c.push_back({"reference", make_random_model("reference", 5, 3), 61, 53});
  c.push_back({"multiscale", make_random_model("multiscale", 5, 3), 45, 37});
  return c;
}

inline std::set<std::string> batch_case_types() {
  std::set<std::string> t;
  for (const auto& c : batch_cases()) t.insert(c.what);
  return t;
}

// Max over the graph's outputs of max |batch - single| / max |single|.
inline double batch_vs_single(const Model& m, const Backend& b, int n, int h, int w) {
  Tensor x = random_tensor(Shape(n, 3, h, w), 100 + uint32_t(n), 0.f, 1.f);
  Graph batch(m), single(m);
  batch.plan(n, h, w, b);
  batch.run(x.view());
  single.plan(1, h, w, b);
  double worst = 0;
  for (const auto& o : m.graph.outputs) {
    const Tensor got = batch.fetch(o);
    const size_t per = got.numel() / size_t(n);
    for (int i = 0; i < n; ++i) {
      single.run(TensorView{x.data() + size_t(i) * 3 * h * w, Shape(1, 3, h, w), Format{}});
      const Tensor want = single.fetch(o);
      double num = 0, den = 0;
      for (size_t k = 0; k < per; ++k) {
        num = std::max(num, double(std::abs(got[size_t(i) * per + k] - want[k])));
        den = std::max(den, double(std::abs(want[k])));
        if (std::isnan(got[size_t(i) * per + k]) != std::isnan(want[k])) num = INFINITY;
      }
      worst = std::max(worst, den > 0 ? num / den : num);
    }
  }
  return worst;
}

}  // namespace scenelab::test
