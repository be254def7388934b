// Per-pixel arithmetic across the channels of an f32 NCHW map, on the CPU, vectorised along a
// row: the pixels of a channel lie next to each other, so each step runs over a span of them at
// once with Eigen's vectorised exp and log (SIMD, as wide as the build's target allows), where a
// loop over one pixel's channels (a plane apart) would call the scalar functions. The softmax,
// softmax_mean and refine layers' CPU paths use these; the GPU's kernels go a pixel a thread.
// No allocation: spans are at most kChannelSpan pixels, their scratch on the stack.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <cfloat>
#include <cstddef>

#include "engine/tensor.h"

namespace scenelab {

// Pixels a span holds: a row is taken in spans of this many at most.
constexpr size_t kChannelSpan = 256;

using SpanArray = Eigen::Map<Eigen::ArrayXf>;
using ConstSpanArray = Eigen::Map<const Eigen::ArrayXf>;

// y = softmax over the channels of x at pixels [i, i + count) of frame f (count <= kChannelSpan;
// max-subtracted). y may be x.
inline void softmax_span(const TensorView& x, const TensorView& y, int f, size_t i, size_t count) {
  alignas(64) float m_buf[kChannelSpan], s_buf[kChannelSpan];
  SpanArray m(m_buf, int64_t(count)), s(s_buf, int64_t(count));
  const int C = x.shape.c;
  m = ConstSpanArray(x.channel(f, 0) + i, int64_t(count));
  for (int c = 1; c < C; ++c) m = m.max(ConstSpanArray(x.channel(f, c) + i, int64_t(count)));
  s.setZero();
  for (int c = 0; c < C; ++c) {
    SpanArray yc(y.channel(f, c) + i, int64_t(count));
    yc = (ConstSpanArray(x.channel(f, c) + i, int64_t(count)) - m).exp();
    s += yc;
  }
  s = s.inverse();
  for (int c = 0; c < C; ++c) SpanArray(y.channel(f, c) + i, int64_t(count)) *= s;
}

// out[j] = log(sum over the channels of exp(x)) at pixel i + j of frame f, j < count
// (count <= kChannelSpan; max-subtracted).
inline void log_sum_exp_span(const TensorView& x, int f, size_t i, size_t count, float* out) {
  alignas(64) float s_buf[kChannelSpan];
  SpanArray m(out, int64_t(count)), s(s_buf, int64_t(count));
  const int C = x.shape.c;
  m = ConstSpanArray(x.channel(f, 0) + i, int64_t(count));
  for (int c = 1; c < C; ++c) m = m.max(ConstSpanArray(x.channel(f, c) + i, int64_t(count)));
  s.setZero();
  for (int c = 0; c < C; ++c) s += (ConstSpanArray(x.channel(f, c) + i, int64_t(count)) - m).exp();
  m += s.log();
}

// p[j] = log(max(p[j], FLT_MIN)), j < count.
inline void log_floored(float* p, size_t count) {
  SpanArray a(p, int64_t(count));
  a = a.max(FLT_MIN).log();
}

// Calls fn(begin, count) for the spans of [0, w): the row taken kChannelSpan pixels at a time.
template <class Fn>
void for_each_span(size_t w, Fn&& fn) {
  for (size_t j = 0; j < w; j += kChannelSpan) fn(j, std::min(kChannelSpan, w - j));
}

}  // namespace scenelab
