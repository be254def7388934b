// GPU kernels of the softmax layer (layers/softmax.cpp), over the channels of each pixel.
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

__global__ void softmax_kernel(const float* x, float* y, int n, int c, size_t plane) {
  size_t i, at;
  if (!nchw_pixel(n, c, plane, i, at)) return;
  const float* px = x + at;
  float* py = y + at;
  float m = px[0];
  for (int k = 1; k < c; ++k) m = fmaxf(m, px[size_t(k) * plane]);
  float s = 0;
  for (int k = 0; k < c; ++k) {
    const float e = expf(px[size_t(k) * plane] - m);
    py[size_t(k) * plane] = e;
    s += e;
  }
  const float inv = 1.f / s;
  for (int k = 0; k < c; ++k) py[size_t(k) * plane] *= inv;
}

template <typename T>
__global__ void softmax_nhwc_kernel(const T* x, T* y, int c, size_t pixels) {
  size_t p = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= pixels) return;
  const T* px = x + p * c;
  T* py = y + p * c;
  float m = ld(px, 0);
  for (int k = 1; k < c; ++k) m = fmaxf(m, ld(px, k));
  float s = 0;
  for (int k = 0; k < c; ++k) s += expf(ld(px, k) - m);
  const float inv = 1.f / s;
  for (int k = 0; k < c; ++k) st(py, k, expf(ld(px, k) - m) * inv);
}

}  // namespace

void softmax(const TensorView& x, const TensorView& y, cudaStream_t s) {
  per_pixel(x, y, s, "softmax", softmax_kernel,
            [](auto* t) { return &softmax_nhwc_kernel<std::remove_pointer_t<decltype(t)>>; });
}

}  // namespace scenelab::cuda
