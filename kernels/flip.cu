// GPU kernels of the flip layer (layers/flip.cpp): each plane mirrored.
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"

namespace scenelab::cuda {
namespace {

// Mirror of each plane: rows reversed (rows) or each row reversed.
__global__ void flip_kernel(const float* x, float* y, size_t planes, int h, int w, bool rows) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= planes * h * w) return;
  const auto [p, oy, ox] = plane_pixel(i, h, w);
  y[i] = x[p * h * w + size_t(rows ? h - 1 - oy : oy) * w + (rows ? ox : w - 1 - ox)];
}

}  // namespace

void flip(const TensorView& x, const TensorView& y, bool rows, cudaStream_t s) {
  SL_REQUIRE(is_nchw_f32(x) && is_nchw_f32(y), "flip: f32 NCHW expected, got ", x.format.str(), " -> ",
             y.format.str());
  const size_t n = x.shape.numel();
  if (!n) return;
  flip_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), size_t(x.shape.n) * x.shape.c, x.shape.h,
                                                 x.shape.w, rows);
  SL_LAUNCH_CHECK("flip kernel");
}

}  // namespace scenelab::cuda
