// The image pyramid's resize on the GPU (CudaBackend::resize_u8): interleaved 8-bit pixels
// (n x sh x sw x c) resized to f32 NCHW (n x c x h x w), value / divisor, with the fixed-point
// arithmetic of engine/resize_linear.h (OpenCV's INTER_LINEAR_EXACT), so every value equals the
// CPU backend's. Device pointers, stream-ordered, no synchronisation.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include <cstdint>

namespace scenelab::cuda {

void resize_u8_to_f32(const uint8_t* src, int n, int c, int sh, int sw, float* dst, int h, int w,
                      float divisor, cudaStream_t s);

}  // namespace scenelab::cuda
#endif
