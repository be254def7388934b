// Conversions the planner places at a graph's edges and between layers that compute in different
// formats (engine/graph.cpp), on the GPU: the 8-bit interleaved image into the planar float
// input, and any tensor format (f32, f16, bf16, u8; NCHW or NHWC) into any other.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace scenelab::cuda {

// dst[b][ch][y][x] = src[((b * h + y) * w + x) * c + ch] / divisor
void u8_hwc_to_f32_nchw(const uint8_t* src, float* dst, int n, int c, int h, int w,
                        float divisor, cudaStream_t s);
// n images of c channels x plane pixels; into u8: rounded to nearest, clamped to 0..255 (NaN: 0).
void convert(const void* src, Format sf, void* dst, Format df, int n, int c, size_t plane,
             cudaStream_t s);

}  // namespace scenelab::cuda
#endif
