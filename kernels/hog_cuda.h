// Launchers of the HOG layers' GPU kernels (layers/hog_gradient.cpp, layers/hog_blocks.cpp,
// layers/linear_window.cpp; the arithmetic in layers/hog_math.h) and of the pyramid's resize.
// Device pointers, f32 NCHW, stream-ordered, no synchronisation.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/layer.h"

namespace scenelab::cuda {

void hog_gradient(const TensorView& x, const TensorView& y, int bins, bool gamma, bool signed_gradient,
                  cudaStream_t s);
void hog_blocks(const TensorView& x, const TensorView& y, int cell, int cells, int stride, int bins,
                float sigma, float clip, cudaStream_t s);
void linear_window(const TensorView& x, const float* weight, const float* bias, const TensorView& y,
                   int kh, int kw, cudaStream_t s);
// Interleaved 8-bit pixels (n x sh x sw x c) resized to f32 NCHW (n x c x h x w), value / divisor
// (engine/resize_linear.h).
void resize_u8_to_f32(const uint8_t* src, int n, int c, int sh, int sw, float* dst, int h, int w,
                      float divisor, cudaStream_t s);

}  // namespace scenelab::cuda
#endif
