// GPU kernels of convolution epilogues: bias and ReLU over a GEMM's output (f32 NCHW, in place or
// strided) and over NHWC tensors of any type (the conv2d layer's algorithms, layers/conv2d.cpp).
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

// dst[c][i] = act(src[c][i] + b[c]) for i < cols, rows `ld_src` / `ld_dst` apart (in place when
// src == dst). grid.y = channel, so the bias is a per-block constant and no index is divided.
__global__ void bias_act_kernel(const float* src, size_t ld_src, float* dst, size_t ld_dst,
                                const float* b, size_t cols, bool relu) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= cols) return;
  const int c = blockIdx.y;
  const float v = src[size_t(c) * ld_src + i] + (b ? b[c] : 0.f);
  dst[size_t(c) * ld_dst + i] = relu ? fmaxf(v, 0.f) : v;
}

// 2-byte types, c a multiple of 8: 8 channels (16 bytes) a thread, in place. Idx: 32-bit where
// the group count fits (no 64-bit division for the channel group).
template <typename T, typename Idx>
__global__ void bias_act_nhwc8_kernel(T* y, const float* b, Idx groups_per_pixel, Idx groups, bool relu) {
  const Idx i = Idx(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= groups) return;
  uint4 v = reinterpret_cast<uint4*>(y)[i];
  T* e = reinterpret_cast<T*>(&v);
  const float* bg = b ? b + 8 * (i % groups_per_pixel) : nullptr;
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    const float r = ld(e, q) + (bg ? bg[q] : 0.f);
    st(e, q, relu ? fmaxf(r, 0.f) : r);
  }
  reinterpret_cast<uint4*>(y)[i] = v;
}

template <typename T>
__global__ void bias_act_nhwc_kernel(T* y, const float* b, int c, size_t total, bool relu) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  float v = ld(y, i) + (b ? b[i % c] : 0.f);
  st(y, i, relu ? fmaxf(v, 0.f) : v);
}

}  // namespace

void bias_act_nhwc(const TensorView& y, const float* b, bool relu, cudaStream_t s) {
  SL_REQUIRE(y.format.layout == Layout::NHWC, "bias_act_nhwc on ", y.format.str());
  const size_t n = y.shape.numel();
  if (!n || (!b && !relu)) return;
  const int c = y.shape.c;
  if (dtype_bytes(y.format.dtype) == 2 && c % 8 == 0 && reinterpret_cast<uintptr_t>(y.data) % 16 == 0) {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      with_index(n / 8, [&](auto groups) {
        using Idx = decltype(groups);
        bias_act_nhwc8_kernel<T, Idx><<<blocks_for(groups), kThreads, 0, s>>>(y.as<T>(), b, Idx(c / 8), groups, relu);
      });
    });
  } else {
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      bias_act_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(y.as<T>(), b, c, n, relu);
    });
  }
  SL_LAUNCH_CHECK("NHWC bias/ReLU epilogue");
}

void bias_act(const float* src, size_t ld_src, float* dst, size_t ld_dst, const float* b,
              int channels, size_t cols, bool relu, cudaStream_t s) {
  if (src == dst && !b && !relu) return;
  if (!channels || !cols) return;
  bias_act_kernel<<<dim3(blocks_for(cols), unsigned(channels)), kThreads, 0, s>>>(
      src, ld_src, dst, ld_dst, b, cols, relu);
  SL_LAUNCH_CHECK("bias/ReLU epilogue");
}

}  // namespace scenelab::cuda
