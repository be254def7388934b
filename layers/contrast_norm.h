// The GPU's two-pass contrast normalisation as a fused step, for the layers that run it: the
// contrast_norm layer itself, and rgb_to_yuv when the normalisation follows it as an epilogue
// (the conversion then happens on the kernel's loads and the YUV image is never written).
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "engine/layer.h"

namespace scenelab {

// a.in[0]: f32 NCHW (RGB where rgb_to_yuv); a.out: the last follower's format; a.workspace:
// cuda::contrast_norm_fused_workspace_floats. lcn: the normalisation (Layer::as_epilogue of
// contrast_norm); standardize: a fused standardisation after it, or null.
void contrast_norm_fused_cuda(const ForwardArgs& a, const CudaContext& ctx, const Epilogue& lcn,
                              const Epilogue* standardize, bool rgb_to_yuv);

}  // namespace scenelab
#endif
