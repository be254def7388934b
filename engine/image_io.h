// Image files in and out. JPEG through libjpeg(-turbo), PNG through libpng, other formats (BMP,
// TGA, GIF, PNM...) through stb_image. Sizes are checked against limits before any pixel memory
// is allocated. PNGs are written with a fast zlib level and filter, to a temporary name renamed
// into place, so an interrupted program never leaves a half-written file (the deflate stream by
// libdeflate where available). Errors name the file.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/tensor.h"

namespace scenelab {

struct Image8 {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;  // interleaved, row-major
};

struct ImageLimits {
  // Largest image accepted (width x height), checked on the header before decoding.
  uint64_t max_pixels = uint64_t(16384) * 16384;
};

// Decodes a file (want_channels 1: grey, 3: RGB; alpha is dropped, grey is replicated, 16-bit
// samples are reduced to 8 bits, palettes expanded, CMYK JPEGs converted).
Image8 load_image(const std::string& path, int want_channels = 3,
                  const ImageLimits& limits = ImageLimits{});
// The same from bytes in memory; `name` is what errors call it.
Image8 decode_image(const uint8_t* data, size_t size, const std::string& name, int want_channels,
                    const ImageLimits& limits = ImageLimits{});
// An 8-bit single-channel label image (class index per pixel); other formats are an error.
Image8 load_label_image(const std::string& path, const ImageLimits& limits = ImageLimits{});
Image8 decode_label_image(const uint8_t* data, size_t size, const std::string& name,
                          const ImageLimits& limits = ImageLimits{});

enum class PngCoder {
  Huffman,  // rows filtered by the best of four filters each, our Huffman-and-runs coder
            // (engine/png_deflate.h): the fastest (docs/BENCHMARKS.md at fb0dc9a measures the choice)
  Deflate,  // every row "up"-filtered, libdeflate at `level` (zlib where the build lacks it)
};

struct PngOptions {
  PngCoder coder = PngCoder::Huffman;
  int level = 1;  // PngCoder::Deflate's level, 0..12 (zlib's 0..9 without libdeflate)
  // An indexed-colour PNG: img is 1 channel of indices into this palette (e.g. a class map
  // written as its colours, a third of the bytes of RGB and nothing to expand).
  std::vector<std::array<uint8_t, 3>> palette;
};
// Our PNG writer (the coder as opt.coder says).
std::vector<uint8_t> encode_png(const Image8& img, const PngOptions& opt = PngOptions{});
// The same in two steps: the compressed pixels (the IDAT's zlib stream), then the file around
// them (opt.palette). Pixels written twice with different headers - a class map as grey and as
// indexed colour - are compressed once.
struct PngPixels {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> zlib;
};
PngPixels compress_png(const Image8& img, const PngOptions& opt = PngOptions{});
std::vector<uint8_t> png_file(const PngPixels& px, const PngOptions& opt = PngOptions{});
// The file from rows already PNG-filtered as png_filter_rows writes them (engine/png_deflate.h:
// per row its filter type, then w x channels residuals; e.g. made on a GPU), PngCoder::Huffman
// only: the same bytes as encode_png of the pixels they came from.
std::vector<uint8_t> encode_png_filtered(const uint8_t* rows, int width, int height, int channels,
                                        const PngOptions& opt = PngOptions{});
// libpng + zlib at opt.level with the "up" filter, and stb_image_write: the measured alternatives
// (tools/bench_png).
std::vector<uint8_t> encode_png_libpng(const Image8& img, const PngOptions& opt = PngOptions{});
void save_png(const std::string& path, const Image8& img, const PngOptions& opt = PngOptions{});
std::vector<uint8_t> encode_png_stb(const Image8& img);

// Interleaved 8-bit RGB -> 1x3xHxW float tensor in [0, 1].
Tensor image_to_tensor(const Image8& img);

}  // namespace scenelab
