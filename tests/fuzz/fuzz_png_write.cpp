// libFuzzer: our PNG writer (engine/png_deflate.h) on arbitrary bytes. The first byte chooses:
// the bytes themselves through the deflate coder, inflated again by zlib (which rejects any
// invalid code or checksum) and compared; or an image of 1-4 channels and a width taken from
// the next bytes, encoded by encode_png and decoded by libpng, pixels compared, and its rows
// filtered apart coded by encode_png_filtered to the same file.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "engine/image_io.h"
#include "engine/png_deflate.h"

using namespace scenelab;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  if (data[0] & 1) {
    const std::vector<uint8_t> in(data + 1, data + size);
    std::vector<uint8_t> z(huffman_zlib_bound(in.size()));
    z.resize(huffman_zlib_compress(in.data(), in.size(), z.data()));
    std::vector<uint8_t> back(in.size() + 1);
    uLongf n = uLongf(back.size());
    if (uncompress(back.data(), &n, z.data(), uLong(z.size())) != Z_OK || n != in.size() ||
        !std::equal(in.begin(), in.end(), back.begin()))
      std::abort();
    return 0;
  }
  const int ch = 1 + (data[0] >> 1) % 4;
  const size_t body = size - 2, width = 1 + data[1] % 64;
  if (body < width * size_t(ch)) return 0;
  Image8 img{int(width), int(body / (width * size_t(ch))), ch, {}};
  img.pixels.assign(data + 2, data + 2 + size_t(img.width) * img.height * ch);
  const std::vector<uint8_t> png = encode_png(img);
  // The same rows filtered apart (as a GPU makes them) code to the same file.
  std::vector<uint8_t> rows(size_t(img.height) * (1 + size_t(img.width) * size_t(ch)));
  png_filter_rows(img.pixels.data(), size_t(img.width), size_t(img.height), size_t(ch), rows.data());
  if (encode_png_filtered(rows.data(), img.width, img.height, ch) != png) std::abort();
  if (ch == 1 || ch == 3) {
    if (decode_image(png.data(), png.size(), "fuzz.png", ch).pixels != img.pixels) std::abort();
  } else {
    decode_image(png.data(), png.size(), "fuzz.png", ch == 2 ? 1 : 3);  // must decode
  }
  return 0;
}
