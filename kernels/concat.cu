// GPU kernels of the concat layer (layers/concat.cpp): inputs stacked along the channels.
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

// 2-byte types, cx, cy and off multiples of 8: 8 channels (16 bytes) a thread.
template <typename T>
__global__ void concat_nhwc8_kernel(const T* x, int cx, T* y, int cy, int off, size_t groups) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;  // one 8-channel group of x
  if (i >= groups) return;
  const int gx = cx / 8;
  const size_t p = i / gx;
  const int g = int(i % gx);
  *reinterpret_cast<uint4*>(y + p * cy + off + 8 * g) = *reinterpret_cast<const uint4*>(x + 8 * i);
}

// Input channels [0, cx) of every pixel into channels [off, off + cx) of y (cy channels).
template <typename T>
__global__ void concat_nhwc_kernel(const T* x, int cx, T* y, int cy, int off, size_t total) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const size_t p = i / cx;
  y[p * cy + off + (i % cx)] = x[i];
}

}  // namespace

void concat(const std::vector<TensorView>& xs, const TensorView& y, cudaStream_t s) {
  const Shape& b = y.shape;
  if (is_nchw_f32(y)) {  // whole channel blocks per image
    char* dst = static_cast<char*>(y.data);
    for (int n = 0; n < b.n; ++n)
      for (const auto& x : xs) {
        require_same_format(x, y, "concat");
        const size_t bytes = size_t(x.shape.c) * x.shape.plane() * sizeof(float);
        SL_CUDA_CHECK(cudaMemcpyAsync(dst, x.channel(n, 0), bytes, cudaMemcpyDeviceToDevice, s), "concat");
        dst += bytes;
      }
    return;
  }
  int off = 0;
  for (const auto& x : xs) {
    require_same_format(x, y, "concat");
    const size_t n = x.shape.numel();
    const bool v8 = vector8(x, y, x.shape.c) && b.c % 8 == 0 && off % 8 == 0;
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      if (v8)
        concat_nhwc8_kernel<<<blocks_for(n / 8), kThreads, 0, s>>>(x.as<const T>(), x.shape.c, y.as<T>(), b.c,
                                                                   off, n / 8);
      else
        concat_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), x.shape.c, y.as<T>(), b.c, off, n);
    });
    off += x.shape.c;
  }
  SL_LAUNCH_CHECK("concat kernel");
}

}  // namespace scenelab::cuda
