// The pipeline's overlay made on a GPU backend (job/pipeline.h, PipelineOptions::overlay):
// the class colours blended over the image and the rows PNG-filtered where the pixels and the
// labels already are (engine/png_rows_cuda.h), then fetched with the labels. What is left to the
// host is the coding (encode_png_filtered), the same file encode_png(overlay_labels(...)) writes.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend.h"

namespace scenelab {

class OverlayRows {
 public:
  // palette: colours by class (labels past it take its last colour); alpha as overlay_labels'.
  // Throws where the backend is not a GPU (available() says).
  OverlayRows(const Backend& backend, const std::vector<std::array<uint8_t, 3>>& palette, float alpha);
  ~OverlayRows();
  OverlayRows(const OverlayRows&) = delete;
  OverlayRows& operator=(const OverlayRows&) = delete;
  static bool available(const Backend& backend) { return backend.cuda() != nullptr; }

  // Bytes of one frame's rows: h x (1 + 3 w).
  static size_t frame_bytes(int h, int w) { return size_t(h) * (1 + 3 * size_t(w)); }
  // Enqueues on the backend's stream: n frames' overlay rows from their pixels (n x h x w x 3)
  // and labels (n x h x w), both in the backend's memory, into `host` (page-locked,
  // n x frame_bytes). Asynchronous: the backend's synchronize() waits for it. Device memory
  // grows to the largest batch seen; then nothing is allocated.
  void enqueue(const uint8_t* pixels, const uint8_t* labels, int n, int h, int w, uint8_t* host);

 private:
  struct Device;
  [[maybe_unused]] const Backend& backend_;  // (unread in builds without CUDA)
  [[maybe_unused]] int w256_;                // alpha in 256ths (overlay_weight)
  std::unique_ptr<Device> dev_;
};

}  // namespace scenelab
