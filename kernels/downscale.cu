// GPU kernels of the downscale layer (layers/downscale.cpp): the mean of f x f blocks.
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

__global__ void downscale_kernel(const float* x, float* y, int planes, int h, int w, int ho,
                                 int wo, int f) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(planes) * ho * wo) return;
  const auto [p, oy, ox] = plane_pixel(i, ho, wo);
  const float* src = x + p * h * w;
  float s = 0;
  for (int dy = 0; dy < f; ++dy)
    for (int dx = 0; dx < f; ++dx) s += src[size_t(oy * f + dy) * w + ox * f + dx];
  y[i] = s * (1.f / float(f * f));
}

template <typename T>
__global__ void downscale_nhwc_kernel(const T* x, T* y, int c, int h, int w, int ho, int wo,
                                      int f, size_t total) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const Nhwc o = nhwc_of(i, ho, wo, c);
  float s = 0;
  for (int dy = 0; dy < f; ++dy)
    for (int dx = 0; dx < f; ++dx)
      s += ld(x, ((o.b * h + size_t(o.y * f + dy)) * w + size_t(o.x * f + dx)) * c + o.c);
  st(y, i, s * (1.f / float(f * f)));
}

}  // namespace

void downscale(const TensorView& x, const TensorView& y, int f, cudaStream_t s) {
  require_same_format(x, y, "downscale");
  const Shape &a = x.shape, &b = y.shape;
  const size_t n = b.numel();
  if (is_nchw_f32(x)) {
    downscale_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), a.n * a.c, a.h, a.w, b.h, b.w, f);
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      downscale_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), a.c, a.h,
                                                               a.w, b.h, b.w, f, n);
    });
  }
  SL_LAUNCH_CHECK("downscale kernel");
}

}  // namespace scenelab::cuda
