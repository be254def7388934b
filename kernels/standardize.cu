// GPU kernels of the standardize layer (layers/standardize.cpp): (x - mean) / sd per channel, from f32 NCHW
// into any format.
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

__global__ void standardize_kernel(const float* x, float* y, const float* mean, const float* sd,
                                   int c, size_t plane, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int ch = int((i / plane) % c);
  y[i] = (x[i] - mean[ch]) * (1.f / sd[ch]);
}

// From f32 NCHW into NHWC of any type (one thread an output element: writes coalesced).
template <typename T>
__global__ void standardize_nhwc_kernel(const float* x, T* y, const float* mean, const float* sd,
                                        int c, size_t plane, size_t total) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int ch = int(i % c);
  const size_t p = (i / c) % plane, b = i / (size_t(c) * plane);
  st(y, i, (x[(b * c + ch) * plane + p] - mean[ch]) * (1.f / sd[ch]));
}

}  // namespace

void standardize(const float* x, const TensorView& y, const float* mean, const float* sd,
                 cudaStream_t s) {
  const Shape& a = y.shape;
  const size_t total = a.numel();
  if (is_nchw_f32(y)) {
    standardize_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, y.f32(), mean, sd, a.c, a.plane(), total);
  } else {
    SL_REQUIRE(supports(y.format), "standardize: no kernel writes ", y.format.str());
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      standardize_nhwc_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, y.as<T>(), mean, sd, a.c,
                                                                     a.plane(), total);
    });
  }
  SL_LAUNCH_CHECK("standardize kernel");
}

}  // namespace scenelab::cuda
