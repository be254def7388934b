// The YUV conversion shared by the rgb_to_yuv kernel and the fused contrast normalisation's
// loads (kernels/rgb_to_yuv.cu, kernels/contrast_norm.cu).
#pragma once

namespace scenelab::cuda {

// Channel ch of YUV from RGB (layers/rgb_to_yuv.cpp's coefficients): the rgb_to_yuv kernel and
// the contrast normalisation's loads when it is fused after it compute it alike.
__device__ __forceinline__ float yuv_of(int ch, float r, float g, float bl) {
  return ch == 0   ? 0.299f * r + 0.587f * g + 0.114f * bl
         : ch == 1 ? -0.14713f * r - 0.28886f * g + 0.436f * bl
                   : 0.615f * r - 0.51499f * g - 0.10001f * bl;
}

}  // namespace scenelab::cuda
