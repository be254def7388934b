#include "engine/png_deflate.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#ifdef SCENELAB_WITH_LIBDEFLATE
#include <libdeflate.h>
#else
#include <zlib.h>
#endif

namespace scenelab {
namespace {

// Runs of a repeated byte shorter than this are coded as literals. Measured on val overlays
// (tools/bench_png): 4 -> 8 costs 1.2% more bytes and saves a third of the coding time (each run
// breaks the literal loop); label maps, nearly all long runs, shrink a little.
constexpr size_t kMinRun = 8;
static_assert(kMinRun >= 3 && kMinRun <= 16, "runs are found within 16 + 16 bytes");
// A segment is coded with its own Huffman table (and is at most what one stored block holds).
constexpr size_t kSegment = 65535;
constexpr int kLitLenSymbols = 286, kCodeLenSymbols = 19;
constexpr int kLitLenLimit = 15, kCodeLenLimit = 7;

uint32_t adler32_of(uint32_t adler, const uint8_t* p, size_t n) {
#ifdef SCENELAB_WITH_LIBDEFLATE
  return libdeflate_adler32(adler, p, n);
#else
  uLong a = adler;
  while (n > 0) {  // zlib's length is a uInt
    const uInt k = uInt(std::min<size_t>(n, 1u << 30));
    a = adler32(a, p, k);
    p += k;
    n -= k;
  }
  return uint32_t(a);
#endif
}

// Deflate's length symbols (RFC 1951 3.2.5): for each match length 3..258, its symbol and the
// value and count of its extra bits, derived from the rule that builds the table.
struct LengthCode {
  uint16_t symbol = 0;
  uint8_t extra_bits = 0;
  uint8_t extra = 0;
};
struct LengthTable {
  LengthCode of[259];
  LengthTable() {
    int base = 3;
    for (int sym = 257; sym <= 284; ++sym) {
      const int bits = sym < 265 ? 0 : (sym - 261) / 4;
      for (int k = 0; k < (1 << bits) && base + k < 258; ++k)
        of[base + k] = LengthCode{uint16_t(sym), uint8_t(bits), uint8_t(k)};
      base += 1 << bits;
    }
    of[258] = LengthCode{285, 0, 0};
  }
};
const LengthTable& lengths() {
  static const LengthTable t;
  return t;
}

// Bit j set where p[j] equals p[j - 1] (the first: equals p[-1]), j < 16.
inline uint32_t equal_to_previous(const uint8_t* p) {
#if defined(__SSE2__)
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p - 1));
  return uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi8(a, b)));
#else
  uint32_t m = 0;
  for (int j = 0; j < 16; ++j) m |= uint32_t(p[j] == p[j - 1]) << j;
  return m;
#endif
}

// How many of p[0, most) equal v before the first that does not.
inline size_t run_of(const uint8_t* p, size_t most, uint8_t v) {
  size_t r = 0;
#if defined(__SSE2__)
  const __m128i vv = _mm_set1_epi8(char(v));
  for (; r + 16 <= most; r += 16) {
    const uint32_t m = uint32_t(_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + r)), vv)));
    if (m != 0xFFFF) return r + size_t(__builtin_ctz(~m));
  }
#endif
  while (r < most && p[r] == v) ++r;
  return r;
}

struct Run {
  uint32_t at, length;  // the repeats d[at, at + length) of d[at - 1]
};

// A segment's runs: where kMinRun or more bytes repeat the byte before them, a distance-1 match
// of up to 258 bytes (the byte before is a literal or the end of another run); every other byte
// is a literal. Found 16 bytes at a time by the mask of bytes equal to their predecessor; the
// last 32 bytes of a segment are literals.
size_t find_runs(const uint8_t* d, size_t n, Run* runs) {
  size_t count = 0, i = 1;
  while (i + 32 <= n) {
    const uint32_t eq = equal_to_previous(d + i) | equal_to_previous(d + i + 16) << 16;
    uint32_t starts = eq & 0xFFFF;  // where kMinRun bytes in a row equal their predecessors
    for (size_t k = 1; k < kMinRun; ++k) starts &= eq >> k;
    if (!starts) {
      i += 16;
      continue;
    }
    const size_t at = i + size_t(__builtin_ctz(starts));
    const size_t r = run_of(d + at, std::min<size_t>(258, n - at), d[at - 1]);
    runs[count++] = Run{uint32_t(at), uint32_t(r)};
    i = at + r;
  }
  return count;
}

// Byte counts of d[0, n), four tables so that repeated bytes do not wait on each other.
void histogram(const uint8_t* d, size_t n, uint32_t* freq) {
  uint32_t h[4][256] = {};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    ++h[0][d[i]];
    ++h[1][d[i + 1]];
    ++h[2][d[i + 2]];
    ++h[3][d[i + 3]];
  }
  for (; i < n; ++i) ++h[0][d[i]];
  for (int b = 0; b < 256; ++b) freq[b] += h[0][b] + h[1][b] + h[2][b] + h[3][b];
}

// Code lengths of at most `limit` bits for the symbols of nonzero frequency: Huffman's by the
// two-queue construction over the sorted frequencies, depths over the limit folded back as in
// ITU T.81 Annex K.3 (two deepest leaves leave, one takes their parent's place, the other goes
// beside a shallower leaf that becomes an inner node), so the code stays complete.
void huffman_lengths(const uint32_t* freq, int n, int limit, uint8_t* len) {
  std::array<uint16_t, kLitLenSymbols> sym{};
  int m = 0;
  for (int s = 0; s < n; ++s) {
    len[s] = 0;
    if (freq[s]) sym[size_t(m++)] = uint16_t(s);
  }
  if (m == 0) return;
  if (m == 1) {  // one symbol: a 1-bit code and an unused partner keep the code complete
    len[sym[0]] = 1;
    len[sym[0] == 0 ? 1 : 0] = 1;
    return;
  }
  std::sort(sym.begin(), sym.begin() + m, [&](uint16_t a, uint16_t b) {
    return freq[a] != freq[b] ? freq[a] < freq[b] : a < b;
  });
  // Nodes 0..m-1 are the leaves in ascending order, m..2m-2 the inner nodes as made (ascending
  // weights too, so the two lightest are always at one of the two queue heads).
  std::array<uint64_t, 2 * kLitLenSymbols> weight{};
  std::array<uint16_t, 2 * kLitLenSymbols> parent{};
  for (int k = 0; k < m; ++k) weight[size_t(k)] = freq[sym[size_t(k)]];
  int leaf = 0, inner = m;
  auto lightest = [&](int made) {
    if (leaf < m && (inner >= made || weight[size_t(leaf)] <= weight[size_t(inner)])) return leaf++;
    return inner++;
  };
  for (int made = m; made < 2 * m - 1; ++made) {
    const int a = lightest(made), b = lightest(made);
    weight[size_t(made)] = weight[size_t(a)] + weight[size_t(b)];
    parent[size_t(a)] = parent[size_t(b)] = uint16_t(made);
  }
  std::array<uint16_t, 2 * kLitLenSymbols> depth{};
  std::array<int, 2 * kLitLenSymbols> count{};  // leaves per depth
  for (int k = 2 * m - 3; k >= 0; --k) depth[size_t(k)] = uint16_t(depth[parent[size_t(k)]] + 1);
  int deepest = 0;
  for (int k = 0; k < m; ++k) {
    ++count[depth[size_t(k)]];
    deepest = std::max<int>(deepest, depth[size_t(k)]);
  }
  for (int d = deepest; d > limit; --d) {
    while (count[size_t(d)] > 0) {
      int j = d - 2;
      while (count[size_t(j)] == 0) --j;
      count[size_t(d)] -= 2;
      count[size_t(d - 1)] += 1;
      count[size_t(j + 1)] += 2;
      count[size_t(j)] -= 1;
    }
  }
  // The rarest symbols take the longest codes.
  int k = 0;
  for (int d = std::min(deepest, limit); d >= 1; --d)
    for (int c = 0; c < count[size_t(d)]; ++c) len[sym[size_t(k++)]] = uint8_t(d);
}

// Canonical codes (RFC 1951 3.2.2), bit-reversed for deflate's least-significant-first order.
void canonical_codes(const uint8_t* len, int n, uint16_t* code) {
  int count[16] = {0};
  for (int s = 0; s < n; ++s) ++count[len[s]];
  count[0] = 0;
  int next[16] = {0};
  for (int b = 1, c = 0; b < 16; ++b) next[b] = c = (c + count[b - 1]) << 1;
  for (int s = 0; s < n; ++s) {
    if (!len[s]) continue;
    unsigned v = unsigned(next[len[s]]++), r = 0;
    for (int b = 0; b < len[s]; ++b, v >>= 1) r = (r << 1) | (v & 1);
    code[s] = uint16_t(r);
  }
}

// Bits out, least significant first: each put stores the whole 64-bit word and advances by the
// bytes completed (callers leave 8 bytes of slack past the end).
struct BitWriter {
  uint8_t* p;
  uint64_t buf = 0;
  unsigned n = 0;
  void put(uint64_t v, unsigned bits) {  // bits <= 56
    buf |= v << n;
    n += bits;
    std::memcpy(p, &buf, 8);
    p += n >> 3;
    buf >>= n & ~7u;
    n &= 7;
  }
  void align() {
    if (n) {
      ++p;
      buf = 0;
      n = 0;
    }
  }
};

void stored_block(BitWriter& w, const uint8_t* d, size_t n, bool last) {
  w.put(last ? 1 : 0, 3);  // BFINAL, BTYPE 00
  w.align();
  const uint8_t hdr[4] = {uint8_t(n), uint8_t(n >> 8), uint8_t(~n), uint8_t(~n >> 8)};
  std::memcpy(w.p, hdr, 4);
  if (n) std::memcpy(w.p + 4, d, n);  // d may be null when n is 0
  w.p += 4 + n;
}

// One segment as a dynamic-Huffman block, or stored where that is no larger.
void segment_block(BitWriter& w, const uint8_t* d, size_t n, bool last) {
  const LengthTable& lt = lengths();
  uint32_t freq[kLitLenSymbols] = {0};
  uint64_t extra_bits = 0;
  thread_local std::vector<Run> runs;
  if (runs.size() < kSegment / kMinRun + 1) runs.resize(kSegment / kMinRun + 1);
  const size_t nruns = find_runs(d, n, runs.data());
  histogram(d, n, freq);
  for (size_t k = 0; k < nruns; ++k) {
    const Run& r = runs[k];
    freq[d[r.at - 1]] -= r.length;
    ++freq[lt.of[r.length].symbol];
    extra_bits += lt.of[r.length].extra_bits + 1u;  // + the 1-bit distance code
  }
  freq[256] = 1;  // end of block
  uint8_t len[kLitLenSymbols + 2];
  huffman_lengths(freq, kLitLenSymbols, kLitLenLimit, len);
  int hlit = kLitLenSymbols;
  while (hlit > 257 && len[hlit - 1] == 0) --hlit;
  // Two distance codes of one bit (only distance 1 is used; two keep the code complete).
  len[hlit] = len[hlit + 1] = 1;
  const int all = hlit + 2;

  // The code lengths, run-length coded with symbols 16 (repeat the last 3-6 times), 17 (3-10
  // zeros) and 18 (11-138 zeros).
  struct Op {
    uint8_t sym, extra, extra_bits;
  };
  Op ops[kLitLenSymbols + 2];
  int nops = 0;
  uint32_t cfreq[kCodeLenSymbols] = {0};
  for (int i = 0; i < all;) {
    const uint8_t v = len[i];
    int run = 1;
    while (i + run < all && len[i + run] == v) ++run;
    i += run;
    if (v == 0) {
      while (run >= 11) {
        const int k = std::min(run, 138);
        ops[nops++] = Op{18, uint8_t(k - 11), 7};
        run -= k;
      }
      if (run >= 3) {
        ops[nops++] = Op{17, uint8_t(run - 3), 3};
        run = 0;
      }
    } else {
      ops[nops++] = Op{v, 0, 0};
      --run;
      while (run >= 3) {
        const int k = std::min(run, 6);
        ops[nops++] = Op{16, uint8_t(k - 3), 2};
        run -= k;
      }
    }
    for (; run > 0; --run) ops[nops++] = Op{v, 0, 0};
  }
  for (int k = 0; k < nops; ++k) ++cfreq[ops[k].sym];
  uint8_t clen[kCodeLenSymbols];
  huffman_lengths(cfreq, kCodeLenSymbols, kCodeLenLimit, clen);
  static const uint8_t order[kCodeLenSymbols] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5,
                                                 11, 4, 12, 3, 13, 2, 14, 1, 15};
  int hclen = kCodeLenSymbols;
  while (hclen > 4 && clen[order[hclen - 1]] == 0) --hclen;

  uint64_t bits = 3 + 5 + 5 + 4 + 3 * uint64_t(hclen) + extra_bits;
  for (int k = 0; k < nops; ++k) bits += clen[ops[k].sym] + ops[k].extra_bits;
  for (int s = 0; s < hlit; ++s) bits += uint64_t(freq[s]) * len[s];
  if (bits >= 3 + 32 + 8 * uint64_t(n)) {
    stored_block(w, d, n, last);
    return;
  }

  uint16_t code[kLitLenSymbols], ccode[kCodeLenSymbols];
  canonical_codes(len, hlit, code);
  canonical_codes(clen, kCodeLenSymbols, ccode);
  w.put((last ? 1 : 0) | (2u << 1), 3);  // BFINAL, BTYPE 10
  w.put(unsigned(hlit - 257) | (1u << 5) | (unsigned(hclen - 4) << 10), 14);
  for (int k = 0; k < hclen; ++k) w.put(clen[order[k]], 3);
  for (int k = 0; k < nops; ++k)
    w.put(ccode[ops[k].sym] | (uint64_t(ops[k].extra) << clen[ops[k].sym]),
          clen[ops[k].sym] + ops[k].extra_bits);
  // Each token's bits and their count in one word: a literal's code, or a match's length code,
  // its extra bits and the distance (distance 1 is distance code 0, whose 1-bit code is 0).
  uint32_t entry[256 + 259];
  for (int b = 0; b < 256; ++b) entry[b] = code[b] | uint32_t(len[b]) << 24;
  for (size_t r = kMinRun; r <= 258; ++r) {
    const LengthCode& c = lt.of[r];
    entry[256 + r] = (code[c.symbol] | uint32_t(c.extra) << len[c.symbol]) |
                     uint32_t(len[c.symbol] + c.extra_bits + 1) << 24;
  }
  // Three literals (<= 45 bits) on top of the <= 7 bits left over fit the word: one store for
  // three. Locals, not the writer's fields, so the byte stores cannot alias the state.
  uint8_t* p = w.p;
  uint64_t buf = w.buf;
  unsigned nb = w.n;
  auto flush = [&] {
    std::memcpy(p, &buf, 8);
    p += nb >> 3;
    buf >>= nb & ~7u;
    nb &= 7;
  };
  auto add = [&](uint32_t e) {
    buf |= uint64_t(e & 0xFFFFFF) << nb;
    nb += e >> 24;
  };
  size_t q = 0;
  for (size_t k = 0; k <= nruns; ++k) {
    const size_t end = k < nruns ? runs[k].at : n;
    for (; q + 3 <= end; q += 3) {
      add(entry[d[q]]);
      add(entry[d[q + 1]]);
      add(entry[d[q + 2]]);
      flush();
    }
    for (; q < end; ++q) {
      add(entry[d[q]]);
      flush();
    }
    if (k < nruns) {
      add(entry[256 + runs[k].length]);
      flush();
      q += runs[k].length;
    }
  }
  w.p = p;
  w.buf = buf;
  w.n = nb;
  w.put(code[256], len[256]);
}

}  // namespace

size_t huffman_zlib_bound(size_t n, size_t pieces) {
  // Each segment is at most a stored block: 3 header bits, up to 7 of padding, 4 bytes of
  // lengths and its bytes (a coded one is smaller); then the last byte's padding, the checksum
  // and the slack of the word-wide stores.
  return 2 + n + 6 * std::max<size_t>(1, pieces) + 1 + 4 + 8;
}
size_t huffman_zlib_bound(size_t n) { return huffman_zlib_bound(n, (n + kSegment - 1) / kSegment); }

HuffmanZlibWriter::HuffmanZlibWriter(uint8_t* out) : out_(out), p_(out + 2) {
  out[0] = 0x78;  // deflate, 32 KiB window
  out[1] = 0x01;  // "fastest" level; 0x7801 is a multiple of 31 as the header check asks
}

void HuffmanZlibWriter::piece(const uint8_t* d, size_t n, bool last) {
  BitWriter w{p_, buf_, bits_};
  for (size_t at = 0; at < n || (at == 0 && last); at += kSegment) {
    const size_t k = std::min(kSegment, n - at);
    const bool end = last && at + k == n;
    if (k == 0) {
      stored_block(w, d, 0, true);
      break;
    }
    segment_block(w, d + at, k, end);
  }
  p_ = w.p, buf_ = w.buf, bits_ = w.n;
  if (n) adler_ = adler32_of(adler_, d, n);
}

size_t HuffmanZlibWriter::finish() {
  BitWriter w{p_, buf_, bits_};
  w.align();
  const uint8_t tail[4] = {uint8_t(adler_ >> 24), uint8_t(adler_ >> 16), uint8_t(adler_ >> 8), uint8_t(adler_)};
  std::memcpy(w.p, tail, 4);
  return size_t(w.p + 4 - out_);
}

size_t huffman_zlib_compress(const uint8_t* in, size_t n, uint8_t* out) {
  HuffmanZlibWriter z(out);
  z.piece(in, n, true);
  return z.finish();
}

namespace {

// One row's four candidates and their sums of |residual| (as signed bytes), in int arithmetic
// the compiler vectorises (the Paeth choice as selects).
template <size_t BPP>
void filter_candidates(const uint8_t* __restrict cur, const uint8_t* __restrict prev, size_t s,
                       uint8_t* __restrict sub, uint8_t* __restrict up, uint8_t* __restrict avg,
                       uint8_t* __restrict pae, uint32_t sum[4]) {
  uint32_t s_sub = 0, s_up = 0, s_avg = 0, s_pae = 0;
  const size_t b = std::min(BPP, s);
  for (size_t x = 0; x < b; ++x) {
    sub[x] = cur[x];
    up[x] = pae[x] = uint8_t(cur[x] - prev[x]);
    avg[x] = uint8_t(cur[x] - (prev[x] >> 1));
    s_sub += uint32_t(std::abs(int(int8_t(sub[x]))));
    s_up += uint32_t(std::abs(int(int8_t(up[x]))));
    s_avg += uint32_t(std::abs(int(int8_t(avg[x]))));
  }
  s_pae = s_up;
  for (size_t x = b; x < s; ++x) {
    const int v = cur[x], a = cur[x - BPP], u = prev[x], c = prev[x - BPP];
    const int pa = std::abs(u - c), pb = std::abs(a - c), pc = std::abs(a + u - 2 * c);
    // Paeth's choice (a where pa is least, then u, then c) as masks: no branch to vectorise.
    const int take_a = -int((pa <= pb) & (pa <= pc)), take_u = -int(pb <= pc) & ~take_a;
    const int pred = (a & take_a) | (u & take_u) | (c & ~(take_a | take_u));
    const uint8_t rs = uint8_t(v - a), ru = uint8_t(v - u), ra = uint8_t(v - ((a + u) >> 1)),
                  rp = uint8_t(v - pred);
    sub[x] = rs;
    up[x] = ru;
    avg[x] = ra;
    pae[x] = rp;
    s_sub += uint32_t(std::abs(int(int8_t(rs))));
    s_up += uint32_t(std::abs(int(int8_t(ru))));
    s_avg += uint32_t(std::abs(int(int8_t(ra))));
    s_pae += uint32_t(std::abs(int(int8_t(rp))));
  }
  sum[0] = s_up;
  sum[1] = s_pae;
  sum[2] = s_sub;
  sum[3] = s_avg;
}

// Rows [y0, y1) of the image filtered into out (the row above y0 is px's row y0 - 1).
void filter_rows(const uint8_t* px, size_t w, size_t y0, size_t y1, size_t bpp, uint8_t* out) {
  const size_t s = w * bpp;
  thread_local std::vector<uint8_t> zero, cand;
  if (zero.size() < s) zero.assign(s, 0);
  if (cand.size() < 4 * s) cand.resize(4 * s);
  uint8_t* sub = cand.data();
  uint8_t* up = sub + s;
  uint8_t* avg = up + s;
  uint8_t* pae = avg + s;
  // Ties go to the earlier filter in this order: up, Paeth, sub, average.
  const uint8_t* rows[4] = {up, pae, sub, avg};
  static const uint8_t type[4] = {2, 4, 1, 3};
  for (size_t y = y0; y < y1; ++y) {
    const uint8_t* cur = px + y * s;
    const uint8_t* prev = y ? cur - s : zero.data();
    uint32_t sum[4];
    switch (bpp) {
      case 1: filter_candidates<1>(cur, prev, s, sub, up, avg, pae, sum); break;
      case 2: filter_candidates<2>(cur, prev, s, sub, up, avg, pae, sum); break;
      case 3: filter_candidates<3>(cur, prev, s, sub, up, avg, pae, sum); break;
      default: filter_candidates<4>(cur, prev, s, sub, up, avg, pae, sum); break;
    }
    int best = 0;
    for (int k = 1; k < 4; ++k)
      if (sum[k] < sum[best]) best = k;
    uint8_t* o = out + (y - y0) * (s + 1);
    o[0] = type[best];
    std::memcpy(o + 1, rows[best], s);
  }
}

// Whole filtered rows per piece: as many as one segment holds (a row longer than that is a piece
// of its own, coded in several segments).
size_t rows_per_piece(size_t w, size_t bpp) { return std::max<size_t>(1, kSegment / (w * bpp + 1)); }

}  // namespace

void png_filter_rows(const uint8_t* px, size_t w, size_t h, size_t bpp, uint8_t* out) {
  filter_rows(px, w, 0, h, bpp, out);
}

size_t png_zlib_bound(size_t w, size_t h, size_t bpp) {
  const size_t row = w * bpp + 1, per = rows_per_piece(w, bpp);
  const size_t segments = per > 1 ? (h + per - 1) / per : h * ((row + kSegment - 1) / kSegment);
  return huffman_zlib_bound(row * h, segments);
}

size_t png_zlib_stream(const uint8_t* px, size_t w, size_t h, size_t bpp, uint8_t* out) {
  const size_t row = w * bpp + 1, per = rows_per_piece(w, bpp);
  thread_local std::vector<uint8_t> piece;
  if (piece.size() < per * row) piece.resize(per * row);
  HuffmanZlibWriter z(out);
  for (size_t y = 0; y < h; y += per) {
    const size_t y1 = std::min(h, y + per);
    filter_rows(px, w, y, y1, bpp, piece.data());
    z.piece(piece.data(), (y1 - y) * row, y1 == h);
  }
  return z.finish();
}

size_t png_zlib_stream_filtered(const uint8_t* rows, size_t w, size_t h, size_t bpp, uint8_t* out) {
  const size_t row = w * bpp + 1, per = rows_per_piece(w, bpp);
  HuffmanZlibWriter z(out);
  for (size_t y = 0; y < h; y += per) {
    const size_t y1 = std::min(h, y + per);
    z.piece(rows + y * row, (y1 - y) * row, y1 == h);
  }
  return z.finish();
}

}  // namespace scenelab
