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

#include "core/error.h"
#include "core/tensor.h"

namespace scenelab {

// Pixels a span holds: a row is taken in spans of this many at most.
constexpr size_t kChannelSpan = 256;

using SpanArray = Eigen::Map<Eigen::ArrayXf>;
using ConstSpanArray = Eigen::Map<const Eigen::ArrayXf>;

// A span's scratch, 64-byte aligned. Every exp and log is evaluated into one of these: Eigen
// computes the elements before the destination's first aligned one (and after its last full
// packet) one at a time, with the scalar functions, whose results may differ from the vector
// ones in the last bit; into scratch that always starts aligned, which elements those are
// depends on a pixel's place in its row alone, not on where the frame lies in memory, so a frame
// labels the same alone and in a batch.
struct alignas(64) SpanScratch {
  float v[kChannelSpan];
  Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> operator()(size_t count) {
    SL_REQUIRE(count <= kChannelSpan, "a span of ", count, " pixels; at most ", kChannelSpan);
    return Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64>(v, int64_t(count));
  }
};

// x's values of channel c at pixels [i, i + count) of frame f.
inline ConstSpanArray channel_span(const TensorView& x, int f, int c, size_t i, size_t count) {
  return ConstSpanArray(x.channel(f, c) + i, int64_t(count));
}

// m = the largest of x's channels at pixels [i, i + count) of frame f.
template <class Span>
void channel_max_span(const TensorView& x, int f, size_t i, size_t count, Span&& m) {
  m = channel_span(x, f, 0, i, count);
  for (int c = 1; c < x.shape.c; ++c) m = m.max(channel_span(x, f, c, i, count));
}

// y = softmax over the channels of x at pixels [i, i + count) of frame f (count <= kChannelSpan;
// max-subtracted). y may be x.
inline void softmax_span(const TensorView& x, const TensorView& y, int f, size_t i, size_t count) {
  SpanScratch m_buf, s_buf, e_buf;
  auto m = m_buf(count), s = s_buf(count), e = e_buf(count);
  const int C = x.shape.c;
  channel_max_span(x, f, i, count, m);
  s.setZero();
  for (int c = 0; c < C; ++c) {
    e = (channel_span(x, f, c, i, count) - m).exp();
    s += e;
    SpanArray(y.channel(f, c) + i, int64_t(count)) = e;
  }
  s = s.inverse();
  for (int c = 0; c < C; ++c) SpanArray(y.channel(f, c) + i, int64_t(count)) *= s;
}

// out = log(sum over the channels of exp(x)) at pixels [i, i + count) of frame f
// (count <= kChannelSpan; max-subtracted).
inline void log_sum_exp_span(const TensorView& x, int f, size_t i, size_t count, SpanScratch& out) {
  SpanScratch s_buf;
  auto m = out(count), s = s_buf(count);
  const int C = x.shape.c;
  channel_max_span(x, f, i, count, m);
  s.setZero();
  for (int c = 0; c < C; ++c) s += (channel_span(x, f, c, i, count) - m).exp();
  s = s.log();
  m += s;
}

// p[j] = log(max(p[j], FLT_MIN)), j < count (any count: a span at a time).
inline void log_floored(float* p, size_t count) {
  SpanScratch t_buf;
  for (size_t j = 0; j < count; j += kChannelSpan) {
    const size_t n = std::min(kChannelSpan, count - j);
    auto t = t_buf(n);
    SpanArray a(p + j, int64_t(n));
    t = a.max(FLT_MIN).log();
    a = t;
  }
}

// Calls fn(begin, count) for the spans of [0, w): the row taken kChannelSpan pixels at a time.
template <class Fn>
void for_each_span(size_t w, Fn&& fn) {
  for (size_t j = 0; j < w; j += kChannelSpan) fn(j, std::min(kChannelSpan, w - j));
}

}  // namespace scenelab
