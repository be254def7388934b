// Image files in and out (stb_image: PNG, JPEG, BMP, TGA, GIF, PNM...). Errors name the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace scenelab {

struct Image8 {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;  // interleaved, row-major
};

Image8 load_image(const std::string& path, int want_channels = 3);
// An 8-bit single-channel label image (class index per pixel); other formats are an error.
Image8 load_label_image(const std::string& path);
void save_png(const std::string& path, const Image8& img);

// Interleaved 8-bit RGB -> 1x3xHxW float tensor in [0, 1].
Tensor image_to_tensor(const Image8& img);

}  // namespace scenelab
