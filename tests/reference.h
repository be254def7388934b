// Straightforward float64 references (naive loops) shared by every layer test, and a harness
// that runs one layer on the CPU with poisoned outputs.
#pragma once
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/layer.h"
#include "engine/model.h"
#include "core/tensor.h"

namespace scenelab::test {

// A float64 NCHW array.
struct Ref {
  Shape shape;
  std::vector<double> v;
  explicit Ref(Shape s = {}) : shape(s), v(s.numel(), 0.0) {}
  double& at(int n, int c, int y, int x) {
    return v[((size_t(n) * shape.c + c) * shape.h + y) * shape.w + x];
  }
  double at(int n, int c, int y, int x) const {
    return v[((size_t(n) * shape.c + c) * shape.h + y) * shape.w + x];
  }
};

Ref to_ref(const TensorView& t);
Tensor random_tensor(Shape s, uint32_t seed, float lo = -1.f, float hi = 1.f);
// A model of this graph text with random parameters (uniform in [-0.5, 0.5]; standard
// deviations in [0.5, 1]).
Model random_model_from_text(const std::string& text, uint32_t seed);

// max |a - b| / max |b|  (b: the reference)
double rel_error(const TensorView& got, const Ref& want);

Ref ref_conv2d(const Ref& x, const Ref& w, const Ref* b, int pad, bool relu);
Ref ref_relu(const Ref& x);
Ref ref_maxpool(const Ref& x, int k, int s);
Ref ref_avgpool(const Ref& x, int f);
Ref ref_concat(const std::vector<Ref>& xs);
Ref ref_softmax(const Ref& x);
// The refine layer (layers/refine.cpp) from its definition: softmax, the domain transform's
// recursive filter guided by g (each iteration's weights exp(-sqrt(2) / sigma_k * d) computed
// anew), log with the floor FLT_MIN.
Ref ref_refine(const Ref& x, const Ref& g, double sigma_s, double sigma_r, int iterations);
Ref ref_rgb_to_yuv(const Ref& x);
Ref ref_contrast_norm(const Ref& x, int size, double sigma, double eps);
Ref ref_standardize(const Ref& x, const std::vector<double>& mean, const std::vector<double>& sd);
// Bilinear/nearest resampling at explicit source coordinates per output row/column.
Ref ref_resample(const Ref& x, int h, int w, const std::vector<double>& sy,
                 const std::vector<double>& sx, bool bilinear);

// Runs one layer described by `line` (graph syntax, e.g. "y = conv2d(x) out=4 k=3") on inputs.
struct LayerRun {
  std::unique_ptr<Layer> layer;
  std::map<std::string, Tensor> params;  // by ParamSpec name
  Tensor out;
};
LayerRun run_layer(const std::string& line, const std::vector<const Tensor*>& inputs,
                   std::map<std::string, Tensor> params, int threads = 2,
                   bool fused_relu = false, std::vector<Geometry> in_geometry = {},
                   CpuConv conv = CpuConv::Auto);

}  // namespace scenelab::test
