// libFuzzer: image decoding (JPEG, PNG, and stb's formats) from arbitrary bytes, to 1 or 3
// channels, under a pixel limit; label PNG checks too. Any input must give an image or an Error.
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "engine/image_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  scenelab::ImageLimits lim;
  lim.max_pixels = 1 << 22;
  for (int want : {1, 3}) {
    try {
      const scenelab::Image8 img = scenelab::decode_image(data, size, "fuzz", want, lim);
      if (img.pixels.size() != size_t(img.width) * img.height * want) __builtin_trap();
    } catch (const scenelab::Error&) {
    }
  }
  try {
    scenelab::decode_label_image(data, size, "fuzz", lim);
  } catch (const scenelab::Error&) {
  }
  return 0;
}
