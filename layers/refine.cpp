// Edge-aware refinement of class scores: `refine(scores, image) sigma_s=S sigma_r=R iterations=K`.
// The scores' softmax probabilities are smoothed by the domain transform's recursive filter (Gastal
// and Oliveira, SIGGRAPH 2011) guided by the image, as Chen et al. (CVPR 2016) refine a
// segmentation network's scores: along every row, then every column, each pixel is blended with
// its neighbour by the weight a^d, where d = 1 + (S / R) * sum over the image's channels of
// |the two pixels' difference| (the distance between them in the transformed domain) and
// a = exp(-sqrt(2) / sigma_k), left to right then right to left (top to bottom, bottom to top);
// K such iterations, with sigma_k = S sqrt(3) 2^(K-1-k) / sqrt(4^K - 1) (k = 0..K-1), so that the
// filter's spatial spread is S pixels where the image is flat and the probabilities stop spreading
// at its edges (a step of R in one channel is as far as S pixels of flat image). The output is the
// log of the refined probabilities, at least log(FLT_MIN): class scores whose softmax is them (as
// softmax_mean's), so argmax, softmax_mean and the detection head read them as any scores.
// Inputs: the scores (N, C, H, W) at the image's resolution, and the image (N, Ci, H, W; its
// values as the graph's input has them, RGB in [0, 1]). Geometry: the scores'. f32 NCHW on both
// backends. Every probability the filter writes is a convex mix of probabilities, so each pixel's
// still sum to 1.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#include "layers/channel_math.h"
#include "layers/refine_weights.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class Refine : public Layer {
 public:
  explicit Refine(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"sigma_s", "sigma_r", "iterations"});
    sigma_s_ = d.attrs.get_float("sigma_s");
    sigma_r_ = d.attrs.get_float("sigma_r");
    iterations_ = d.attrs.get_int("iterations", 3);
    SL_REQUIRE(std::isfinite(sigma_s_) && sigma_s_ > 0 && sigma_s_ <= kRefineMaxSigmaS, "refine '", d.name,
               "': sigma_s must be in (0, ", kRefineMaxSigmaS, "] pixels, got ", sigma_s_);
    SL_REQUIRE(std::isfinite(sigma_r_) && sigma_r_ > 0 && sigma_r_ <= kRefineMaxSigmaR, "refine '", d.name,
               "': sigma_r must be in (0, ", kRefineMaxSigmaR, "], got ", sigma_r_);
    SL_REQUIRE(iterations_ >= 1 && iterations_ <= kRefineMaxIterations, "refine '", d.name,
               "': iterations must be 1-", kRefineMaxIterations, ", got ", iterations_);
  }
  const char* type() const override { return "refine"; }
  int num_inputs() const override { return 2; }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    SL_REQUIRE(in[0].n == in[1].n && in[0].h == in[1].h && in[0].w == in[1].w, "refine '", name(),
               "': the scores ", in[0].str(), " and the image ", in[1].str(),
               " must have the same batch, height and width (the scores at the image's resolution)");
    return in[0];
  }
  // Two weight maps (along rows, along columns) of the first iteration, a value a pixel; each
  // later iteration's are their squares (its sigma is half the one before).
  size_t workspace_floats(const std::vector<Shape>& in, const Shape&, const Backend&) const override {
    return 2 * size_t(in[0].n) * in[0].plane();
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &g = a.in[1], &y = a.out;
    const int n = x.shape.n, c = x.shape.c, h = x.shape.h, w = x.shape.w;
    const size_t plane = x.shape.plane(), frames_px = size_t(n) * plane;
    if (!frames_px || !c) return;
    float* vx = a.workspace;  // weight of pixel (y, x) with (y, x - 1); with (y - 1, x) below
    float* vy = a.workspace + frames_px;
    const RefineCoefficients k = refine_coefficients(sigma_s_, sigma_r_, iterations_);
    parallel_for(int64_t(n) * h, a.threads, [&](int64_t r) {
      const int f = int(r / h), row = int(r % h);
      const float* gf = g.f32() + size_t(f) * g.shape.c * plane;
      for_each_span(size_t(w), [&](size_t j, size_t count) {
        const size_t i = size_t(row) * w + j;
        // The first column's and the first row's weights are never read: 0 there.
        SpanScratch d_buf;
        auto d = d_buf(count);
        for (size_t q = 0; q < count; ++q)
          d[int64_t(q)] = j + q ? refine_distance(gf, g.shape.c, plane, i + q, i + q - 1) : 0.f;
        SpanArray(vx + f * plane + i, int64_t(count)) = d = refine_exponent(d, k).exp();
        if (!j) vx[f * plane + i] = 0.f;
        if (row) {
          for (size_t q = 0; q < count; ++q) d[int64_t(q)] = refine_distance(gf, g.shape.c, plane, i + q, i + q - w);
          SpanArray(vy + f * plane + i, int64_t(count)) = d = refine_exponent(d, k).exp();
        } else {
          SpanArray(vy + f * plane + i, int64_t(count)).setZero();
        }
        softmax_span(x, y, f, i, count);
      });
    });
    constexpr int kBlock = 64;  // columns a task filters down and up, vectorised across them
    const int blocks = (w + kBlock - 1) / kBlock;
    const int row_groups = (h + kRows - 1) / kRows;
    for (int it = 0; it < iterations_; ++it) {
      if (it)  // sigma halves: each weight a^d becomes its square
        parallel_for(int64_t(2 * frames_px + 4095) / 4096, a.threads, [&](int64_t b) {
          const size_t end = std::min(2 * frames_px, size_t(b + 1) * 4096);
          for (size_t i = size_t(b) * 4096; i < end; ++i) a.workspace[i] *= a.workspace[i];
        });
      parallel_for(int64_t(n) * c * row_groups, a.threads, [&](int64_t t) {  // along each row, there and back
        const int64_t pl = t / row_groups;
        const int f = int(pl / c), row0 = int(t % row_groups) * kRows, rows = std::min(kRows, h - row0);
        float* p = y.f32() + size_t(pl) * plane + size_t(row0) * w;
        const float* v = vx + f * plane + size_t(row0) * w;
        if (rows == kRows)
          filter_rows<kRows>(p, v, w);
        else
          for (int q = 0; q < rows; ++q) filter_rows<1>(p + size_t(q) * w, v + size_t(q) * w, w);
      });
      parallel_for(int64_t(n) * c * blocks, a.threads, [&](int64_t t) {  // along each column
        const int64_t pl = t / blocks;
        const int f = int(pl / c), x0 = int(t % blocks) * kBlock, x1 = std::min(w, x0 + kBlock);
        float* p = y.f32() + size_t(pl) * plane;
        const float* v = vy + f * plane;
        for (int row = 1; row < h; ++row)
          for (int col = x0; col < x1; ++col) {
            const size_t i = size_t(row) * w + col;
            p[i] += v[i] * (p[i - w] - p[i]);
          }
        for (int row = h - 2; row >= 0; --row)
          for (int col = x0; col < x1; ++col) {
            const size_t i = size_t(row) * w + col;
            p[i] += v[i + w] * (p[i + w] - p[i]);
          }
      });
    }
    parallel_for(int64_t(n) * c * h, a.threads, [&](int64_t r) {
      float* p = y.f32() + size_t(r) * w;
      log_floored(p, size_t(w));
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::refine(a.in[0], a.in[1], a.out, a.workspace, refine_coefficients(sigma_s_, sigma_r_, iterations_),
                 iterations_, ctx.stream);
  }
#endif

 private:
  // Rows a task filters along at once: each step of a row depends on the one before, so R rows'
  // steps are interleaved to keep R independent chains in flight.
  static constexpr int kRows = 8;

  // The R rows from p (w apart), weights v alike: left to right, then right to left.
  template <int R>
  static void filter_rows(float* p, const float* v, int w) {
    float prev[R];
    for (int q = 0; q < R; ++q) prev[q] = p[size_t(q) * w];
    for (int col = 1; col < w; ++col)
      for (int q = 0; q < R; ++q) {
        float& at = p[size_t(q) * w + col];
        at += v[size_t(q) * w + col] * (prev[q] - at);
        prev[q] = at;
      }
    for (int q = 0; q < R; ++q) prev[q] = p[size_t(q) * w + w - 1];
    for (int col = w - 2; col >= 0; --col)
      for (int q = 0; q < R; ++q) {
        float& at = p[size_t(q) * w + col];
        at += v[size_t(q) * w + col + 1] * (prev[q] - at);
        prev[q] = at;
      }
  }

  double sigma_s_ = 0, sigma_r_ = 0;
  int iterations_ = 3;
};

}  // namespace

std::unique_ptr<Layer> make_refine(const NodeDesc& d) { return std::make_unique<Refine>(d); }

}  // namespace scenelab
