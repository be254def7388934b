// HOG's first stage (Dalal and Triggs; fastHOG): per pixel, the gradient of the 8-bit image
// (square-rooted with gamma=1) by centred differences, the channel of largest magnitude, and its
// vote between the two nearest orientation bins (layers/hog_math.h has the arithmetic, OpenCV's).
// Input: 1 or 3 channels in [0, 1] (8-bit values / 255). Output: 3 channels per pixel: the
// lower bin's share of the magnitude, the upper bin's share, and the lower bin's index.
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

class HogGradient : public Layer {
 public:
  explicit HogGradient(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({"bins", "gamma", "signed"});
    bins_ = d.attrs.get_int("bins", 9);
    gamma_ = d.attrs.get_int("gamma", 1) != 0;
    signed_ = d.attrs.get_int("signed", 0) != 0;
    SL_REQUIRE(bins_ >= 2 && bins_ <= 255, "hog_gradient '", name_, "': bins=", bins_, " must be in 2..255");
  }
  const char* type() const override { return "hog_gradient"; }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    SL_REQUIRE(in[0].c == 1 || in[0].c == 3, "hog_gradient '", name_, "' needs 1 or 3 channels, got ",
               in[0].c);
    return Shape(in[0].n, 3, in[0].h, in[0].w);
  }
  // Per thread: each channel's middle row with its two reflected neighbours (W + 2), the rows
  // above and below (W each), and the chosen dx, dy (W each).
  static size_t scratch_floats(int c, int w) { return size_t(c) * (3 * size_t(w) + 2) + 2 * size_t(w); }
  size_t workspace_floats(const std::vector<Shape>& in, const Shape& /*out*/, const Backend& backend) const override {
    if (backend.cuda()) return 0;
    return size_t(backend.threads()) * scratch_floats(in[0].c, in[0].w);
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    const int H = x.shape.h, W = x.shape.w, C = x.shape.c;
    const size_t scratch = scratch_floats(C, W);
    parallel_for(int64_t(x.shape.n) * H, a.threads, [&](int64_t row) {
      const int n = int(row / H), r = int(row % H);
      const int up = hog::reflect101(r - 1, H), down = hog::reflect101(r + 1, H);
      float* buf = a.workspace + size_t(parallel_thread_index()) * scratch;
      float* bdx = buf + size_t(C) * (3 * size_t(W) + 2);
      float* bdy = bdx + W;
      // Red, green, blue: on a tie the later channel wins (blue, then green), as in OpenCV 4.6.
      for (int k = 0; k < C; ++k) {
        const float* __restrict p0 = x.channel(n, k) + size_t(r) * W;
        const float* __restrict pu = x.channel(n, k) + size_t(up) * W;
        const float* __restrict pd = x.channel(n, k) + size_t(down) * W;
        float* __restrict mid = buf + size_t(k) * (3 * size_t(W) + 2);  // mid[c + 1] = column c
        float* __restrict above = mid + W + 2;
        float* __restrict below = above + W;
        // One row at a time, each loop one load and one store (so that each vectorises).
        auto fill = [W, g = gamma_](const float* src, float* dst) {
          if (g)
            for (int c = 0; c < W; ++c) dst[c] = hog::byte_value(src[c], true);
          else
            for (int c = 0; c < W; ++c) dst[c] = hog::byte_value(src[c], false);
        };
        fill(p0, mid + 1);
        fill(pu, above);
        fill(pd, below);
        mid[0] = mid[hog::reflect101(-1, W) + 1];
        mid[W + 1] = mid[hog::reflect101(W, W) + 1];
        for (int c = 0; c < W; ++c) {
          const float dx = mid[c + 2] - mid[c], dy = below[c] - above[c];
          if (k == 0) {
            bdx[c] = dx, bdy[c] = dy;
            continue;
          }
          const bool wins = hog::sq_mag(dx, dy) >= hog::sq_mag(bdx[c], bdy[c]);
          bdx[c] = wins ? dx : bdx[c];
          bdy[c] = wins ? dy : bdy[c];
        }
      }
      float* g0 = y.channel(n, 0) + size_t(r) * W;
      float* g1 = y.channel(n, 1) + size_t(r) * W;
      float* gb = y.channel(n, 2) + size_t(r) * W;
      for (int c = 0; c < W; ++c) {
        const hog::Vote v = hog::vote_of(bdx[c], bdy[c], bins_, signed_);
        g0[c] = v.w0, g1[c] = v.w1, gb[c] = float(v.bin);
      }
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::hog_gradient(a.in[0], a.out, bins_, gamma_, signed_, ctx.stream);
  }
#endif

 private:
  int bins_ = 9;
  bool gamma_ = true, signed_ = false;
};

}  // namespace

std::unique_ptr<Layer> make_hog_gradient(const NodeDesc& d) { return std::make_unique<HogGradient>(d); }

}  // namespace scenelab
