// GPU kernels of the element-wise layers (layers/activation.cpp, channel_op.cpp, binary.cpp), in
// any f32/f16/bf16 format, the arithmetic of layers/eltwise_math.h. A channel's index: NCHW
// (i / plane) % c, NHWC i % c.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"
#include "layers/eltwise_math.h"

namespace scenelab::cuda {
namespace {

template <typename T>
__global__ void activation_kernel(const T* x, T* y, size_t n, ActFn f, float a, float b) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) st(y, i, activate(f, ld(x, i), a, b));
}

// The channel of element i.
__device__ __forceinline__ int channel_of(size_t i, bool nhwc, int c, size_t plane) {
  return nhwc ? int(i % size_t(c)) : int((i / plane) % size_t(c));
}

template <typename T>
__global__ void channel_op_kernel(const T* x, T* y, size_t n, bool nhwc, int c, size_t plane, ChannelOp op,
                                  const float* v, const float* u, bool relu) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int ch = channel_of(i, nhwc, c, plane);
  const float r = channel_apply(op, ld(x, i), v[ch], u ? u[ch] : 0.f);
  st(y, i, relu ? fmaxf(r, 0.f) : r);
}

// b: a's shape, or n x c x 1 x 1 (spread: index n * c + channel).
template <typename T>
__global__ void binary_kernel(const T* a, const T* b, T* y, size_t n, bool spread, bool nhwc, int c, size_t plane,
                              BinaryOp op, bool relu) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  size_t j = i;
  if (spread) j = i / (plane * size_t(c)) * size_t(c) + size_t(channel_of(i, nhwc, c, plane));
  const float v = binary_apply(op, ld(a, i), ld(b, j));
  st(y, i, relu ? fmaxf(v, 0.f) : v);
}

}  // namespace

void activation(const TensorView& x, const TensorView& y, int fn, float a, float b, cudaStream_t s) {
  require_same_format(x, y, "activation");
  const size_t n = y.shape.numel();
  if (!n) return;
  with_type(y, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    activation_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), n, ActFn(fn), a, b);
  });
  SL_LAUNCH_CHECK("activation kernel");
}

void channel_op(const TensorView& x, const TensorView& y, int op, const float* v, const float* u, bool relu,
                cudaStream_t s) {
  require_same_format(x, y, "channel_op");
  const size_t n = y.shape.numel();
  if (!n) return;
  const bool nhwc = y.format.layout == Layout::NHWC;
  with_type(y, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    channel_op_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), n, nhwc, y.shape.c,
                                                         y.shape.plane(), ChannelOp(op), v, u, relu);
  });
  SL_LAUNCH_CHECK("channel_op kernel");
}

void binary(const TensorView& a, const TensorView& b, const TensorView& y, int op, bool relu, cudaStream_t s) {
  require_same_format(a, y, "binary");
  require_same_format(b, y, "binary");
  const size_t n = y.shape.numel();
  if (!n) return;
  const bool nhwc = y.format.layout == Layout::NHWC, spread = b.shape.numel() != n;
  with_type(y, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    binary_kernel<<<blocks_for(n), kThreads, 0, s>>>(a.as<const T>(), b.as<const T>(), y.as<T>(), n, spread, nhwc,
                                                     y.shape.c, y.shape.plane(), BinaryOp(op), relu);
  });
  SL_LAUNCH_CHECK("binary kernel");
}

}  // namespace scenelab::cuda
