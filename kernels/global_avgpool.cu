// GPU kernel of the global_avgpool layer (layers/global_avgpool.cpp): one block a (image,
// channel), its threads summing the plane in a stride (NCHW: contiguous; NHWC: c apart) in float,
// then the block's sum; any f32/f16/bf16 format.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

template <typename T>
__global__ void global_avgpool_kernel(const T* x, T* y, int c, size_t plane, bool nhwc) {
  const int nc = blockIdx.x, n = nc / c, ch = nc % c;
  const size_t base = nhwc ? size_t(n) * plane * c + ch : size_t(nc) * plane;
  const size_t step = nhwc ? size_t(c) : 1;
  float sum = 0.f;
  for (size_t i = threadIdx.x; i < plane; i += blockDim.x) sum += ld(x, base + i * step);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o);
  __shared__ float warp_sums[32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < int(blockDim.x / 32); ++w) t += warp_sums[w];
    st(y, size_t(nc), t / float(plane));  // NCHW and NHWC alike at 1 x 1: index n * c + ch
  }
}

}  // namespace

void global_avgpool(const TensorView& x, const TensorView& y, cudaStream_t s) {
  require_same_format(x, y, "global_avgpool");
  const int blocks = x.shape.n * x.shape.c;
  if (!blocks) return;
  const bool nhwc = x.format.layout == Layout::NHWC;
  with_type(y, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    global_avgpool_kernel<<<blocks, kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), x.shape.c, x.shape.plane(), nhwc);
  });
  SL_LAUNCH_CHECK("global_avgpool kernel");
}

}  // namespace scenelab::cuda
