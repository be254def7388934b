#include "engine/image_io.h"

#ifdef SCENELAB_STB_IMPLEMENTATION
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_WRITE_IMPLEMENTATION
#endif
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <memory>

#include "engine/error.h"

namespace scenelab {

Image8 load_image(const std::string& path, int want) {
  int w = 0, h = 0, c = 0;
  if (!stbi_info(path.c_str(), &w, &h, &c)) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw_error(path, ": cannot open file");
    std::fclose(f);
    const char* why = stbi_failure_reason();
    throw_error(path, ": not a readable image (", why ? why : "unknown format", ")");
  }
  SL_REQUIRE(w > 0 && h > 0 && size_t(w) * size_t(h) <= (size_t(1) << 28), path,
             ": unsupported image size ", w, "x", h);
  std::unique_ptr<stbi_uc, void (*)(void*)> data(stbi_load(path.c_str(), &w, &h, &c, want),
                                                 stbi_image_free);
  if (!data) {
    const char* why = stbi_failure_reason();
    throw_error(path, ": corrupt or unsupported image (", why ? why : "decode failed", ")");
  }
  Image8 img;
  img.width = w;
  img.height = h;
  img.channels = want;
  img.pixels.assign(data.get(), data.get() + size_t(w) * h * want);
  return img;
}

Image8 load_label_image(const std::string& path) {
  int w = 0, h = 0, c = 0;
  if (stbi_info(path.c_str(), &w, &h, &c)) {
    SL_REQUIRE(c == 1, path, ": label image has ", c, " channels, expected 8-bit single-channel");
    SL_REQUIRE(!stbi_is_16_bit(path.c_str()), path,
               ": label image is 16-bit, expected 8-bit single-channel");
  }
  return load_image(path, 1);
}

void save_png(const std::string& path, const Image8& img) {
  SL_REQUIRE(img.pixels.size() == size_t(img.width) * img.height * img.channels, path,
             ": image buffer does not match its size");
  if (!stbi_write_png(path.c_str(), img.width, img.height, img.channels, img.pixels.data(),
                      img.width * img.channels))
    throw_error(path, ": cannot write PNG");
}

Tensor image_to_tensor(const Image8& img) {
  SL_REQUIRE(img.channels == 3, "image_to_tensor expects RGB, got ", img.channels, " channels");
  Tensor t(Shape(1, 3, img.height, img.width));
  const size_t plane = size_t(img.width) * img.height;
  for (size_t i = 0; i < plane; ++i)
    for (int c = 0; c < 3; ++c) t[size_t(c) * plane + i] = img.pixels[i * 3 + c] / 255.f;
  return t;
}

}  // namespace scenelab
