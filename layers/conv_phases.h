// The CPU convolutions' GEMM without an im2col matrix (layers/conv2d.cpp, layers/conv.cpp). A band
// of output rows is computed on a "wide" grid: the input band, zero-padded, is split into its
// stride phases (phase (py, px) holds padded pixels (u sh + py, v sw + px) at (u, v); one phase at
// stride 1), each a plane of Wq = wo + (the taps' largest column step) columns. Tap (i, j) of
// channel c then reads, for every wide output pixel at once, one contiguous run of its phase plane
// shifted by (i dh / sh, j dw / sw): the GEMM takes its A columns in place (sgemm_indirect), and
// the input is copied once per band instead of kh x kw times. The wide grid's last Wq - wo columns
// of each row are computed and dropped; the kept ones are copied out with bias and ReLU. The sums
// are those of the im2col GEMM (channel, kernel row, kernel column), bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/layer.h"

namespace scenelab {

struct ConvTaps {
  int kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
};

// How a layer cuts its output into tasks for PhaseConv: bands of `rows` output rows (bands of them
// an image), and each band's output channels in `chunks` chunks of `chunk`. Bands of about
// kPixels wide pixels (at least kMinPixels: a GEMM of fewer rows runs at a fraction of its rate),
// fewer rows where the threads would otherwise lack bands; where the bands are still too few for
// the threads (small maps), the channels are cut into chunks of at least kMinChunk. The sums do not
// depend on the cut.
struct PhaseSplit {
  static constexpr int kPixels = 768, kMinPixels = 192, kMinChunk = 16, kTasksPerThread = 4;
  int rows = 1, bands = 1, chunk = 1, chunks = 1;
  PhaseSplit(const ConvTaps& t, int ho, int wo, int cout, int images, int threads);
};

class PhaseConv {
 public:
  // cin input channels of h x w, an output row of wo pixels, bands of at most `rows` output rows,
  // cout output channels a call.
  PhaseConv(const ConvTaps& t, int cin, int h, int w, int wo, int rows, int cout);
  // Whether this build and these taps can run it (AVX-512: has_indirect_gemm(); strides up to 4),
  // and it pays for cin input channels: not below kMinDepth taps a pixel, where the GEMM is so
  // short that copying its wide output out costs more than the im2col saves (DDRNet-23-slim's
  // 3 -> 32 stride-2 stem at 480x360: 0.76 ms against im2col's 0.55).
  static constexpr int kMinDepth = 64;
  static bool supports(const ConvTaps& t, int cin);
  // Columns of the wide grid: wo and the taps' largest whole column step.
  static int wide_columns(const ConvTaps& t, int wo) { return wo + ((t.kw - 1) * t.dw) / t.sw; }
  // Taps a pixel (cin kh kw): the GEMM's depth, the weights of one output channel.
  size_t depth() const { return size_t(cin_) * t_.kh * t_.kw; }
  // Floats of one call's workspace (a multiple of 16: per-thread slices stay 64-byte aligned).
  size_t workspace_floats() const { return planes_floats_ + wide_floats_ + offsets_floats_; }
  // Output rows [y0, y1) (y1 - y0 <= rows) of `cout` (<= the planned cout) channels: x the first
  // input channel's plane (channels x_plane floats apart), w their cout x (cin kh kw) weights, bias
  // (cout) or null, y the first output channel's plane (wo columns; channels y_plane floats apart).
  // Its sums do not depend on the rows or channels a call takes.
  void band(const float* x, size_t x_plane, int y0, int y1, const float* w, int cout, const float* bias, bool relu,
            float* y, size_t y_plane, float* workspace) const;

 private:
  ConvTaps t_;
  int cin_, h_, w_, wo_, rows_, cout_;
  int qy_max_ = 0, qx_max_ = 0, wq_ = 0, phases_ = 0;
  int slot_[4][4] = {};  // phase (py, px) -> its plane among a channel's (strides up to 4), -1: unused
  size_t plane_ = 0, planes_floats_ = 0, wide_floats_ = 0, offsets_floats_ = 0;
};

// A whole convolution on f32 NCHW views: every image, group, band and channel chunk of `split` a
// task on `threads` threads, each with its own pc.workspace_floats() slice of `workspace`. x has
// groups x (pc's cin) channels, y groups x cout; w the layer's [cout total, cin kh kw] weights.
void phase_forward(const PhaseConv& pc, const PhaseSplit& split, const TensorView& x, const TensorView& y,
                   const float* w, const float* bias, bool relu, int groups, float* workspace, int threads);

}  // namespace scenelab
