#include "layers/conv_phases.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "layers/cpu_gemm.h"
#include "layers/window_columns.h"

namespace scenelab {
namespace {

size_t round16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

PhaseSplit::PhaseSplit(const ConvTaps& t, int ho, int wo, int cout, int images, int threads) {
  const int wq = PhaseConv::wide_columns(t, wo);
  const int want = kTasksPerThread * std::max(1, threads);
  rows = std::min(ho, (kPixels + wq - 1) / wq);
  rows = std::min(rows, std::max(1, (ho * images) / want));  // bands for the threads
  rows = std::max(rows, std::min(ho, (kMinPixels + wq - 1) / wq));
  bands = (ho + rows - 1) / rows;
  const int tasks = bands * std::max(1, images);
  chunks = tasks >= want ? 1 : std::max(1, std::min((want + tasks - 1) / tasks, cout / kMinChunk));
  chunk = (cout + chunks - 1) / chunks;
  chunks = (cout + chunk - 1) / chunk;
}

bool PhaseConv::supports(const ConvTaps& t, int cin) {
  return has_indirect_gemm() && t.sh <= 4 && t.sw <= 4 && cin * t.kh * t.kw >= kMinDepth;
}

PhaseConv::PhaseConv(const ConvTaps& t, int cin, int h, int w, int wo, int rows, int cout)
    : t_(t), cin_(cin), h_(h), w_(w), wo_(wo), rows_(rows), cout_(cout) {
  SL_REQUIRE(has_indirect_gemm() && t.sh <= 4 && t.sw <= 4, "PhaseConv: strides up to 4 on an AVX-512 build");
  for (auto& r : slot_) std::fill(r, r + 4, -1);
  for (int i = 0; i < t.kh; ++i)
    for (int j = 0; j < t.kw; ++j) {
      const int ry = i * t.dh, rx = j * t.dw;
      int& s = slot_[ry % t.sh][rx % t.sw];
      if (s < 0) s = phases_++;
      qy_max_ = std::max(qy_max_, ry / t.sh), qx_max_ = std::max(qx_max_, rx / t.sw);
    }
  wq_ = wide_columns(t, wo);
  // a phase plane: the band's rows and the taps' rows below them, then the last taps' overrun
  plane_ = size_t(rows + qy_max_) * wq_ + size_t(qx_max_);
  planes_floats_ = round16(size_t(cin) * phases_ * plane_);
  wide_floats_ = round16(size_t(rows) * wq_ * size_t(cout));
  offsets_floats_ = round16(depth());  // uint32 offsets, one a float
  SL_REQUIRE(planes_floats_ < (size_t(1) << 32), "PhaseConv: the band's planes exceed 2^32 floats");
}

void PhaseConv::band(const float* x, size_t x_plane, int y0, int y1, const float* w, int cout, const float* bias,
                     bool relu, float* y, size_t y_plane, float* workspace) const {
  SL_REQUIRE(y1 - y0 <= rows_ && cout <= cout_, "PhaseConv: a band of ", y1 - y0, " rows and ", cout,
             " channels, planned for ", rows_, " and ", cout_);
  const int R = y1 - y0, rq = R + qy_max_;
  float* planes = workspace;
  float* wide = workspace + planes_floats_;
  uint32_t* offsets = reinterpret_cast<uint32_t*>(wide + wide_floats_);
  // The phase planes of each channel: padded pixel (iy, ix) = x[iy - pt][ix - pl], zero outside.
  for (int c = 0; c < cin_; ++c) {
    const float* src = x + size_t(c) * x_plane;
    for (int py = 0; py < t_.sh; ++py)
      for (int px = 0; px < t_.sw; ++px) {
        const int s = slot_[py][px];
        if (s < 0) continue;
        float* plane = planes + (size_t(c) * phases_ + s) * plane_;
        int lo = 0, hi = 0;  // columns v with ix = v sw + px - pl inside the row
        const int off = px - t_.pl;
        inside_columns(off, t_.sw, w_, wq_, lo, hi);
        for (int u = 0; u < rq; ++u) {
          float* r = plane + size_t(u) * wq_;
          const int iy = (y0 + u) * t_.sh + py - t_.pt;
          if (iy < 0 || iy >= h_ || hi <= lo) {
            std::fill(r, r + wq_, 0.f);
            continue;
          }
          const float* row = src + size_t(iy) * w_;
          std::fill(r, r + lo, 0.f);
          if (t_.sw == 1)
            std::memcpy(r + lo, row + lo + off, size_t(hi - lo) * sizeof(float));
          else
            for (int v = lo; v < hi; ++v) r[v] = row[v * t_.sw + off];
          std::fill(r + hi, r + wq_, 0.f);
        }
        std::fill(plane + size_t(rq) * wq_, plane + size_t(rq) * wq_ + qx_max_, 0.f);  // the overrun
      }
  }
  // Column (c, i, j) of A: channel c's phase of tap (i, j), shifted by the tap's whole steps.
  uint32_t* o = offsets;
  for (int c = 0; c < cin_; ++c)
    for (int i = 0; i < t_.kh; ++i)
      for (int j = 0; j < t_.kw; ++j) {
        const int ry = i * t_.dh, rx = j * t_.dw;
        const size_t s = size_t(slot_[ry % t_.sh][rx % t_.sw]);
        *o++ = uint32_t((size_t(c) * phases_ + s) * plane_ + size_t(ry / t_.sh) * wq_ + size_t(rx / t_.sw));
      }
  const size_t m = size_t(R) * wq_, ld = size_t(rows_) * wq_, k = depth();
  sgemm_indirect(m, size_t(cout), k, planes, offsets, w, k, wide, ld);
  // The kept columns, with bias and ReLU.
  for (int oc = 0; oc < cout; ++oc) {
    const float b = bias ? bias[oc] : 0.f;
    for (int r = 0; r < R; ++r) {
      const float* s = wide + size_t(oc) * ld + size_t(r) * wq_;
      float* d = y + size_t(oc) * y_plane + size_t(y0 + r) * wo_;
      if (relu)
        for (int v = 0; v < wo_; ++v) d[v] = std::max(s[v] + b, 0.f);
      else if (bias)
        for (int v = 0; v < wo_; ++v) d[v] = s[v] + b;
      else
        std::memcpy(d, s, size_t(wo_) * sizeof(float));
    }
  }
}

void phase_forward(const PhaseConv& pc, const PhaseSplit& sp, const TensorView& x, const TensorView& y,
                   const float* w, const float* bias, bool relu, int groups, float* workspace, int threads) {
  const int cin_g = x.shape.c / groups, cout_g = y.shape.c / groups;
  const size_t k = pc.depth(), per_task = pc.workspace_floats();
  parallel_for(int64_t(y.shape.n) * groups * sp.bands * sp.chunks, threads, [&](int64_t t) {
    const int part = int(t % sp.chunks), band = int(t / sp.chunks % sp.bands);
    const int g = int(t / sp.chunks / sp.bands % groups), n = int(t / sp.chunks / sp.bands / groups);
    const int y0 = band * sp.rows, y1 = std::min(y.shape.h, y0 + sp.rows);
    const int o0 = g * cout_g + part * sp.chunk, o1 = std::min((g + 1) * cout_g, o0 + sp.chunk);
    pc.band(x.channel(n, g * cin_g), x.shape.plane(), y0, y1, w + size_t(o0) * k, o1 - o0, bias ? bias + o0 : nullptr,
            relu, y.channel(n, o0), y.shape.plane(), workspace + size_t(parallel_thread_index()) * per_task);
  });
}

}  // namespace scenelab
