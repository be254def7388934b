// The conv2d layer (layers/conv2d.h): its CPU paths, the explicit GEMM band by band and Winograd.
#include "layers/conv2d.h"


#include <cstring>

namespace scenelab {

void Conv2d::forward_cpu(const ForwardArgs& a) const {
  const TensorView& x = a.in[0];
  const TensorView& y = a.out;
  const size_t K = kdim(x.shape);
  const float* w = a.params->data("weight");
  const float* b = bias_ ? a.params->data("bias") : nullptr;
  if (winograd_for(x.shape, a.cpu_conv)) {
    const std::shared_ptr<const WinogradConv> wc = winograd_weights(w, x.shape.c);
    const WinogradConv::Plan p = WinogradConv::plan(x.shape.c, out_, k_, x.shape.h, x.shape.w, pad_);
    const size_t per_thread = WinogradConv::workspace_floats(p);
    for (int n = 0; n < x.shape.n; ++n)
      parallel_for(p.bands, a.threads, [&](int64_t band) {
        wc->run_band(p, int(band), x.channel(n, 0), y.channel(n, 0), b, a.fused_relu,
                     a.workspace + size_t(parallel_thread_index()) * per_thread);
      });
    return;
  }
  if (phases(x.shape)) {  // the GEMM's columns read in place (layers/conv_phases.h)
    const PhaseSplit sp = phase_split(y.shape, a.threads);
    phase_forward(phase_conv(x.shape, y.shape, sp), sp, x, y, w, b, a.fused_relu, 1, a.workspace, a.threads);
    return;
  }
  const int rows = band_rows(x.shape, y.shape);
  const int bands = (y.shape.h + rows - 1) / rows;
  const size_t plane = y.shape.plane();
  for (int n = 0; n < x.shape.n; ++n) {
    parallel_for(bands, a.threads, [&](int64_t band) {
      const int y0 = int(band) * rows, y1 = std::min(y.shape.h, y0 + rows);
      const size_t cols = size_t(y1 - y0) * y.shape.w;
      float* out = y.channel(n, 0) + size_t(y0) * y.shape.w;
      if (k_ == 1) {  // pixel-wise fully connected: the input is already the matrix X
        const float* in = x.channel(n, 0) + size_t(y0) * x.shape.w;
        gemm(in, x.shape.plane(), cols, K, w, out, plane);
      } else {
        const int tid = parallel_thread_index();
        float* ws = a.workspace + size_t(tid) * size_t(rows) * y.shape.w * K;
        im2col(x, n, y0, y1, y.shape.w, ws);
        gemm(ws, cols, cols, K, w, out, plane);
      }
      epilogue(out, plane, cols, b, a.fused_relu);
    });
  }
}

void Conv2d::im2col(const TensorView& x, int n, int y0, int y1, int wo, float* ws) const {
  const int H = x.shape.h, W = x.shape.w;
  const size_t cols = size_t(y1 - y0) * wo;
  for (int c = 0; c < x.shape.c; ++c) {
    const float* src = x.channel(n, c);
    for (int dy = 0; dy < k_; ++dy)
      for (int dx = 0; dx < k_; ++dx) {
        float* row = ws + (size_t(c * k_ + dy) * k_ + dx) * cols;
        const int xs = dx - pad_;                             // input column of output col 0
        const int lo = std::max(0, -xs), hi = std::min(wo, W - xs);  // valid output columns
        for (int yy = y0; yy < y1; ++yy, row += wo) {
          const int iy = yy + dy - pad_;
          if (iy < 0 || iy >= H || hi <= lo) {
            std::memset(row, 0, sizeof(float) * wo);
            continue;
          }
          if (lo > 0) std::memset(row, 0, sizeof(float) * lo);
          std::memcpy(row + lo, src + size_t(iy) * W + lo + xs, sizeof(float) * (hi - lo));
          if (hi < wo) std::memset(row + hi, 0, sizeof(float) * (wo - hi));
        }
      }
  }
}

std::unique_ptr<Layer> make_conv2d(const NodeDesc& d) { return std::make_unique<Conv2d>(d); }

}  // namespace scenelab
