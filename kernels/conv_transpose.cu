// GPU kernel of the conv_transpose layer (layers/conv_transpose.cpp): one thread an output
// element, the sum as the CPU computes it (layers/conv_window.h), f32 NCHW.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"
#include "layers/conv_window.h"

namespace scenelab::cuda {
namespace {

__global__ void conv_transpose_kernel(const float* x, float* y, const float* w, const float* b, int n, int cin, int h,
                                      int wd, int cout, int ho, int wo, ConvTWindow c, bool relu) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * cout * ho * wo) return;
  const int ox = int(i % wo), oy = int((i / wo) % ho), o = int((i / (size_t(wo) * ho)) % cout);
  const int img = int(i / (size_t(wo) * ho * cout));
  float v = conv_transpose_at(x, cin, h, wd, cout, img, o, oy, ox, w, c) + (b ? b[o] : 0.f);
  y[i] = relu ? fmaxf(v, 0.f) : v;
}

}  // namespace

void conv_transpose(const TensorView& x, const TensorView& y, const float* w, const float* b, const ConvTWindow& c,
                    bool relu, cudaStream_t s) {
  SL_REQUIRE(is_nchw_f32(x) && is_nchw_f32(y), "conv_transpose: f32 NCHW tensors");
  const size_t n = y.shape.numel();
  if (!n) return;
  conv_transpose_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), w, b, x.shape.n, x.shape.c, x.shape.h,
                                                            x.shape.w, y.shape.c, y.shape.h, y.shape.w, c, relu);
  SL_LAUNCH_CHECK("conv_transpose kernel");
}

}  // namespace scenelab::cuda
