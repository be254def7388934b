// JPEG decoding on the GPU for the pipeline (PipelineOptions::gpu_decode): nvJPEG's hardware
// decoder (the JPEG engines of an A100 or H100) decodes a batch of baseline JPEGs straight into
// device memory as interleaved RGB, so the host only reads the files. libnvjpeg.so.13 is opened at
// run time: where it, its hardware backend or a GPU is missing, available() is false and frames
// decode on the CPU (libjpeg-turbo). The pixels are not libjpeg-turbo's bit for bit (another IDCT
// and chroma upsampling; the bound is tests/engine/jpeg_gpu_test.cpp's).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend.h"

namespace scenelab {

class GpuJpegDecoder {
 public:
  // On the backend's GPU and stream; throws where available() is false.
  explicit GpuJpegDecoder(const Backend& backend);
  ~GpuJpegDecoder();
  GpuJpegDecoder(const GpuJpegDecoder&) = delete;
  GpuJpegDecoder& operator=(const GpuJpegDecoder&) = delete;

  // libnvjpeg.so.13 loads and its hardware backend starts (checked once a process).
  static bool available();
  // A JPEG the hardware decoder takes, by its headers alone: baseline (SOF0), 8-bit, three
  // components in YCbCr (no Adobe RGB transform) with the luma sampled 1x1, 2x1, 1x2 or 2x2 and the
  // chroma 1x1, ending with its EOI marker (not cut short); sets its size. Anything else
  // (progressive, grey, CMYK, 4:1:1, a truncated file, ...) is false: the CPU decodes it.
  static bool decodable(const uint8_t* data, size_t size, int& width, int& height);
  // Decodes n JPEGs of one size h x w (each decodable) into out[i] (device memory, h x w x 3
  // interleaved RGB each), enqueued on the backend's stream; the bytes must stay until it has
  // run. Throws where nvJPEG refuses the batch (a corrupt stream): the caller decodes those
  // frames one by one, or on the CPU, where a bad one fails alone.
  void decode(const std::vector<const std::vector<uint8_t>*>& jpegs, int h, int w, const std::vector<uint8_t*>& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scenelab
