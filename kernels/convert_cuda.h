// Conversions the planner places at a graph's edges (engine/graph.cpp), on the GPU: the 8-bit
// interleaved image into the planar float input, and float maps (class indices) into bytes.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace scenelab::cuda {

// dst[b][ch][y][x] = src[((b * h + y) * w + x) * c + ch] / divisor
void u8_hwc_to_f32_nchw(const uint8_t* src, float* dst, int n, int c, int h, int w,
                        float divisor, cudaStream_t s);
// dst[i] = src[i] rounded to nearest, clamped to 0..255 (NaN -> 0)
void f32_to_u8(const float* src, uint8_t* dst, size_t count, cudaStream_t s);

}  // namespace scenelab::cuda
#endif
