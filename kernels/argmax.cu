// GPU kernels of the argmax layer (layers/argmax.cpp), and one class's softmax probability for the
// score-map detection head (class_probability).
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

// The first channel of the largest value (a NaN loses to any number), channels `step` apart.
template <typename T>
__device__ __forceinline__ int argmax_over(const T* px, int c, size_t step) {
  int best = 0;
  float bv = ld(px, 0);
  for (int k = 1; k < c; ++k) {
    const float v = ld(px, size_t(k) * step);
    if (v > bv || (bv != bv && v == v)) bv = v, best = k;
  }
  return best;
}

__global__ void argmax_kernel(const float* x, float* y, int n, int c, size_t plane) {
  size_t i, at;
  if (nchw_pixel(n, c, plane, i, at)) y[i] = float(argmax_over(x + at, c, plane));
}

// One thread a pixel: the channels are contiguous.
template <typename T>
__global__ void argmax_nhwc_kernel(const T* x, T* y, int c, size_t pixels) {
  const size_t p = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p < pixels) st(y, p, float(argmax_over(x + p * c, c, 1)));
}

// One class's softmax probability over the channels of frame `frame`, as the CPU computes it
// (job/labeler.h class_probabilities: exponentials in double after subtracting the maximum),
// into a float plane: the sliding-window head's input.
template <typename T>
__global__ void class_probability_kernel(const T* x, bool nhwc, int c, size_t plane, int frame, int cls,
                                         float* out) {
  const size_t p = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= plane) return;
  const size_t base = nhwc ? (size_t(frame) * plane + p) * c : size_t(frame) * c * plane + p;
  const size_t step = nhwc ? 1 : plane;
  float m = ld(x, base);
  for (int k = 1; k < c; ++k) m = fmaxf(m, ld(x, base + k * step));
  double sum = 0;
  for (int k = 0; k < c; ++k) sum += exp(double(ld(x, base + k * step) - m));
  out[p] = float(exp(double(ld(x, base + cls * step) - m)) / sum);
}

}  // namespace

void argmax(const TensorView& x, const TensorView& y, cudaStream_t s) {
  per_pixel(x, y, s, "argmax", argmax_kernel,
            [](auto* t) { return &argmax_nhwc_kernel<std::remove_pointer_t<decltype(t)>>; });
}

void class_probability(const TensorView& x, int frame, int cls, float* out, cudaStream_t s) {
  const Shape& a = x.shape;
  SL_REQUIRE(frame >= 0 && frame < a.n && cls >= 0 && cls < a.c && supports(x.format), "class probability: frame ",
             frame, ", class ", cls, " of ", a.str(), " ", x.format.str());
  const size_t plane = a.plane();
  if (!plane) return;
  with_type(x, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    class_probability_kernel<<<blocks_for(plane), kThreads, 0, s>>>(
        x.as<const T>(), x.format.layout == Layout::NHWC, a.c, plane, frame, cls, out);
  });
  SL_LAUNCH_CHECK("class probability kernel");
}

}  // namespace scenelab::cuda
