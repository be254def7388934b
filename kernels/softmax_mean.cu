// GPU kernels of the softmax_mean layer (layers/softmax_mean.cpp): the log of the mean of several
// score maps' softmaxes.
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"
#include "layers/softmax_mean.h"

namespace scenelab::cuda {
namespace {

struct SoftmaxMeanInputs {
  const float* x[kSoftmaxMeanMaxInputs];
};

// log(mean_k softmax(x_k)) over channels, a thread a pixel, as layers/softmax_mean.cpp computes
// it (log softmax of each input, then a log-sum-exp over the inputs).
__global__ void softmax_mean_kernel(SoftmaxMeanInputs in, int K, float* y, int n, int c, size_t plane) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * plane) return;
  const size_t at = (i / plane) * size_t(c) * plane + i % plane;
  float lse[kSoftmaxMeanMaxInputs];
  for (int k = 0; k < K; ++k) {
    const float* px = in.x[k] + at;
    float m = px[0];
    for (int ch = 1; ch < c; ++ch) m = fmaxf(m, px[size_t(ch) * plane]);
    float s = 0;
    for (int ch = 0; ch < c; ++ch) s += expf(px[size_t(ch) * plane] - m);
    lse[k] = m + logf(s);
  }
  const float log_k = logf(float(K));
  for (int ch = 0; ch < c; ++ch) {
    const size_t o = at + size_t(ch) * plane;
    float m = -INFINITY;
    for (int k = 0; k < K; ++k) m = fmaxf(m, in.x[k][o] - lse[k]);
    float s = 0;
    for (int k = 0; k < K; ++k) s += expf(in.x[k][o] - lse[k] - m);
    y[o] = m + logf(s) - log_k;
  }
}

}  // namespace

void softmax_mean(const std::vector<TensorView>& xs, const TensorView& y, cudaStream_t s) {
  SL_REQUIRE(!xs.empty() && xs.size() <= size_t(kSoftmaxMeanMaxInputs), "softmax_mean: 1-",
             kSoftmaxMeanMaxInputs, " inputs, got ", xs.size());
  SoftmaxMeanInputs in{};
  for (size_t k = 0; k < xs.size(); ++k) {
    SL_REQUIRE(is_nchw_f32(xs[k]) && xs[k].shape == y.shape, "softmax_mean: input ", k + 1, " is ",
               xs[k].format.str(), " ", xs[k].shape.str(), ", expected f32 NCHW ", y.shape.str());
    in.x[k] = xs[k].f32();
  }
  SL_REQUIRE(is_nchw_f32(y), "softmax_mean: f32 NCHW output expected, got ", y.format.str());
  const size_t pixels = size_t(y.shape.n) * y.shape.plane();
  if (!pixels) return;
  softmax_mean_kernel<<<blocks_for(pixels), kThreads, 0, s>>>(in, int(xs.size()), y.f32(), y.shape.n,
                                                              y.shape.c, y.shape.plane());
  SL_LAUNCH_CHECK("softmax_mean kernel");
}

}  // namespace scenelab::cuda
