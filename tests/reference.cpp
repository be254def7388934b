#include "tests/reference.h"

#include <algorithm>
#include <limits>
#include <random>

#include "core/error.h"
#include "engine/graph_desc.h"

namespace scenelab::test {

Ref to_ref(const TensorView& t) {
  Ref r(t.shape);
  for (size_t i = 0; i < r.v.size(); ++i) r.v[i] = t.f32()[i];
  return r;
}

Tensor random_tensor(Shape s, uint32_t seed, float lo, float hi) {
  Tensor t(s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (size_t i = 0; i < t.numel(); ++i) t[i] = d(rng);
  return t;
}

Model random_model_from_text(const std::string& text, uint32_t seed) {
  Model m;
  m.name = "random";
  m.graph = GraphDesc::parse(text);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (const auto& r : required_params(m.graph)) {
    Tensor t(param_shape(r.dims));
    const bool sd = r.dataset.find("/std") != std::string::npos;
    for (size_t i = 0; i < t.numel(); ++i) t[i] = sd ? 0.5f + std::abs(u(rng)) : u(rng);
    m.params.emplace(r.dataset, std::move(t));
  }
  return m;
}

double rel_error(const TensorView& got, const Ref& want) {
  if (got.shape != want.shape) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < want.v.size(); ++i) {
    double d = std::abs(double(got.f32()[i]) - want.v[i]);
    if (!(d == d)) return std::numeric_limits<double>::infinity();  // NaN (poison survived)
    num = std::max(num, d);
    den = std::max(den, std::abs(want.v[i]));
  }
  return den > 0 ? num / den : num;
}

Ref ref_conv2d(const Ref& x, const Ref& w, const Ref* b, int pad, bool relu) {
  const int k = w.shape.h, O = w.shape.n;
  Ref y(Shape(x.shape.n, O, x.shape.h + 2 * pad - k + 1, x.shape.w + 2 * pad - k + 1));
  for (int n = 0; n < x.shape.n; ++n)
    for (int o = 0; o < O; ++o)
      for (int i = 0; i < y.shape.h; ++i)
        for (int j = 0; j < y.shape.w; ++j) {
          double s = b ? b->v[size_t(o)] : 0.0;
          for (int c = 0; c < x.shape.c; ++c)
            for (int dy = 0; dy < k; ++dy)
              for (int dx = 0; dx < k; ++dx) {
                int yy = i + dy - pad, xx = j + dx - pad;
                if (yy < 0 || xx < 0 || yy >= x.shape.h || xx >= x.shape.w) continue;
                s += w.at(o, c, dy, dx) * x.at(n, c, yy, xx);
              }
          y.at(n, o, i, j) = relu ? std::max(s, 0.0) : s;
        }
  return y;
}

Ref ref_relu(const Ref& x) {
  Ref y = x;
  for (auto& v : y.v) v = std::max(v, 0.0);
  return y;
}

Ref ref_maxpool(const Ref& x, int k, int s) {
  Ref y(Shape(x.shape.n, x.shape.c, (x.shape.h - k) / s + 1, (x.shape.w - k) / s + 1));
  for (int n = 0; n < y.shape.n; ++n)
    for (int c = 0; c < y.shape.c; ++c)
      for (int i = 0; i < y.shape.h; ++i)
        for (int j = 0; j < y.shape.w; ++j) {
          double m = -std::numeric_limits<double>::infinity();
          for (int dy = 0; dy < k; ++dy)
            for (int dx = 0; dx < k; ++dx) m = std::max(m, x.at(n, c, i * s + dy, j * s + dx));
          y.at(n, c, i, j) = m;
        }
  return y;
}

Ref ref_avgpool(const Ref& x, int f) {
  Ref y(Shape(x.shape.n, x.shape.c, x.shape.h / f, x.shape.w / f));
  for (int n = 0; n < y.shape.n; ++n)
    for (int c = 0; c < y.shape.c; ++c)
      for (int i = 0; i < y.shape.h; ++i)
        for (int j = 0; j < y.shape.w; ++j) {
          double s = 0;
          for (int dy = 0; dy < f; ++dy)
            for (int dx = 0; dx < f; ++dx) s += x.at(n, c, i * f + dy, j * f + dx);
          y.at(n, c, i, j) = s / (f * f);
        }
  return y;
}

Ref ref_concat(const std::vector<Ref>& xs) {
  Shape s = xs[0].shape;
  s.c = 0;
  for (const auto& x : xs) s.c += x.shape.c;
  Ref y(s);
  for (int n = 0; n < s.n; ++n) {
    int c0 = 0;
    for (const auto& x : xs) {
      for (int c = 0; c < x.shape.c; ++c)
        for (int i = 0; i < s.h; ++i)
          for (int j = 0; j < s.w; ++j) y.at(n, c0 + c, i, j) = x.at(n, c, i, j);
      c0 += x.shape.c;
    }
  }
  return y;
}

Ref ref_softmax(const Ref& x) {
  Ref y(x.shape);
  for (int n = 0; n < x.shape.n; ++n)
    for (int i = 0; i < x.shape.h; ++i)
      for (int j = 0; j < x.shape.w; ++j) {
        double s = 0;
        for (int c = 0; c < x.shape.c; ++c) s += std::exp(x.at(n, c, i, j));
        for (int c = 0; c < x.shape.c; ++c) y.at(n, c, i, j) = std::exp(x.at(n, c, i, j)) / s;
      }
  return y;
}

Ref ref_refine(const Ref& x, const Ref& g, double sigma_s, double sigma_r, int iterations) {
  Ref p = ref_softmax(x);
  const int N = x.shape.n, C = x.shape.c, H = x.shape.h, W = x.shape.w;
  // The distance in the transformed domain between two pixels of frame n.
  auto dist = [&](int n, int y0, int x0, int y1, int x1) {
    double d = 0;
    for (int c = 0; c < g.shape.c; ++c) d += std::abs(g.at(n, c, y0, x0) - g.at(n, c, y1, x1));
    return 1 + sigma_s / sigma_r * d;
  };
  for (int it = 0; it < iterations; ++it) {
    const double sigma = sigma_s * std::sqrt(3.0) * std::pow(2.0, iterations - 1 - it) /
                         std::sqrt(std::pow(4.0, iterations) - 1);
    auto weight = [&](double d) { return std::exp(-std::sqrt(2.0) / sigma * d); };
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) {
        for (int i = 0; i < H; ++i) {
          for (int j = 1; j < W; ++j)
            p.at(n, c, i, j) += weight(dist(n, i, j, i, j - 1)) * (p.at(n, c, i, j - 1) - p.at(n, c, i, j));
          for (int j = W - 2; j >= 0; --j)
            p.at(n, c, i, j) += weight(dist(n, i, j + 1, i, j)) * (p.at(n, c, i, j + 1) - p.at(n, c, i, j));
        }
        for (int j = 0; j < W; ++j) {
          for (int i = 1; i < H; ++i)
            p.at(n, c, i, j) += weight(dist(n, i, j, i - 1, j)) * (p.at(n, c, i - 1, j) - p.at(n, c, i, j));
          for (int i = H - 2; i >= 0; --i)
            p.at(n, c, i, j) += weight(dist(n, i + 1, j, i, j)) * (p.at(n, c, i + 1, j) - p.at(n, c, i, j));
        }
      }
  }
  for (double& v : p.v) v = std::log(std::max(v, double(std::numeric_limits<float>::min())));
  return p;
}

Ref ref_rgb_to_yuv(const Ref& x) {
  const double m[3][3] = {{0.299, 0.587, 0.114},
                          {-0.14713, -0.28886, 0.436},
                          {0.615, -0.51499, -0.10001}};
  Ref y(x.shape);
  for (int n = 0; n < x.shape.n; ++n)
    for (int o = 0; o < 3; ++o)
      for (int i = 0; i < x.shape.h; ++i)
        for (int j = 0; j < x.shape.w; ++j)
          y.at(n, o, i, j) = m[o][0] * x.at(n, 0, i, j) + m[o][1] * x.at(n, 1, i, j) +
                             m[o][2] * x.at(n, 2, i, j);
  return y;
}

// Direct 2-D window sums (not separable) so the reference does not share the layer's method.
Ref ref_contrast_norm(const Ref& x, int size, double sigma, double eps) {
  const int r = size / 2;
  std::vector<double> g(static_cast<size_t>(size));
  double gs = 0;
  for (int i = 0; i < size; ++i) {
    double t = (i - r) / sigma;
    g[size_t(i)] = std::exp(-0.5 * t * t);
    gs += g[size_t(i)];
  }
  for (auto& v : g) v /= gs;
  const int H = x.shape.h, W = x.shape.w;
  auto window_mean = [&](const std::vector<double>& plane, int i, int j) {
    double s = 0, mass = 0;
    for (int dy = -r; dy <= r; ++dy)
      for (int dx = -r; dx <= r; ++dx) {
        int yy = i + dy, xx = j + dx;
        if (yy < 0 || xx < 0 || yy >= H || xx >= W) continue;
        double wgt = g[size_t(dy + r)] * g[size_t(dx + r)];
        s += wgt * plane[size_t(yy) * W + xx];
        mass += wgt;
      }
    return s / mass;
  };
  Ref y(x.shape);
  for (int n = 0; n < x.shape.n; ++n)
    for (int c = 0; c < x.shape.c; ++c) {
      std::vector<double> p(static_cast<size_t>(H) * W), cen(p.size()), sq(p.size()), sd(p.size());
      for (int i = 0; i < H; ++i)
        for (int j = 0; j < W; ++j) p[size_t(i) * W + j] = x.at(n, c, i, j);
      for (int i = 0; i < H; ++i)
        for (int j = 0; j < W; ++j) {
          cen[size_t(i) * W + j] = p[size_t(i) * W + j] - window_mean(p, i, j);
          sq[size_t(i) * W + j] = cen[size_t(i) * W + j] * cen[size_t(i) * W + j];
        }
      double mean_sd = 0;
      for (int i = 0; i < H; ++i)
        for (int j = 0; j < W; ++j) {
          sd[size_t(i) * W + j] = std::sqrt(window_mean(sq, i, j));
          mean_sd += sd[size_t(i) * W + j];
        }
      double thr = std::max(mean_sd / double(H * W), eps);
      for (int i = 0; i < H; ++i)
        for (int j = 0; j < W; ++j)
          y.at(n, c, i, j) = cen[size_t(i) * W + j] / std::max(sd[size_t(i) * W + j], thr);
    }
  return y;
}

Ref ref_standardize(const Ref& x, const std::vector<double>& mean, const std::vector<double>& sd) {
  Ref y(x.shape);
  for (int n = 0; n < x.shape.n; ++n)
    for (int c = 0; c < x.shape.c; ++c)
      for (int i = 0; i < x.shape.h; ++i)
        for (int j = 0; j < x.shape.w; ++j)
          y.at(n, c, i, j) = (x.at(n, c, i, j) - mean[size_t(c)]) / sd[size_t(c)];
  return y;
}

Ref ref_resample(const Ref& x, int h, int w, const std::vector<double>& sy,
                 const std::vector<double>& sx, bool bilinear) {
  Ref y(Shape(x.shape.n, x.shape.c, h, w));
  auto clampd = [](double v, int n) { return std::min(std::max(v, 0.0), double(n - 1)); };
  for (int n = 0; n < x.shape.n; ++n)
    for (int c = 0; c < x.shape.c; ++c)
      for (int i = 0; i < h; ++i)
        for (int j = 0; j < w; ++j) {
          double fy = clampd(sy[size_t(i)], x.shape.h), fx = clampd(sx[size_t(j)], x.shape.w);
          if (!bilinear) {
            y.at(n, c, i, j) = x.at(n, c, int(fy), int(fx));
            continue;
          }
          int y0 = int(std::floor(fy)), x0 = int(std::floor(fx));
          int y1 = std::min(y0 + 1, x.shape.h - 1), x1 = std::min(x0 + 1, x.shape.w - 1);
          double ay = fy - y0, ax = fx - x0;
          y.at(n, c, i, j) = (1 - ay) * ((1 - ax) * x.at(n, c, y0, x0) + ax * x.at(n, c, y0, x1)) +
                             ay * ((1 - ax) * x.at(n, c, y1, x0) + ax * x.at(n, c, y1, x1));
        }
  return y;
}

LayerRun run_layer(const std::string& line, const std::vector<const Tensor*>& inputs,
                   std::map<std::string, Tensor> params, int threads, bool fused_relu,
                   std::vector<Geometry> in_geometry, CpuConv conv) {
  // Parse through the real graph parser: declare the inputs first.
  std::string text = "input x0 channels=" + std::to_string(inputs[0]->shape().c) + "\n";
  for (size_t i = 1; i < inputs.size(); ++i)
    text += "x" + std::to_string(i) + " = relu(x0)\n";  // placeholders so names are defined
  text += line + "\n";
  GraphDesc g = GraphDesc::parse(text);
  LayerRun r;
  r.layer = create_layer(g.nodes.back());
  std::vector<Shape> shapes;
  ForwardArgs a;
  for (const Tensor* t : inputs) {
    shapes.push_back(t->shape());
    a.in.push_back(t->view());
  }
  a.in_geometry = in_geometry.empty() ? std::vector<Geometry>(inputs.size()) : in_geometry;
  Shape out = r.layer->infer_shape(shapes);
  a.out_geometry = r.layer->infer_geometry(a.in_geometry, shapes);
  r.out = Tensor(out, std::numeric_limits<float>::quiet_NaN());  // poison
  a.out = r.out.view();
  r.params = std::move(params);
  LayerParams lp;
  for (const auto& spec : r.layer->param_specs(shapes)) {
    auto it = r.params.find(spec.name);
    SL_REQUIRE(it != r.params.end(), "test gave no parameter ", spec.name);
    lp.set(spec.name, &it->second);
  }
  a.params = &lp;
  CpuBackend cpu(threads, conv);
  std::vector<float> ws(r.layer->workspace_floats(shapes, out, cpu) + 1,
                        std::numeric_limits<float>::quiet_NaN());
  a.workspace = ws.data();
  a.threads = threads;
  a.cpu_conv = conv;
  a.fused_relu = fused_relu;
  cpu.activate();  // as a Graph does before its layers run (thread counts for OpenMP and Eigen)
  r.layer->forward_cpu(a);
  return r;
}

}  // namespace scenelab::test
