// GPU kernels of the maxpool2d layer (layers/maxpool2d.cpp), and the max-pool fused after a convolution's
// bias and ReLU (bias_relu_maxpool).
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

__global__ void maxpool_kernel(const float* x, float* y, int planes, int h, int w, int ho, int wo,
                               int k, int s) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(planes) * ho * wo) return;
  const auto [p, oy, ox] = plane_pixel(i, ho, wo);
  const float* src = x + p * h * w;
  float m = -FLT_MAX * 2;  // -inf
  for (int dy = 0; dy < k; ++dy)
    for (int dx = 0; dx < k; ++dx) m = fmaxf(m, src[size_t(oy * s + dy) * w + ox * s + dx]);
  y[i] = m;
}

template <typename T>
__global__ void maxpool_nhwc_kernel(const T* x, T* y, int c, int h, int w, int ho, int wo, int k,
                                    int s, size_t total) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const Nhwc o = nhwc_of(i, ho, wo, c);
  float m = -FLT_MAX * 2;
  for (int dy = 0; dy < k; ++dy)
    for (int dx = 0; dx < k; ++dx)
      m = fmaxf(m, ld(x, ((o.b * h + size_t(o.y * s + dy)) * w + size_t(o.x * s + dx)) * c + o.c));
  st(y, i, m);
}

// 2-byte types with channels a multiple of 8: one thread 8 channels of an output pixel, 16-byte
// loads and stores (the pools after cuDNN's convolutions read 16..64 channels a pixel).
// With bias (the channels', float) and relu: y = act(max + bias), which equals pooling act(x + b)
// as the unfused layers do, bit for bit (adding a constant and rounding are monotonic), from a
// convolution's raw output (bias_relu_maxpool).
template <typename T, typename Idx>
__global__ void maxpool_nhwc8_kernel(const T* x, T* y, int c, int h, int w, int ho, int wo, int k,
                                     int s, Idx total, const float* bias = nullptr, bool relu = false) {
  const Idx i = Idx(blockIdx.x) * blockDim.x + threadIdx.x;  // one 8-channel group
  if (i >= total) return;
  const Idx groups = Idx(c / 8);
  const int cg = int(i % groups);
  const Idx pix = i / groups;
  const int ox = int(pix % Idx(wo));
  const Idx row = pix / Idx(wo);  // b * ho + oy
  const int oy = int(row % Idx(ho));
  const size_t b = size_t(row / Idx(ho));
  float m[8];
  for (int q = 0; q < 8; ++q) m[q] = -FLT_MAX * 2;
  for (int dy = 0; dy < k; ++dy)
    for (int dx = 0; dx < k; ++dx) {
      const size_t at = ((b * h + size_t(oy * s + dy)) * w + size_t(ox * s + dx)) * c + 8 * size_t(cg);
      const uint4 v = *reinterpret_cast<const uint4*>(x + at);
      const T* e = reinterpret_cast<const T*>(&v);
      for (int q = 0; q < 8; ++q) m[q] = fmaxf(m[q], ld(e, q));
    }
  if (bias)
    for (int q = 0; q < 8; ++q) m[q] += bias[8 * cg + q];
  if (relu)
    for (int q = 0; q < 8; ++q) m[q] = fmaxf(m[q], 0.f);
  uint4 out;
  T* o = reinterpret_cast<T*>(&out);
  for (int q = 0; q < 8; ++q) st(o, q, m[q]);
  *reinterpret_cast<uint4*>(y + size_t(pix) * c + 8 * size_t(cg)) = out;
}

// The 8-channel NHWC max-pool (maxpool_nhwc8_kernel), with an optional bias and ReLU after the max.
template <typename T>
void maxpool8(const T* x, T* y, const Shape& a, const Shape& o, int k, int stride, const float* bias, bool relu,
              cudaStream_t s) {
  with_index(o.numel() / 8, [&](auto groups) {
    maxpool_nhwc8_kernel<<<blocks_for(groups), kThreads, 0, s>>>(x, y, a.c, a.h, a.w, o.h, o.w, k, stride, groups,
                                                                 bias, relu);
  });
}

}  // namespace

void maxpool2d(const TensorView& x, const TensorView& y, int k, int stride, cudaStream_t s) {
  require_same_format(x, y, "maxpool2d");
  const Shape &a = x.shape, &b = y.shape;
  const size_t n = b.numel();
  if (is_nchw_f32(x)) {
    maxpool_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), a.n * a.c, a.h, a.w, b.h, b.w, k, stride);
  } else if (vector8(x, y, a.c)) {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      maxpool8(x.as<const T>(), y.as<T>(), a, b, k, stride, nullptr, false, s);
    });
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      maxpool_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), a.c, a.h, a.w,
                                                             b.h, b.w, k, stride, n);
    });
  }
  SL_LAUNCH_CHECK("maxpool2d kernel");
}

void bias_relu_maxpool(const TensorView& x, const float* b, bool relu, const TensorView& y, int k, int stride,
                       cudaStream_t s) {
  SL_REQUIRE(vector8(x, y, x.shape.c) && x.format == y.format, "bias + ReLU + max-pool: no kernel for ",
             x.format.str(), " ", x.shape.str());
  if (!y.shape.numel()) return;
  with_type(y, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    maxpool8(x.as<const T>(), y.as<T>(), x.shape, y.shape, k, stride, b, relu, s);
  });
  SL_LAUNCH_CHECK("bias + ReLU + max-pool kernel");
}

}  // namespace scenelab::cuda
