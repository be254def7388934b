// Our PNG filters and deflate coder (engine/png_deflate.h), checked against zlib's inflate and a
// plain reconstruction of each PNG filter, on data made to reach every path: noise (stored
// blocks), runs of every length around the 258 limit, segment boundaries, skewed statistics
// whose Huffman codes would be deeper than deflate's 15 bits, and odd image sizes.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/error.h"
#include "engine/image_io.h"
#include "engine/png_deflate.h"

using namespace scenelab;

namespace {

std::vector<uint8_t> compress(const std::vector<uint8_t>& in) {
  std::vector<uint8_t> out(huffman_zlib_bound(in.size()), 0xCD);  // poisoned
  out.resize(huffman_zlib_compress(in.data(), in.size(), out.data()));
  return out;
}

// zlib's inflate, which rejects incomplete and over-subscribed codes, bad distances, and a
// wrong Adler-32.
std::vector<uint8_t> inflate_all(const std::vector<uint8_t>& z, size_t expect) {
  std::vector<uint8_t> out(expect + 1);
  uLongf n = uLongf(out.size());
  const int rc = uncompress(out.data(), &n, z.data(), uLong(z.size()));
  EXPECT_EQ(rc, Z_OK) << "inflate rejected the stream";
  out.resize(rc == Z_OK ? n : 0);
  return out;
}

void expect_round_trip(const std::vector<uint8_t>& in, const char* what) {
  const std::vector<uint8_t> z = compress(in);
  EXPECT_LE(z.size() + 8, huffman_zlib_bound(in.size())) << what;
  EXPECT_EQ(inflate_all(z, in.size()), in) << what << ", " << in.size() << " bytes";
}

}  // namespace

TEST(PngDeflate, ZlibInflatesEveryKindOfInput) {
  std::mt19937 rng(7);
  expect_round_trip({}, "empty");
  expect_round_trip({42}, "one byte");
  for (size_t n : {size_t(2), size_t(31), size_t(33), size_t(65534), size_t(65535), size_t(65536),
                   size_t(200001)}) {
    std::vector<uint8_t> noise(n), flat(n, 9), mixed(n);
    for (auto& v : noise) v = uint8_t(rng());
    expect_round_trip(noise, "noise");  // stored blocks
    expect_round_trip(flat, "one value");
    // Runs of every length 1..300 (around the 258 limit and the shortest coded run) between
    // literals, the runs' values including the previous run's.
    size_t i = 0;
    for (size_t r = 1; i < n; r = r % 300 + 1)
      for (size_t k = 0; k < r && i < n; ++k) mixed[i++] = uint8_t(r % 3 == 0 ? 0 : r);
    expect_round_trip(mixed, "runs");
  }
  // Skewed statistics: byte i is 16 - (trailing zeros of i + 1), so value v appears 2^(v-1)
  // times, never twice in a row: with the end-of-block symbol Huffman's tree is a chain 16 deep,
  // folded to deflate's 15 bits.
  std::vector<uint8_t> skew(65534);
  for (size_t i = 0; i < skew.size(); ++i) skew[i] = uint8_t(16 - __builtin_ctz(unsigned(i + 1)));
  expect_round_trip(skew, "frequencies in powers of two");
  // Two symbols only, and small alphabets, whose code-length codes use one or two symbols.
  std::vector<uint8_t> two(5000);
  for (auto& v : two) v = uint8_t(rng() & 1);
  expect_round_trip(two, "two symbols");
}

TEST(PngDeflate, FilteredRowsRebuildTheImage) {
  std::mt19937 rng(11);
  for (size_t bpp = 1; bpp <= 4; ++bpp) {
    for (auto [w, h] : {std::pair<size_t, size_t>{1, 1}, {1, 7}, {5, 1}, {37, 23}, {129, 3}}) {
      // Smooth areas (where Paeth/average win), edges and noise (sub/up), so every filter is
      // chosen somewhere.
      std::vector<uint8_t> px(w * h * bpp);
      for (size_t y = 0; y < h; ++y)
        for (size_t x = 0; x < w; ++x)
          for (size_t c = 0; c < bpp; ++c)
            px[(y * w + x) * bpp + c] =
                uint8_t(y % 5 == 4 ? rng() : x < w / 2 ? x * 3 + y * 7 + c * 50 : (y * 11 + c) & 0xF0);
      const size_t s = w * bpp;
      std::vector<uint8_t> f(h * (s + 1), 0xCD);
      png_filter_rows(px.data(), w, h, bpp, f.data());
      // Undo each row's filter as a decoder does (ISO 15948 9.2-9.4), from the rows rebuilt.
      std::vector<uint8_t> back(px.size());
      int used[5] = {0};
      for (size_t y = 0; y < h; ++y) {
        const uint8_t type = f[y * (s + 1)];
        ASSERT_TRUE(type >= 1 && type <= 4) << "filter type " << int(type);
        ++used[type];
        for (size_t x = 0; x < s; ++x) {
          const int a = x >= bpp ? back[y * s + x - bpp] : 0, u = y ? back[(y - 1) * s + x] : 0,
                    c = x >= bpp && y ? back[(y - 1) * s + x - bpp] : 0;
          const int p = a + u - c, pa = std::abs(p - a), pb = std::abs(p - u), pc = std::abs(p - c);
          const int pred = type == 1   ? a
                           : type == 2 ? u
                           : type == 3 ? (a + u) / 2
                                       : (pa <= pb && pa <= pc ? a : pb <= pc ? u : c);
          back[y * s + x] = uint8_t(f[y * (s + 1) + 1 + x] + pred);
        }
      }
      ASSERT_EQ(back, px) << "bpp " << bpp << ", " << w << "x" << h;
      if (w == 37) {
        EXPECT_GE((used[1] > 0) + (used[2] > 0) + (used[3] > 0) + (used[4] > 0), 2);
      }
    }
  }
}

TEST(PngDeflate, BothCodersWriteTheSamePixels) {
  std::mt19937 rng(3);
  for (int ch : {1, 2, 3, 4}) {
    for (auto [w, h] : {std::pair<int, int>{1, 1}, {3, 301}, {333, 257}, {22000, 2}}) {  // the last: rows over 64 KiB
      Image8 img{w, h, ch, std::vector<uint8_t>(size_t(w) * h * ch)};
      for (size_t i = 0; i < img.pixels.size(); ++i)
        img.pixels[i] = uint8_t(i % 7 == 0 ? rng() : (i / size_t(3 * w)) * 5);
      PngOptions deflate;
      deflate.coder = PngCoder::Deflate;
      const std::vector<uint8_t> ours = encode_png(img), lib = encode_png(img, deflate);
      const int want = ch >= 3 ? 3 : 1;  // the decoder gives grey or RGB
      EXPECT_EQ(decode_image(ours.data(), ours.size(), "ours.png", want).pixels,
                decode_image(lib.data(), lib.size(), "libdeflate.png", want).pixels)
          << ch << " channels, " << w << "x" << h;
      if (ch == 1 || ch == 3) {
        EXPECT_EQ(decode_image(ours.data(), ours.size(), "ours.png", ch).pixels, img.pixels);
      }
    }
  }
}

TEST(PngDeflate, CompressedPixelsServeTwoHeaders) {
  // A class map compressed once, written as grey indices and as indexed colour: the same files
  // as encoding each, for both coders.
  Image8 idx{41, 29, 1, std::vector<uint8_t>(41 * 29)};
  for (size_t i = 0; i < idx.pixels.size(); ++i) idx.pixels[i] = uint8_t((i / 7 + i / 41) % 5);
  PngOptions pal;
  pal.palette = {{{1, 2, 3}}, {{40, 50, 60}}, {{255, 0, 0}}, {{0, 255, 0}}, {{0, 0, 255}}};
  for (PngCoder coder : {PngCoder::Huffman, PngCoder::Deflate}) {
    PngOptions grey;
    grey.coder = pal.coder = coder;
    const PngPixels px = compress_png(idx, grey);
    EXPECT_EQ(png_file(px, grey), encode_png(idx, grey));
    EXPECT_EQ(png_file(px, pal), encode_png(idx, pal));
    const std::vector<uint8_t> colour = png_file(px, pal);
    const Image8 rgb = decode_image(colour.data(), colour.size(), "pal.png", 3);
    for (size_t i = 0; i < idx.pixels.size(); ++i)
      for (size_t k = 0; k < 3; ++k) ASSERT_EQ(rgb.pixels[3 * i + k], pal.palette[idx.pixels[i]][k]);
  }
  // A palette on a colour image is refused by name.
  Image8 rgb{2, 2, 3, std::vector<uint8_t>(12)};
  EXPECT_THROW(png_file(compress_png(rgb), pal), Error);
}

TEST(PngDeflate, RowsFilteredElsewhereCodeToTheSameFile) {
  // Rows filtered apart (as a GPU makes them, job/overlay_rows.h) give encode_png's file of
  // the pixels: the same pieces, the same stream; rows over 64 KiB and one-row images too.
  std::mt19937 rng(5);
  for (int ch : {1, 3, 4}) {
    for (auto [w, h] : {std::pair<int, int>{1, 1}, {3, 301}, {333, 257}, {22000, 2}}) {
      Image8 img{w, h, ch, std::vector<uint8_t>(size_t(w) * h * ch)};
      for (size_t i = 0; i < img.pixels.size(); ++i)
        img.pixels[i] = uint8_t(i % 5 == 0 ? rng() : (i / size_t(ch * w)) * 3 + i % 3);
      std::vector<uint8_t> rows(size_t(h) * (1 + size_t(w) * ch));
      png_filter_rows(img.pixels.data(), size_t(w), size_t(h), size_t(ch), rows.data());
      EXPECT_EQ(encode_png_filtered(rows.data(), w, h, ch), encode_png(img)) << ch << " channels, " << w << "x" << h;
    }
  }
  // Another coder filters its own way: refused by name, as are no rows.
  std::vector<uint8_t> rows(4, 0);
  PngOptions deflate;
  deflate.coder = PngCoder::Deflate;
  EXPECT_THROW(encode_png_filtered(rows.data(), 1, 1, 3, deflate), Error);
  EXPECT_THROW(encode_png_filtered(nullptr, 1, 1, 3), Error);
}
