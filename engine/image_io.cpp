#include "engine/image_io.h"

#ifdef SCENELAB_STB_IMPLEMENTATION
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_WRITE_IMPLEMENTATION
#endif
#include <jpeglib.h>
#include <jerror.h>
#ifdef SCENELAB_WITH_LIBDEFLATE
#include <libdeflate.h>
#endif
#include <png.h>
#include <zlib.h>
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/file_io.h"
#include "engine/png_deflate.h"

namespace scenelab {
namespace {

bool is_jpeg(const uint8_t* d, size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF; }
bool is_png(const uint8_t* d, size_t n) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return n >= 8 && std::memcmp(d, sig, 8) == 0;
}
uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

void check_size(const std::string& name, uint64_t w, uint64_t h, const ImageLimits& lim) {
  SL_REQUIRE(w > 0 && h > 0, name, ": image has an empty size ", w, "x", h);
  SL_REQUIRE(w * h <= lim.max_pixels, name, ": image of ", w, "x", h, " (", w * h,
             " pixels) is larger than the limit of ", lim.max_pixels,
             " pixels (raise it with --max-pixels)");
}

// ---- JPEG (libjpeg API; libjpeg-turbo on Debian and Ubuntu) ----
// libjpeg reports fatal errors through error_exit, which must not return: it jumps back to
// decode_jpeg, whose locals between setjmp and the jump are plain C data.
struct JpegErr {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char msg[JMSG_LENGTH_MAX];
  bool truncated;
};
void jpeg_fail(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErr*>(c->err);
  (*c->err->format_message)(c, e->msg);
  std::longjmp(e->jump, 1);
}
void jpeg_warn(j_common_ptr c, int level) {
  // Warnings about corrupt but decodable data are common in real files; a premature end is not
  // (libjpeg fills the rest with grey): that one fails the image.
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) reinterpret_cast<JpegErr*>(c->err)->truncated = true;
}

void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, size_t n, bool adobe_inverted) {
  for (size_t i = 0; i < n; ++i) {
    int c = cmyk[4 * i], m = cmyk[4 * i + 1], y = cmyk[4 * i + 2], k = cmyk[4 * i + 3];
    if (!adobe_inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    rgb[3 * i] = uint8_t((c * k + 127) / 255);
    rgb[3 * i + 1] = uint8_t((m * k + 127) / 255);
    rgb[3 * i + 2] = uint8_t((y * k + 127) / 255);
  }
}

void rgb_to_grey(const uint8_t* rgb, uint8_t* g, size_t n) {
  for (size_t i = 0; i < n; ++i)
    g[i] = uint8_t((299 * rgb[3 * i] + 587 * rgb[3 * i + 1] + 114 * rgb[3 * i + 2] + 500) / 1000);
}

// Returns an empty string on success, else why it failed. `out` and `cmyk` are allocated by the
// caller's objects (no C++ object is created between setjmp and a jump).
std::string decode_jpeg(const uint8_t* data, size_t size, int want, const std::string& name,
                        const ImageLimits& lim, Image8* out, std::vector<uint8_t>* cmyk) {
  jpeg_decompress_struct ci;
  JpegErr err;
  err.truncated = false;
  ci.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = jpeg_fail;
  err.pub.emit_message = jpeg_warn;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&ci);
    return err.msg;
  }
  jpeg_create_decompress(&ci);
  jpeg_mem_src(&ci, data, static_cast<unsigned long>(size));
  jpeg_read_header(&ci, TRUE);
  try {
    check_size(name, ci.image_width, ci.image_height, lim);
  } catch (const Error&) {
    jpeg_destroy_decompress(&ci);
    throw;
  }
  const bool is_cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
  ci.out_color_space = is_cmyk ? JCS_CMYK : want == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&ci);
  const size_t w = ci.output_width, h = ci.output_height;
  const size_t stride = w * size_t(ci.output_components);
  uint8_t* dst = nullptr;
  try {
    out->width = int(w);
    out->height = int(h);
    out->channels = want;
    out->pixels.resize(w * h * size_t(want));
    if (is_cmyk) cmyk->resize(stride * h);
    dst = is_cmyk ? cmyk->data() : out->pixels.data();
  } catch (const std::bad_alloc&) {
    jpeg_destroy_decompress(&ci);
    throw_error(name, ": out of memory for a ", w, "x", h, " image");
  }
  JSAMPROW rows[16];
  while (ci.output_scanline < ci.output_height) {
    const unsigned n = std::min<unsigned>(16, ci.output_height - ci.output_scanline);
    for (unsigned r = 0; r < n; ++r) rows[r] = dst + (ci.output_scanline + r) * stride;
    jpeg_read_scanlines(&ci, rows, n);
    if (err.truncated) break;
  }
  const bool adobe = ci.saw_Adobe_marker;
  if (!err.truncated) jpeg_finish_decompress(&ci);
  jpeg_destroy_decompress(&ci);
  if (err.truncated) return "truncated JPEG data (premature end of file)";
  if (is_cmyk) {
    if (want == 3) {
      cmyk_to_rgb(cmyk->data(), out->pixels.data(), w * h, adobe);
    } else {
      std::vector<uint8_t> rgb(w * h * 3);
      cmyk_to_rgb(cmyk->data(), rgb.data(), w * h, adobe);
      rgb_to_grey(rgb.data(), out->pixels.data(), w * h);
    }
  }
  return {};
}

// ---- PNG (libpng) ----
struct PngIo {
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  std::vector<uint8_t>* out = nullptr;
  char msg[256] = {0};
};
void png_fail(png_structp p, png_const_charp m) {
  auto* io = static_cast<PngIo*>(png_get_error_ptr(p));
  std::snprintf(io->msg, sizeof io->msg, "%s", m);
  png_longjmp(p, 1);
}
void png_quiet(png_structp, png_const_charp) {}
void png_read_mem(png_structp p, png_bytep dst, png_size_t n) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(p));
  if (n > io->size - io->pos) png_error(p, "truncated PNG data (premature end of file)");
  std::memcpy(dst, io->data + io->pos, n);
  io->pos += n;
}
void png_write_mem(png_structp p, png_bytep src, png_size_t n) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(p));
  io->out->insert(io->out->end(), src, src + n);
}
void png_flush_mem(png_structp) {}

std::string decode_png(const uint8_t* data, size_t size, int want, Image8* out,
                       std::vector<png_bytep>* rows) {
  PngIo io;
  io.data = data;
  io.size = size;
  png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, png_fail, png_quiet);
  if (!p) return "cannot create a PNG reader";
  png_infop info = png_create_info_struct(p);
  if (!info || setjmp(png_jmpbuf(p))) {
    png_destroy_read_struct(&p, &info, nullptr);
    return io.msg[0] ? io.msg : "corrupt PNG";
  }
  png_set_read_fn(p, &io, png_read_mem);
  png_set_crc_action(p, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
  png_read_info(p, info);
  const png_uint_32 w = png_get_image_width(p, info), h = png_get_image_height(p, info);
  const int type = png_get_color_type(p, info);
  png_set_expand(p);  // palette -> RGB, grey < 8 bits -> 8 bits, tRNS -> alpha
  png_set_scale_16(p);
  png_set_strip_alpha(p);
  if (want == 3 && !(type & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(p);
  if (want == 1 && ((type & PNG_COLOR_MASK_COLOR) || type == PNG_COLOR_TYPE_PALETTE))
    png_set_rgb_to_gray_fixed(p, 1, -1, -1);
  png_set_interlace_handling(p);
  png_read_update_info(p, info);
  if (png_get_rowbytes(p, info) != size_t(w) * want) png_error(p, "unsupported PNG sample layout");
  bool allocated = true;
  try {
    out->width = int(w);
    out->height = int(h);
    out->channels = want;
    out->pixels.resize(size_t(w) * h * want);
    rows->resize(h);
  } catch (const std::bad_alloc&) {
    allocated = false;
  }
  if (!allocated) png_error(p, "out of memory for the image");
  for (png_uint_32 y = 0; y < h; ++y) (*rows)[y] = out->pixels.data() + size_t(y) * w * want;
  png_read_image(p, rows->data());
  png_read_end(p, nullptr);
  png_destroy_read_struct(&p, &info, nullptr);
  return {};
}

// What either PNG writer needs of its input.
void check_png_input(const Image8& img, const PngOptions& opt) {
  SL_REQUIRE(img.width > 0 && img.height > 0 &&
                 img.pixels.size() == size_t(img.width) * img.height * img.channels,
             "encode_png: image buffer does not match its size ", img.width, "x", img.height, "x",
             img.channels);
  SL_REQUIRE(img.channels >= 1 && img.channels <= 4, "encode_png: ", img.channels, " channels");
  SL_REQUIRE(opt.palette.empty() || (img.channels == 1 && opt.palette.size() <= 256),
             "encode_png: a palette needs a 1-channel index image and at most 256 colours");
}

}  // namespace

Image8 decode_image(const uint8_t* data, size_t size, const std::string& name, int want,
                    const ImageLimits& lim) {
  SL_REQUIRE(want == 1 || want == 3, name, ": can decode to 1 or 3 channels, not ", want);
  SL_REQUIRE(size > 0, name, ": empty file");
  Image8 img;
  std::string why;
  if (is_jpeg(data, size)) {
    std::vector<uint8_t> cmyk;
    why = decode_jpeg(data, size, want, name, lim, &img, &cmyk);
  } else if (is_png(data, size)) {
    // The header is read by hand first, so an oversized image is refused before libpng runs.
    SL_REQUIRE(size >= 33 && std::memcmp(data + 12, "IHDR", 4) == 0, name,
               ": corrupt PNG (no IHDR header)");
    check_size(name, be32(data + 16), be32(data + 20), lim);
    std::vector<png_bytep> rows;
    why = decode_png(data, size, want, &img, &rows);
  } else {
    int w = 0, h = 0, c = 0;
    SL_REQUIRE(size <= size_t(INT32_MAX), name, ": file too large");
    if (!stbi_info_from_memory(data, int(size), &w, &h, &c)) {
      const char* r = stbi_failure_reason();
      throw_error(name, ": not a readable image (", r ? r : "unknown format", ")");
    }
    check_size(name, uint64_t(w), uint64_t(h), lim);
    std::unique_ptr<stbi_uc, void (*)(void*)> px(
        stbi_load_from_memory(data, int(size), &w, &h, &c, want), stbi_image_free);
    if (!px) {
      const char* r = stbi_failure_reason();
      throw_error(name, ": corrupt or unsupported image (", r ? r : "decode failed", ")");
    }
    img.width = w;
    img.height = h;
    img.channels = want;
    img.pixels.assign(px.get(), px.get() + size_t(w) * h * want);
  }
  if (!why.empty()) throw_error(name, ": corrupt or unsupported image (", why, ")");
  return img;
}

Image8 load_image(const std::string& path, int want, const ImageLimits& lim) {
  const std::vector<uint8_t> bytes = read_file(path);
  return decode_image(bytes.data(), bytes.size(), path, want, lim);
}

Image8 load_label_image(const std::string& path, const ImageLimits& lim) {
  const std::vector<uint8_t> bytes = read_file(path);
  return decode_label_image(bytes.data(), bytes.size(), path, lim);
}

Image8 decode_label_image(const uint8_t* d, size_t size, const std::string& path, const ImageLimits& lim) {
  if (is_png(d, size) && size >= 33) {
    const int depth = d[24], type = d[25];
    SL_REQUIRE(type == PNG_COLOR_TYPE_GRAY, path, ": label image has colour type ", type,
               ", expected 8-bit single-channel (grey)");
    SL_REQUIRE(depth == 8, path, ": label image is ", depth, "-bit, expected 8-bit single-channel");
  } else if (!is_jpeg(d, size)) {
    int w = 0, h = 0, c = 0;
    if (size <= size_t(INT32_MAX) && stbi_info_from_memory(d, int(size), &w, &h, &c)) {
      SL_REQUIRE(c == 1, path, ": label image has ", c, " channels, expected 8-bit single-channel");
      SL_REQUIRE(!stbi_is_16_bit_from_memory(d, int(size)), path,
                 ": label image is 16-bit, expected 8-bit single-channel");
    }
  } else {
    throw_error(path, ": label image is a JPEG; labels must be lossless (8-bit PNG)");
  }
  return decode_image(d, size, path, 1, lim);
}

std::vector<uint8_t> encode_png_libpng(const Image8& img, const PngOptions& opt) {
  check_png_input(img, opt);
  std::vector<uint8_t> out;
  out.reserve(img.pixels.size() / 2 + 1024);
  std::vector<png_bytep> rows(size_t(img.height));
  PngIo io;
  io.out = &out;
  png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io, png_fail, png_quiet);
  SL_REQUIRE(p, "encode_png: cannot create a PNG writer");
  png_infop info = png_create_info_struct(p);
  if (!info || setjmp(png_jmpbuf(p))) {
    png_destroy_write_struct(&p, &info);
    throw_error("encode_png: ", io.msg[0] ? io.msg : "libpng failed");
  }
  png_set_write_fn(p, &io, png_write_mem, png_flush_mem);
  static const int types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                               PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  const int type = opt.palette.empty() ? types[img.channels] : PNG_COLOR_TYPE_PALETTE;
  png_set_IHDR(p, info, png_uint_32(img.width), png_uint_32(img.height), 8, type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_color plte[256];
  if (!opt.palette.empty()) {
    for (size_t i = 0; i < opt.palette.size(); ++i)
      plte[i] = png_color{opt.palette[i][0], opt.palette[i][1], opt.palette[i][2]};
    png_set_PLTE(p, info, plte, int(opt.palette.size()));
  }
  png_set_compression_level(p, opt.level);
  // The "up" filter: at level 1 the smallest and fastest of the single filters on photos and
  // label maps alike (docs/BENCHMARKS.md at fb0dc9a); adaptive filtering costs twice the time.
  png_set_filter(p, PNG_FILTER_TYPE_BASE, PNG_FILTER_UP);
  png_write_info(p, info);
  const size_t stride = size_t(img.width) * img.channels;
  for (int y = 0; y < img.height; ++y)
    rows[size_t(y)] = const_cast<png_bytep>(img.pixels.data() + size_t(y) * stride);
  png_write_image(p, rows.data());
  png_write_end(p, nullptr);
  png_destroy_write_struct(&p, &info);
  return out;
}

namespace {

uint32_t crc32_of(const uint8_t* p, size_t n) {
#ifdef SCENELAB_WITH_LIBDEFLATE
  return libdeflate_crc32(0, p, n);
#else
  return uint32_t(crc32(crc32(0L, Z_NULL, 0), p, uInt(n)));  // a chunk is < 2^31 bytes
#endif
}

void put32(std::vector<uint8_t>& o, uint32_t v) {
  const uint8_t b[4] = {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
  o.insert(o.end(), b, b + 4);
}

// Appends a chunk whose data is already at the end of `o` (after its length and type).
void close_chunk(std::vector<uint8_t>& o, size_t start) {
  const size_t len = o.size() - start - 8;
  for (int k = 0; k < 4; ++k) o[start + size_t(k)] = uint8_t(len >> (24 - 8 * k));
  put32(o, crc32_of(o.data() + start + 4, len + 4));
}

size_t open_chunk(std::vector<uint8_t>& o, const char type[4]) {
  const size_t start = o.size();
  put32(o, 0);
  o.insert(o.end(), type, type + 4);
  return start;
}

#ifdef SCENELAB_WITH_LIBDEFLATE
struct Compressor {
  libdeflate_compressor* c = nullptr;
  int level = -1;
  ~Compressor() {
    if (c) libdeflate_free_compressor(c);
  }
};
#endif

}  // namespace

namespace {

// The calling thread's buffer for a zlib stream, grown to at least `bound` bytes (never
// zero-filled per image): one for every writer of the thread.
std::vector<uint8_t>& zlib_buffer(size_t bound) {
  thread_local std::vector<uint8_t> z;
  if (z.size() < bound) z.resize(bound);
  return z;
}

// The IDAT's zlib stream of img into the thread's buffer (zlib_buffer); returns it and sets n to
// its size.
const std::vector<uint8_t>& compress_into(const Image8& img, const PngOptions& opt, size_t& n) {
  check_png_input(img, opt);
  const bool huffman = opt.coder == PngCoder::Huffman;
  SL_REQUIRE(huffman || (opt.level >= 0 && opt.level <= 12), "encode_png: level ", opt.level,
             " not in 0..12");
  const size_t w = size_t(img.width), h = size_t(img.height), bpp = size_t(img.channels);
  const uint8_t* px = img.pixels.data();
  n = 0;
  if (huffman) {
    std::vector<uint8_t>& z = zlib_buffer(png_zlib_bound(w, h, bpp));
    n = png_zlib_stream(px, w, h, bpp, z.data());
    SL_REQUIRE(n > 0, "encode_png: compression failed");
    return z;
  } else {
    // Every row "up"-filtered, then libdeflate (zlib where the build lacks it) at `level`.
    thread_local std::vector<uint8_t> filtered;
    const size_t stride = w * bpp;
    filtered.resize((stride + 1) * h);
    for (size_t y = 0; y < h; ++y) {
      uint8_t* row = &filtered[y * (stride + 1)];
      row[0] = 2;  // up
      const uint8_t* cur = px + y * stride;
      if (y == 0) {
        std::memcpy(row + 1, cur, stride);
      } else {
        const uint8_t* prev = cur - stride;
        for (size_t x = 0; x < stride; ++x) row[1 + x] = uint8_t(cur[x] - prev[x]);
      }
    }
#ifdef SCENELAB_WITH_LIBDEFLATE
    thread_local Compressor comp;
    if (!comp.c || comp.level != opt.level) {
      if (comp.c) libdeflate_free_compressor(comp.c);
      comp.c = libdeflate_alloc_compressor(opt.level);
      comp.level = opt.level;
      SL_REQUIRE(comp.c, "encode_png: out of memory");
    }
    const size_t bound = libdeflate_zlib_compress_bound(comp.c, filtered.size());
    std::vector<uint8_t>& z = zlib_buffer(bound);
    n = libdeflate_zlib_compress(comp.c, filtered.data(), filtered.size(), z.data(), bound);
#else
    uLongf len = compressBound(uLong(filtered.size()));
    std::vector<uint8_t>& z = zlib_buffer(len);
    SL_REQUIRE(compress2(z.data(), &len, filtered.data(), uLong(filtered.size()),
                         std::min(opt.level, 9)) == Z_OK,
               "encode_png: compression failed");
    n = len;
#endif
    SL_REQUIRE(n > 0, "encode_png: compression failed");
    return z;
  }
}

// The container written here around a zlib stream: signature, IHDR, PLTE, one IDAT, IEND.
std::vector<uint8_t> file_around(const uint8_t* zlib, size_t n, int width, int height, int channels,
                                 const PngOptions& opt) {
  SL_REQUIRE(width > 0 && height > 0 && channels >= 1 && channels <= 4 && n > 0,
             "png_file: no compressed pixels");
  SL_REQUIRE(opt.palette.empty() || (channels == 1 && opt.palette.size() <= 256),
             "encode_png: a palette needs a 1-channel index image and at most 256 colours");
  static const uint8_t types[5] = {0, 0, 4, 2, 6};
  std::vector<uint8_t> o;
  o.reserve(n + 8 + 25 + 12 + 3 * opt.palette.size() + 12 + 12);
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  o.insert(o.end(), sig, sig + 8);
  size_t c = open_chunk(o, "IHDR");
  put32(o, uint32_t(width));
  put32(o, uint32_t(height));
  const uint8_t ihdr[5] = {8, uint8_t(opt.palette.empty() ? types[channels] : 3), 0, 0, 0};
  o.insert(o.end(), ihdr, ihdr + 5);
  close_chunk(o, c);
  if (!opt.palette.empty()) {
    c = open_chunk(o, "PLTE");
    for (const auto& rgb : opt.palette) o.insert(o.end(), rgb.begin(), rgb.end());
    close_chunk(o, c);
  }
  c = open_chunk(o, "IDAT");
  o.insert(o.end(), zlib, zlib + n);
  close_chunk(o, c);
  c = open_chunk(o, "IEND");
  close_chunk(o, c);
  return o;
}

}  // namespace

PngPixels compress_png(const Image8& img, const PngOptions& opt) {
  size_t n = 0;
  const std::vector<uint8_t>& z = compress_into(img, opt, n);
  return PngPixels{img.width, img.height, img.channels, std::vector<uint8_t>(z.data(), z.data() + n)};
}

std::vector<uint8_t> png_file(const PngPixels& px, const PngOptions& opt) {
  return file_around(px.zlib.data(), px.zlib.size(), px.width, px.height, px.channels, opt);
}

// Straight from the thread's buffer into the file: no intermediate copy of the stream.
std::vector<uint8_t> encode_png(const Image8& img, const PngOptions& opt) {
  size_t n = 0;
  const std::vector<uint8_t>& z = compress_into(img, opt, n);
  return file_around(z.data(), n, img.width, img.height, img.channels, opt);
}

std::vector<uint8_t> encode_png_filtered(const uint8_t* rows, int width, int height, int channels,
                                        const PngOptions& opt) {
  SL_REQUIRE(rows && width > 0 && height > 0 && channels >= 1 && channels <= 4,
             "encode_png_filtered: no rows of ", width, "x", height, "x", channels);
  SL_REQUIRE(opt.coder == PngCoder::Huffman, "encode_png_filtered: rows filtered per row are coded by PngCoder::Huffman only");
  const size_t w = size_t(width), h = size_t(height), bpp = size_t(channels);
  std::vector<uint8_t>& z = zlib_buffer(png_zlib_bound(w, h, bpp));
  const size_t n = png_zlib_stream_filtered(rows, w, h, bpp, z.data());
  return file_around(z.data(), n, width, height, channels, opt);
}

std::vector<uint8_t> encode_png_stb(const Image8& img) {
  std::vector<uint8_t> out;
  auto append = [](void* ctx, void* data, int size) {
    auto* o = static_cast<std::vector<uint8_t>*>(ctx);
    o->insert(o->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  };
  SL_REQUIRE(stbi_write_png_to_func(append, &out, img.width, img.height, img.channels,
                                    img.pixels.data(), img.width * img.channels),
             "stb PNG encoder failed");
  return out;
}

void save_png(const std::string& path, const Image8& img, const PngOptions& opt) {
  std::vector<uint8_t> bytes;
  try {
    bytes = encode_png(img, opt);
  } catch (const Error& e) {
    throw_error(path, ": ", e.what());
  }
  write_file_atomic(path, bytes);
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
