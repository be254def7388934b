#include "job/overlay_rows.h"

#include <algorithm>

#include "core/error.h"
#include "job/labeler.h"

#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "core/cuda_check.h"
#include "engine/png_rows_cuda.h"
#endif

namespace scenelab {

#ifdef SCENELAB_WITH_CUDA
struct OverlayRows::Device {
  DeviceBuffer lut, rows;
};
#else
struct OverlayRows::Device {};
#endif

OverlayRows::OverlayRows(const Backend& backend, const std::vector<std::array<uint8_t, 3>>& palette,
                         float alpha)
    : backend_(backend), w256_(overlay_weight(alpha)) {
  SL_REQUIRE(available(backend), "overlay rows: ", backend.describe(), " is not a GPU backend");
  SL_REQUIRE(!palette.empty(), "overlay: empty palette");
#ifdef SCENELAB_WITH_CUDA
  const ColourTable lut = colour_table(palette);
  dev_ = std::make_unique<Device>();
  dev_->lut.resize(lut.size(), "overlay colours");
  upload_now(dev_->lut.get(), lut.data(), lut.size(), "overlay colours");
#endif
}

OverlayRows::~OverlayRows() = default;

void OverlayRows::enqueue(const uint8_t* pixels, const uint8_t* labels, int n, int h, int w,
                          uint8_t* host) {
  SL_REQUIRE(pixels && labels && host && n > 0 && h > 0 && w > 0, "overlay rows: no frames");
#ifdef SCENELAB_WITH_CUDA
  const CudaContext* ctx = backend_.cuda();
  const size_t bytes = size_t(n) * frame_bytes(h, w);
  dev_->rows.resize(bytes, "overlay rows");
  cuda::overlay_png_rows(pixels, labels, dev_->lut.get<uint8_t>(), w256_, n, h, w,
                         dev_->rows.get<uint8_t>(), ctx->stream);
  SL_CUDA_CHECK(cudaMemcpyAsync(host, dev_->rows.get(), bytes, cudaMemcpyDeviceToHost, ctx->stream),
                "overlay rows download");
#endif
}

}  // namespace scenelab
