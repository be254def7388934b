// GPU kernel of the pool layer (layers/pool.cpp): one thread an output pixel, the window's mean
// or largest value as the CPU computes it (layers/pool_window.h); f32 NCHW, or NHWC of any type
// (one thread an output element).
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"
#include "layers/pool_window.h"

namespace scenelab::cuda {
namespace {

__global__ void pool_kernel(const float* x, float* y, int planes, int h, int w, int ho, int wo, PoolWindow p) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(planes) * ho * wo) return;
  const int ox = int(i % wo), oy = int((i / wo) % ho);
  const size_t plane = i / (size_t(wo) * ho);
  y[i] = pool_value(x + plane * h * w, h, w, oy, ox, p);
}

// One channel of an NHWC image: rows w * c apart, pixels c apart.
template <typename T>
struct NhwcAt {
  const T* x;
  int w, c;
  __device__ float operator()(int i, int j) const { return ld(x, (size_t(i) * w + j) * c); }
};

template <typename T>
__global__ void pool_nhwc_kernel(const T* x, T* y, int n, int c, int h, int w, int ho, int wo, PoolWindow p) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * ho * wo * c) return;
  const Nhwc o = nhwc_of(i, ho, wo, c);
  const NhwcAt<T> at{x + o.b * size_t(h) * w * c + o.c, w, c};
  st(y, i, pool_value_at(at, h, w, o.y, o.x, p));
}

}  // namespace

void pool(const TensorView& x, const TensorView& y, const PoolWindow& p, cudaStream_t s) {
  require_same_format(x, y, "pool");
  const size_t n = y.shape.numel();
  if (!n) return;
  if (is_nchw_f32(x)) {
    pool_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), x.shape.n * x.shape.c, x.shape.h, x.shape.w,
                                                   y.shape.h, y.shape.w, p);
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      pool_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), x.shape.n, x.shape.c,
                                                          x.shape.h, x.shape.w, y.shape.h, y.shape.w, p);
    });
  }
  SL_LAUNCH_CHECK("pool kernel");
}

}  // namespace scenelab::cuda
