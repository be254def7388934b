// GPU kernels of the conv layer (layers/conv.cpp): a direct convolution of any kernel, stride,
// dilation, padding and groups on f32 NCHW, and a depthwise one (one input channel a group) on
// NHWC of any type; one thread an output element (NHWC: neighbouring threads on neighbouring
// channels, so a warp's loads of a tap are one run), the sum in float in the order of the CPU's
// im2col rows (channel, kernel row, kernel column).
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

__global__ void conv_general_kernel(const float* x, float* y, const float* w, const float* b, int n, int cin, int h,
                                    int wd, int cout, int ho, int wo, ConvGeneral c, bool relu) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t total = size_t(n) * cout * ho * wo;
  if (i >= total) return;
  const int ox = int(i % wo), oy = int((i / wo) % ho), o = int((i / (size_t(wo) * ho)) % cout);
  const int img = int(i / (size_t(wo) * ho * cout));
  const int cin_g = cin / c.groups, cout_g = cout / c.groups, g = o / cout_g;
  float sum = 0.f;
  for (int ci = 0; ci < cin_g; ++ci) {
    const float* src = x + (size_t(img) * cin + size_t(g) * cin_g + ci) * h * wd;
    const float* wk = w + (size_t(o) * cin_g + ci) * c.kh * c.kw;
    for (int ki = 0; ki < c.kh; ++ki) {
      const int iy = oy * c.sh - c.pt + ki * c.dh;
      if (iy < 0 || iy >= h) continue;
      for (int kj = 0; kj < c.kw; ++kj) {
        const int ix = ox * c.sw - c.pl + kj * c.dw;
        if (ix >= 0 && ix < wd) sum += wk[ki * c.kw + kj] * src[size_t(iy) * wd + ix];
      }
    }
  }
  if (b) sum += b[o];
  y[i] = relu ? fmaxf(sum, 0.f) : sum;
}

template <typename T>
__global__ void conv_depthwise_nhwc_kernel(const T* x, T* y, const float* w, const float* b, int n, int cin, int h,
                                           int wd, int cout, int ho, int wo, ConvGeneral c, bool relu) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * ho * wo * cout) return;
  const Nhwc o = nhwc_of(i, ho, wo, cout);
  const int ci = o.c / (cout / cin);  // the input channel: the group's one
  const T* src = x + o.b * size_t(h) * wd * cin + ci;
  const float* wk = w + size_t(o.c) * c.kh * c.kw;
  float sum = 0.f;
  for (int ki = 0; ki < c.kh; ++ki) {
    const int iy = o.y * c.sh - c.pt + ki * c.dh;
    if (iy < 0 || iy >= h) continue;
    for (int kj = 0; kj < c.kw; ++kj) {
      const int ix = o.x * c.sw - c.pl + kj * c.dw;
      if (ix >= 0 && ix < wd) sum += wk[ki * c.kw + kj] * ld(src, (size_t(iy) * wd + ix) * cin);
    }
  }
  if (b) sum += b[o.c];
  st(y, i, relu ? fmaxf(sum, 0.f) : sum);
}

}  // namespace

void conv_depthwise_nhwc(const TensorView& x, const TensorView& y, const float* w, const float* b,
                         const ConvGeneral& c, bool relu, cudaStream_t s) {
  require_same_format(x, y, "conv (depthwise)");
  SL_REQUIRE(x.format.layout == Layout::NHWC && c.groups == x.shape.c && y.shape.c % x.shape.c == 0,
             "conv (depthwise): NHWC, one input channel a group (got ", x.format.str(), ", ", x.shape.c,
             " channels, ", c.groups, " groups)");
  const size_t n = y.shape.numel();
  if (!n) return;
  with_type(y, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    conv_depthwise_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), w, b, x.shape.n,
                                                                  x.shape.c, x.shape.h, x.shape.w, y.shape.c,
                                                                  y.shape.h, y.shape.w, c, relu);
  });
  SL_LAUNCH_CHECK("conv_depthwise_nhwc kernel");
}

void conv_general(const TensorView& x, const TensorView& y, const float* w, const float* b, const ConvGeneral& c,
                  bool relu, cudaStream_t s) {
  SL_REQUIRE(is_nchw_f32(x) && is_nchw_f32(y), "conv: f32 NCHW tensors (got ", x.format.str(), ", ", y.format.str(),
             ")");
  const size_t n = y.shape.numel();
  if (!n) return;
  conv_general_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), w, b, x.shape.n, x.shape.c, x.shape.h,
                                                          x.shape.w, y.shape.c, y.shape.h, y.shape.w, c, relu);
  SL_LAUNCH_CHECK("conv_general kernel");
}

}  // namespace scenelab::cuda
