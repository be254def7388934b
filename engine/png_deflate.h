// The PNG writer's fast path: row filters chosen per row and a deflate coder made for filtered
// image rows. A photo's filtered rows are close to noise for LZ77 (zlib level 1 finds few long
// matches in them), so the coder spends no time searching: it codes literals with a Huffman table
// built for each ~64 KiB segment (the statistics of a 480x360 overlay change down the frame:
// 4% smaller than one table) and runs of one repeated byte as distance-1 matches (flat areas,
// label maps). RFC 1950 (zlib) around RFC 1951 (deflate); any inflater reads it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace scenelab {

// Most bytes huffman_zlib_compress writes for n input bytes (stored blocks are the fallback
// where coding would not shrink a segment), with 8 bytes of slack for its word-wide stores; the
// second form for a stream fed in `pieces` pieces (HuffmanZlibWriter).
size_t huffman_zlib_bound(size_t n);
size_t huffman_zlib_bound(size_t n, size_t pieces);
// Writes the zlib stream of in[0, n) to out (capacity >= huffman_zlib_bound(n)); returns its size.
size_t huffman_zlib_compress(const uint8_t* in, size_t n, uint8_t* out);

// The same stream written as it is fed, so a caller can make the data a cache-sized piece at a
// time: each piece is coded as it comes (in segments of at most 64 KiB).
class HuffmanZlibWriter {
 public:
  explicit HuffmanZlibWriter(uint8_t* out);
  void piece(const uint8_t* d, size_t n, bool last);
  size_t finish();  // the checksum; returns the bytes written in all

 private:
  uint8_t* out_;
  uint8_t* p_;
  uint64_t buf_ = 0;
  unsigned bits_ = 0;
  uint32_t adler_ = 1;
};

// PNG filtering (ISO 15948 section 9): for each of h rows of w pixels of bpp bytes, the filter
// among sub, up, average and Paeth whose residuals have the least sum of |r| as signed bytes
// (the rule libpng's adaptive filtering uses); out gets h * (1 + w * bpp) bytes, each row its
// filter type then its residuals.
void png_filter_rows(const uint8_t* px, size_t w, size_t h, size_t bpp, uint8_t* out);

// A PNG's IDAT stream: rows filtered as png_filter_rows does and coded a segment's worth of rows
// at a time (they stay in cache between the two); out holds png_zlib_bound(w, h, bpp) bytes.
size_t png_zlib_bound(size_t w, size_t h, size_t bpp);
size_t png_zlib_stream(const uint8_t* px, size_t w, size_t h, size_t bpp, uint8_t* out);
// The same stream from rows already filtered (png_filter_rows' layout, e.g. made on a GPU:
// engine/png_rows_cuda.h): coded in the same pieces, so the bytes equal png_zlib_stream's of
// the pixels those rows came from.
size_t png_zlib_stream_filtered(const uint8_t* rows, size_t w, size_t h, size_t bpp, uint8_t* out);

}  // namespace scenelab
