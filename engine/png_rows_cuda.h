// PNG rows made on the GPU: the pipeline's overlay (job/overlay_rows.h) is blended and
// filtered where the pixels and the labels already are, so the host only codes it. Each row is
// filtered as png_filter_rows (engine/png_deflate.h) does it on the CPU: the filter among sub, up,
// average and Paeth with the least sum of |residual| as signed bytes, ties to up, Paeth, sub,
// average in that order; the bytes are the CPU's.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include <cstdint>

namespace scenelab::cuda {

// n frames: rgb n x h x w x 3 and labels n x h x w (bytes), lut 256 x 3 colours by label value
// (device memory). Each byte is blended as job/labeler.cpp's overlay_labels does, alpha in
// 256ths (w256, overlay_weight): ((256 - w256) a + w256 b + 128) >> 8; then each row filtered;
// out: n x h x (1 + 3 w) bytes.
void overlay_png_rows(const uint8_t* rgb, const uint8_t* labels, const uint8_t* lut, int w256,
                      int n, int h, int w, uint8_t* out, cudaStream_t s);
// The rows of plain pixels: px n x h x w x bpp (bpp 1..4); out n x h x (1 + bpp w).
void png_rows(const uint8_t* px, int n, int h, int w, int bpp, uint8_t* out, cudaStream_t s);

}  // namespace scenelab::cuda
#endif
