// HOG's block stage: orientation histograms of `cells` x `cells` cells of `cell` x `cell` pixels
// per block, a block every `stride` pixels, each pixel voting (its two bins' magnitude shares,
// from hog_gradient) into the cells around it with bilinear spatial weights times a Gaussian of
// its distance to the block centre (sigma, pixels), the block then normalised by L2-Hys
// (layers/hog_math.h). Output: cells*cells*bins channels per block position, in OpenCV's order
// (cell (cx, cy) at (cx * cells + cy) * bins), so a linear_window over it is OpenCV's detector.
#include <array>
#include <vector>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#include "layers/hog_math.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/hog_cuda.h"
#endif

namespace scenelab {
namespace {

class HogBlocks : public Layer {
 public:
  explicit HogBlocks(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"cell", "cells", "stride", "bins", "sigma", "clip"});
    cell_ = d.attrs.get_int("cell", 8);
    cells_ = d.attrs.get_int("cells", 2);
    stride_ = d.attrs.get_int("stride", cell_);
    bins_ = d.attrs.get_int("bins", 9);
    const int block = cell_ * cells_;
    sigma_ = float(d.attrs.get_float("sigma", (block + block) / 8.0));
    clip_ = float(d.attrs.get_float("clip", 0.2));
    SL_REQUIRE(cell_ >= 1 && cells_ >= 1 && cells_ <= 4 && stride_ >= 1 && bins_ >= 2 && bins_ <= 255,
               "hog_blocks '", name_, "': cell, cells (1..4), stride and bins (2..255) must be positive");
    SL_REQUIRE(block <= 64, "hog_blocks '", name_, "': blocks of at most 64 pixels, got ", block);
    SL_REQUIRE(sigma_ > 0 && clip_ > 0, "hog_blocks '", name_, "': sigma and clip must be positive");
    // Each block pixel (row-major) as the cells it votes into, with its Gaussian weight times the
    // cell's spatial weight, listed by how many (1, 2 or 4 with bilinear cell weights): the CPU
    // loop then has no zero weights and no branches in it.
    for (int p = 0; p < block * block; ++p) {
      const int i = p / block, j = p % block;
      Vote v{p, 0, {}, {}};
      for (int cx = 0; cx < cells_; ++cx)
        for (int cy = 0; cy < cells_; ++cy) {
          const float w = hog::block_gauss(i, j, block, block, sigma_) *
                          (hog::cell_weight(j, cx, cell_) * hog::cell_weight(i, cy, cell_));
          if (w == 0.f) continue;
          SL_REQUIRE(v.n < 4, "hog_blocks '", name_, "': a pixel votes into more than 4 cells");
          v.cell[v.n] = (cx * cells_ + cy) * bins_, v.w[v.n] = w, ++v.n;
        }
      (v.n == 1 ? votes1_ : v.n == 2 ? votes2_ : votes4_).push_back(v);
    }
  }
  const char* type() const override { return "hog_blocks"; }
  int block() const { return cell_ * cells_; }
  int channels() const { return cells_ * cells_ * bins_; }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    const Shape& s = in[0];
    SL_REQUIRE(s.c == 3, "hog_blocks '", name_, "' takes hog_gradient's 3 channels, got ", s.c);
    SL_REQUIRE(s.h >= block() && s.w >= block(), "hog_blocks '", name_, "' needs an input of at least ",
               block(), "x", block(), ", got ", s.w, "x", s.h);
    return Shape(s.n, channels(), (s.h - block()) / stride_ + 1, (s.w - block()) / stride_ + 1);
  }
  Geometry infer_geometry(const std::vector<Geometry>& in,
                          const std::vector<Shape>& /*shapes*/) const override {
    return after_window(in[0], block(), stride_);
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    const int W = x.shape.w, B = block(), K = channels();
    const int bh = y.shape.h, bw = y.shape.w;
    parallel_for(int64_t(x.shape.n) * bh, a.threads, [&](int64_t row) {
      const int n = int(row / bh), by = int(row % bh);
      const float *g0 = x.channel(n, 0), *g1 = x.channel(n, 1), *gb = x.channel(n, 2);
      // Per block: its pixels' two shares and lower bin gathered (vectorises), then each pixel's
      // votes from the lists by cell count (OpenCV's scheme).
      float hist[4 * 4 * 255];
      float A0[64 * 64], A1[64 * 64];
      int H0[64 * 64], H1[64 * 64];
      const int bins = bins_;
      for (int bx = 0; bx < bw; ++bx) {
        std::fill(hist, hist + K, 0.f);
        for (int i = 0; i < B; ++i) {
          const size_t o = size_t(by * stride_ + i) * W + size_t(bx) * stride_;
          for (int j = 0; j < B; ++j) {
            A0[i * B + j] = g0[o + j];
            A1[i * B + j] = g1[o + j];
            const int h0 = int(gb[o + j]);
            H0[i * B + j] = h0;
            H1[i * B + j] = h0 + 1 < bins ? h0 + 1 : 0;
          }
        }
        for (const Vote& v : votes1_) {
          const float a0 = A0[v.p], a1 = A1[v.p];
          const int h0 = H0[v.p], h1 = H1[v.p];
          hist[v.cell[0] + h0] += a0 * v.w[0];
          hist[v.cell[0] + h1] += a1 * v.w[0];
        }
        for (const Vote& v : votes2_) {
          const float a0 = A0[v.p], a1 = A1[v.p];
          const int h0 = H0[v.p], h1 = H1[v.p];
          hist[v.cell[0] + h0] += a0 * v.w[0];
          hist[v.cell[0] + h1] += a1 * v.w[0];
          hist[v.cell[1] + h0] += a0 * v.w[1];
          hist[v.cell[1] + h1] += a1 * v.w[1];
        }
        for (const Vote& v : votes4_) {
          const float a0 = A0[v.p], a1 = A1[v.p];
          const int h0 = H0[v.p], h1 = H1[v.p];
          for (int k = 0; k < 4; ++k) {
            hist[v.cell[k] + h0] += a0 * v.w[k];
            hist[v.cell[k] + h1] += a1 * v.w[k];
          }
        }
        hog::l2hys(hist, K, clip_);
        for (int k = 0; k < K; ++k) y.channel(n, k)[size_t(by) * bw + bx] = hist[k];
      }
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::hog_blocks(a.in[0], a.out, cell_, cells_, stride_, bins_, sigma_, clip_, ctx.stream);
  }
#endif

 private:
  int cell_ = 8, cells_ = 2, stride_ = 8, bins_ = 9;
  float sigma_ = 4, clip_ = 0.2f;
  struct Vote {
    int p, n;                // block pixel (row-major), how many cells it votes into
    std::array<int, 4> cell;  // each cell's first histogram entry
    std::array<float, 4> w;   // and its weight
  };
  std::vector<Vote> votes1_, votes2_, votes4_;
};

}  // namespace

std::unique_ptr<Layer> make_hog_blocks(const NodeDesc& d) { return std::make_unique<HogBlocks>(d); }

}  // namespace scenelab
