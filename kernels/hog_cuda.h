// Launchers of the HOG layers' GPU kernels (layers/hog_gradient.cpp, layers/hog_blocks.cpp,
// layers/linear_window.cpp; the arithmetic in layers/hog_math.h).
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

}  // namespace scenelab::cuda
#endif
