#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/cuda_check.h"
#include "core/cuda_grid.h"
#include "kernels/hog_cuda.h"
#include "layers/hog_math.h"

namespace scenelab::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t n, int threads = kThreads) { return unsigned((n + size_t(threads) - 1) / size_t(threads)); }

// The gradient (layers/hog_gradient.cpp), one thread a pixel, a CTA a 32 x 8 tile, the batch in
// z: the tile and its one-pixel border (reflected at the image's edges) are read once into
// shared memory as byte values (square-rooted with gamma), so each input value is read and
// converted once, not four times.
constexpr int kGradX = 32, kGradY = 8, kTileChannels = 4;

__global__ void __launch_bounds__(kGradX * kGradY)
hog_gradient_tile_kernel(const float* __restrict__ x, float* __restrict__ y, int c, int h, int w, int bins,
                         bool gamma, bool signed_gradient) {
  __shared__ float tile[kTileChannels][kGradY + 2][kGradX + 2];
  const int x0 = int(blockIdx.x) * kGradX, y0 = int(blockIdx.y) * kGradY;
  const size_t plane = size_t(h) * w, b = blockIdx.z;
  const int tid = int(threadIdx.y) * kGradX + int(threadIdx.x);
  for (int idx = tid; idx < (kGradY + 2) * (kGradX + 2); idx += kGradX * kGradY) {
    const int ly = idx / (kGradX + 2), lx = idx - ly * (kGradX + 2);
    // Positions past the far edge feed no pixel of the image: any valid one will do.
    const int gy = hog::reflect101(min(y0 + ly - 1, h), h), gx = hog::reflect101(min(x0 + lx - 1, w), w);
    const size_t at = size_t(gy) * w + gx;
    for (int k = 0; k < c; ++k) tile[k][ly][lx] = hog::byte_value(__ldg(x + (b * c + size_t(k)) * plane + at), gamma);
  }
  __syncthreads();
  const int tx = int(threadIdx.x), ty = int(threadIdx.y), col = x0 + tx, r = y0 + ty;
  if (col >= w || r >= h) return;
  float best_dx = 0, best_dy = 0, best = -1;
  for (int k = 0; k < c; ++k) {
    const float dx = tile[k][ty + 1][tx + 2] - tile[k][ty + 1][tx];
    const float dy = tile[k][ty + 2][tx + 1] - tile[k][ty][tx + 1];
    const float m = hog::sq_mag(dx, dy);
    if (m >= best) best = m, best_dx = dx, best_dy = dy;
  }
  const hog::Vote v = hog::vote_of(best_dx, best_dy, bins, signed_gradient);
  float* out = y + b * 3 * plane + size_t(r) * w + col;
  out[0] = v.w0;
  out[plane] = v.w1;
  out[2 * plane] = float(v.bin);
}

// One warp a block of cells (kWarpsPerCta blocks of one row a CTA). Each CTA first lists, once,
// every block pixel's nonzero cell weights (Gaussian x bilinear, the same arithmetic as the CPU
// path) and orders the pixels by how many cells they vote into (most first, then in pixel
// order), so that the 32 lanes of a warp step through pixels with the same number of votes: a
// 16x16 block of 2x2 cells takes 18 warp-wide vote steps instead of 32. Each lane then votes its
// pixels into its own column of the warp's histogram (entry e of lane l at e * 32 + l: no bank
// conflicts, no atomics, a fixed order), the 32 columns are summed (lane l reads column
// (t + l) mod 32 at step t: again conflict-free), and L2-Hys runs over the block's entries by
// warp shuffles. Deterministic.
constexpr int kWarpsPerCta = 8;
constexpr int kMaxEntries = 64;       // cells^2 x bins
constexpr int kMaxBlockPixels = 1024;  // (cell x cells)^2
constexpr int kMaxVotes = 4;           // cells a pixel votes into: 2 rows x 2 columns at most

struct CellVote {
  float w;  // the pixel's weight for the cell
  int e;    // the cell's first histogram entry
};

size_t blocks_smem_bytes(int BB, int E) {
  return size_t(BB) * sizeof(int) + size_t(kMaxVotes) * BB * sizeof(CellVote) + size_t(BB / 32 + 1) * sizeof(int) +
         size_t(kWarpsPerCta) * E * 32 * sizeof(float);
}

__global__ void __launch_bounds__(kWarpsPerCta * 32)
hog_blocks_warp_kernel(const float* __restrict__ x, float* __restrict__ y, int h, int w, int bh, int bw,
                       int cell, int cells, int stride, int bins, float sigma, float clip) {
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  const int B = cell * cells, BB = B * B, ncell = cells * cells, E = ncell * bins;
  CellVote* votes = reinterpret_cast<CellVote*>(smem_bytes);       // [kMaxVotes][BB], by slot
  int* order = reinterpret_cast<int*>(votes + kMaxVotes * BB);     // slot -> block pixel
  int* chunk_votes = order + BB;                                    // votes of a chunk's first slot
  float* H = reinterpret_cast<float*>(chunk_votes + BB / 32 + 1);  // [warps][E][32]
  __shared__ int total[kMaxVotes + 1], carry[kMaxVotes + 1], counts[kMaxVotes + 1][kWarpsPerCta];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // The pixel's votes, in cell order.
  auto pixel_votes = [&](int p, CellVote* v) {
    const int i = p / B, j = p - (p / B) * B;
    int n = 0;
    for (int cc = 0; cc < ncell && n < kMaxVotes; ++cc) {
      const int cx = cc / cells, cy = cc % cells;  // OpenCV's order: cells by column, then row
      const float wt =
          hog::block_gauss(i, j, B, B, sigma) * (hog::cell_weight(j, cx, cell) * hog::cell_weight(i, cy, cell));
      if (wt != 0.f) v[n++] = CellVote{wt, cc * bins};
    }
    return n;
  };
  if (threadIdx.x <= kMaxVotes) total[threadIdx.x] = 0, carry[threadIdx.x] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < BB; p += blockDim.x) {
    CellVote v[kMaxVotes];
    atomicAdd(&total[pixel_votes(p, v)], 1);
  }
  __syncthreads();
  for (int r0 = 0; r0 < BB; r0 += blockDim.x) {
    const int p = r0 + int(threadIdx.x);
    CellVote v[kMaxVotes];
    const int n = p < BB ? pixel_votes(p, v) : -1;
    unsigned mine = 0;
    for (int k = 0; k <= kMaxVotes; ++k) {
      const unsigned bal = __ballot_sync(0xffffffffu, n == k);
      if (n == k) mine = bal;
      if (lane == 0) counts[k][warp] = __popc(bal);
    }
    __syncthreads();
    if (n >= 0) {
      int slot = carry[n] + __popc(mine & ((1u << lane) - 1u));
      for (int k = n + 1; k <= kMaxVotes; ++k) slot += total[k];  // more votes first
      for (int q = 0; q < warp; ++q) slot += counts[n][q];
      order[slot] = p;
      for (int k = 0; k < kMaxVotes; ++k) votes[k * BB + slot] = k < n ? v[k] : CellVote{0.f, 0};
      if ((slot & 31) == 0) chunk_votes[slot >> 5] = n;  // the most in its chunk: sorted
    }
    __syncthreads();
    if (threadIdx.x <= kMaxVotes)
      for (int q = 0; q < int(blockDim.x) / 32; ++q) carry[threadIdx.x] += counts[threadIdx.x][q];
    __syncthreads();
  }
  // The CTA's rows of blocks (the grid holds fewer rows than the map, so that the table above
  // serves several).
  const int bx = blockIdx.x * kWarpsPerCta + warp;
  if (bx >= bw) return;
  const size_t b = blockIdx.z, plane = size_t(h) * w;
  float* Hw = H + size_t(warp) * E * 32;
  const float* g0 = x + b * 3 * plane;
  const float* g1 = g0 + plane;
  const float* gb = g1 + plane;
  for (int by = blockIdx.y; by < bh; by += gridDim.y) {
    for (int e = 0; e < E; ++e) Hw[e * 32 + lane] = 0.f;
    const size_t origin = size_t(by) * stride * w + size_t(bx) * stride;
    // kPixelsPerLane pixels a lane at a time, all their loads issued before any vote.
    constexpr int kPixelsPerLane = 8;
    for (int s0 = 0; s0 < BB; s0 += 32 * kPixelsPerLane) {
      float A0[kPixelsPerLane], A1[kPixelsPerLane], Hb[kPixelsPerLane];
#pragma unroll
      for (int u = 0; u < kPixelsPerLane; ++u) {
        const int s = s0 + lane + 32 * u;
        if (s < BB) {
          const int p = order[s], i = p / B, j = p - i * B;
          const size_t o = origin + size_t(i) * w + j;
          A0[u] = __ldg(g0 + o), A1[u] = __ldg(g1 + o), Hb[u] = __ldg(gb + o);
        }
      }
#pragma unroll
      for (int u = 0; u < kPixelsPerLane; ++u) {
        const int s = s0 + lane + 32 * u;
        if (s0 + 32 * u >= BB) break;  // warp-uniform
        const int n = chunk_votes[(s0 >> 5) + u];
        const int h0 = int(Hb[u]), h1 = h0 + 1 < bins ? h0 + 1 : 0;
        if (s < BB)  // the last chunk may be partial
          for (int k = 0; k < n; ++k) {
            const CellVote v = votes[k * BB + s];  // a zero weight where this pixel has fewer votes
            Hw[(v.e + h0) * 32 + lane] += A0[u] * v.w;
            Hw[(v.e + h1) * 32 + lane] += A1[u] * v.w;
          }
      }
    }
    __syncwarp();
    float v[2] = {0.f, 0.f};
    for (int u = 0; u < 2; ++u) {
      const int e = lane + 32 * u;
      if (e >= E) break;
      float s = 0.f;
      for (int t = 0; t < 32; ++t) s += Hw[e * 32 + ((t + lane) & 31)];
      v[u] = s;
    }
    const unsigned full = 0xffffffffu;
    auto warp_sum = [&](float a) {
      for (int d = 16; d >= 1; d >>= 1) a += __shfl_xor_sync(full, a, d);
      return a;
    };
    const float s1 = warp_sum(v[0] * v[0] + v[1] * v[1]);
    const float scale = 1.f / (sqrtf(s1) + float(E) * 0.1f);
    for (int u = 0; u < 2; ++u) {
      const float t = v[u] * scale;
      v[u] = t < clip ? t : clip;
    }
    const float s2 = warp_sum(v[0] * v[0] + v[1] * v[1]);
    const float scale2 = 1.f / (sqrtf(s2) + 1e-3f);
    const size_t oplane = size_t(bh) * bw;
    float* out = y + b * size_t(E) * oplane + size_t(by) * bw + bx;
    for (int u = 0; u < 2; ++u) {
      const int e = lane + 32 * u;
      if (e < E) out[size_t(e) * oplane] = v[u] * scale2;
    }
    __syncwarp();  // the histogram is zeroed for the next row
  }
}

// The general case (more than kMaxEntries entries or kMaxBlockPixels pixels a block): one
// thread a (block, cell), the cell's histogram over the block's pixels, then L2-Hys over the
// block's cells together (a group of `group` lanes, a power of two >= cells^2, by shuffles).
constexpr int kMaxBins = 32;

__global__ void hog_blocks_kernel(const float* __restrict__ x, float* __restrict__ y, int n, int h, int w,
                                  int bh, int bw, int cell, int cells, int stride, int bins, float sigma,
                                  float clip, int group) {
  const size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int lane = int(t % size_t(group));
  const size_t blk = t / size_t(group);
  const int ncell = cells * cells;
  const bool live = blk < size_t(n) * bh * bw && lane < ncell;
  const size_t plane = size_t(h) * w;
  float hist[kMaxBins];
  for (int k = 0; k < kMaxBins; ++k) hist[k] = 0.f;
  size_t b = 0;
  int by = 0, bx = 0;
  if (live) {
    b = blk / (size_t(bh) * bw);
    const size_t rest = blk % (size_t(bh) * bw);
    by = int(rest / size_t(bw)), bx = int(rest % size_t(bw));
    const int cx = lane / cells, cy = lane % cells, B = cell * cells;
    const float* g0 = x + b * 3 * plane;
    const float* g1 = g0 + plane;
    const float* gb = g1 + plane;
    for (int i = 0; i < B; ++i) {
      const float wy = hog::cell_weight(i, cy, cell);
      if (wy == 0.f) continue;
      const size_t o = size_t(by * stride + i) * w + size_t(bx) * stride;
      for (int j = 0; j < B; ++j) {
        const float wx = hog::cell_weight(j, cx, cell);
        if (wx == 0.f) continue;
        const float wgt = hog::block_gauss(i, j, B, B, sigma) * (wx * wy);
        const int h0 = int(gb[o + j]), h1 = h0 + 1 < bins ? h0 + 1 : 0;
        hist[h0] += g0[o + j] * wgt;
        hist[h1] += g1[o + j] * wgt;
      }
    }
  }
  const unsigned mask = 0xffffffffu;
  auto group_sum = [&](float v) {
    for (int d = 1; d < group; d <<= 1) v += __shfl_xor_sync(mask, v, d, group);
    return v;
  };
  float s = 0.f;
  for (int k = 0; k < bins; ++k) s += hist[k] * hist[k];
  s = group_sum(s);
  const float scale = 1.f / (sqrtf(s) + float(ncell * bins) * 0.1f);
  float s2 = 0.f;
  for (int k = 0; k < bins; ++k) {
    const float v = hist[k] * scale;
    hist[k] = v < clip ? v : clip;
    s2 += hist[k] * hist[k];
  }
  s2 = group_sum(s2);
  const float scale2 = 1.f / (sqrtf(s2) + 1e-3f);
  if (!live) return;
  const size_t oplane = size_t(bh) * bw;
  float* out = y + b * size_t(ncell * bins) * oplane + size_t(by) * bw + bx;
  for (int k = 0; k < bins; ++k) out[size_t(lane * bins + k) * oplane] = hist[k] * scale2;
}

// The window scores as a tiled direct convolution: a CTA of kSplit warps computes a tile of 32
// columns x kRows rows of one output map, each warp over a kSplit-th of the input channels (its
// partial sums added in warp order: deterministic). A warp stages one channel's input tile
// ((kRows + kh - 1) x (32 + kw - 1) values) in its own shared memory while the next channel's
// tile is already on its way into registers (so each channel costs no memory latency on the
// warp's path); the weights sit in shared memory (warp-uniform reads: broadcasts).
constexpr int kSplit = 6, kRows = 4, kTilePerLane = 24;  // tile: at most 32 x kTilePerLane values

template <int KW>
__global__ void __launch_bounds__(kSplit * 32)
linear_window_tiled_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                           const float* __restrict__ bias, float* __restrict__ y, int out, int c, int h,
                           int w, int ho, int wo, int kh) {
  extern __shared__ float smem[];
  const int o = blockIdx.z % out, b = blockIdx.z / out;
  const int taps = c * kh * KW;
  const int trows = kRows + kh - 1, tcols = 32 + KW - 1, tsize = trows * tcols;
  float* ws = smem;
  float* part = ws + taps;                  // [kSplit][kRows][32]
  float* tiles = part + kSplit * kRows * 32;  // [kSplit][32 * kTilePerLane]
  for (int k = threadIdx.x; k < taps; k += blockDim.x) ws[k] = weight[size_t(o) * taps + k];
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int c0 = blockIdx.x * 32, r0 = blockIdx.y * kRows;
  float* tile = tiles + warp * 32 * kTilePerLane;
  const size_t plane = size_t(h) * w;
  float pre[kTilePerLane];
  int at[kTilePerLane];  // this lane's tile values: their offset in a channel plane, -1 beyond the input
#pragma unroll
  for (int u = 0; u < kTilePerLane; ++u) {
    const int e = lane + 32 * u, tr = e / tcols, tc = e - tr * tcols;
    const int row = r0 + tr, col = c0 + tc;
    at[u] = e < tsize && row < h && col < w ? row * w + col : -1;
  }
  auto fetch = [&](int k) {  // channel k's tile into registers (zero beyond the input)
    const float* xp = x + (size_t(b) * c + k) * plane;
#pragma unroll
    for (int u = 0; u < kTilePerLane; ++u) pre[u] = at[u] >= 0 ? __ldg(xp + at[u]) : 0.f;
  };
  auto stage = [&] {
#pragma unroll
    for (int u = 0; u < kTilePerLane; ++u) tile[lane + 32 * u] = pre[u];
  };
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
  const int k0 = warp * c / kSplit, k1 = (warp + 1) * c / kSplit;
  const int rows = min(trows, h - r0);
  if (k0 < k1) {
    fetch(k0);
    stage();
    __syncwarp();
  }
  for (int k = k0; k < k1; ++k) {
    if (k + 1 < k1) fetch(k + 1);
    const float* wk = ws + k * kh * KW;
    for (int yy = 0; yy < rows; ++yy) {
      float xv[KW];
#pragma unroll
      for (int j = 0; j < KW; ++j) xv[j] = tile[yy * tcols + lane + j];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int i = yy - r;
        if (i >= 0 && i < kh) {
          const float* wr = wk + i * KW;
#pragma unroll
          for (int j = 0; j < KW; ++j) acc[r] += xv[j] * wr[j];
        }
      }
    }
    __syncwarp();
    if (k + 1 < k1) {
      stage();
      __syncwarp();
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) part[(warp * kRows + r) * 32 + lane] = acc[r];
  __syncthreads();
  const int col = c0 + lane;
  if (warp != 0 || col >= wo) return;
  for (int r = 0; r < kRows && r0 + r < ho; ++r) {
    float s = 0.f;
#pragma unroll
    for (int p = 0; p < kSplit; ++p) s += part[(p * kRows + r) * 32 + lane];
    y[((size_t(b) * out + o) * ho + r0 + r) * wo + col] = s + bias[o];
  }
}

// The same for a kernel of compile-time size KH x KW (the people detector's 15 x 7 blocks): a
// warp holds one channel's KH x KW weights in registers and runs its tile's rows fully unrolled,
// so each output costs shared-memory reads of its inputs only (the weights' reads, the most of
// the general kernel's, are gone).
template <int KH, int KW>
__global__ void __launch_bounds__(kSplit * 32)
linear_window_reg_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                         const float* __restrict__ bias, float* __restrict__ y, int out, int c, int h, int w,
                         int ho, int wo) {
  constexpr int TR = kRows + KH - 1, TC = 32 + KW - 1, PER = (TR * TC + 31) / 32;
  __shared__ float tiles[kSplit][PER * 32];
  __shared__ float part[kSplit][kRows][32];
  const int o = blockIdx.z % out, b = blockIdx.z / out;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int c0 = blockIdx.x * 32, r0 = blockIdx.y * kRows;
  float* tile = tiles[warp];
  const size_t plane = size_t(h) * w;
  float pre[PER];
  auto fetch = [&](int k) {  // channel k's tile into registers (zero beyond the input)
    const float* xp = x + (size_t(b) * c + k) * plane;
#pragma unroll
    for (int u = 0; u < PER; ++u) {
      const int e = lane + 32 * u, tr = e / TC, tc = e - tr * TC;
      const int row = r0 + tr, col = c0 + tc;
      pre[u] = e < TR * TC && row < h && col < w ? __ldg(xp + size_t(row) * w + col) : 0.f;
    }
  };
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
  const int k0 = warp * c / kSplit, k1 = (warp + 1) * c / kSplit;
  if (k0 < k1) fetch(k0);
  for (int k = k0; k < k1; ++k) {
#pragma unroll
    for (int u = 0; u < PER; ++u) tile[lane + 32 * u] = pre[u];
    __syncwarp();
    if (k + 1 < k1) fetch(k + 1);
    float wr[KH][KW];
    const float* wk = weight + (size_t(o) * c + k) * KH * KW;
#pragma unroll
    for (int i = 0; i < KH; ++i)
#pragma unroll
      for (int j = 0; j < KW; ++j) wr[i][j] = __ldg(wk + i * KW + j);
#pragma unroll
    for (int yy = 0; yy < TR; ++yy) {
      float xv[KW];
#pragma unroll
      for (int j = 0; j < KW; ++j) xv[j] = tile[yy * TC + lane + j];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int i = yy - r;
        if (i >= 0 && i < KH) {
#pragma unroll
          for (int j = 0; j < KW; ++j) acc[r] += xv[j] * wr[i][j];
        }
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) part[warp][r][lane] = acc[r];
  __syncthreads();
  const int col = c0 + lane;
  if (warp != 0 || col >= wo) return;
  for (int r = 0; r < kRows && r0 + r < ho; ++r) {
    float sum = 0.f;
#pragma unroll
    for (int p = 0; p < kSplit; ++p) sum += part[p][r][lane];
    y[((size_t(b) * out + o) * ho + r0 + r) * wo + col] = sum + bias[o];
  }
}

// The general case (a kernel wider than 8 or taller than the tile, or weights beyond shared
// memory): one thread an output.
__global__ void linear_window_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                                     const float* __restrict__ bias, float* __restrict__ y, int n, int out,
                                     int c, int h, int w, int ho, int wo, int kh, int kw) {
  const int o = blockIdx.z % out, b = blockIdx.z / out;
  const int taps = c * kh * kw;
  const float* wt = weight + size_t(o) * taps;
  const int col = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (col >= wo) return;
  const size_t plane = size_t(h) * w;
  const float* xb = x + size_t(b) * c * plane;
  float s = 0.f;
  for (int k = 0; k < c; ++k)
    for (int i = 0; i < kh; ++i) {
      const float* row = xb + size_t(k) * plane + size_t(r + i) * w + col;
      const float* wr = wt + (size_t(k) * kh + i) * kw;
      for (int j = 0; j < kw; ++j) s += row[j] * wr[j];
    }
  y[((size_t(b) * out + o) * ho + r) * wo + col] = s + bias[o];
}


}  // namespace

void hog_gradient(const TensorView& x, const TensorView& y, int bins, bool gamma, bool signed_gradient,
                  cudaStream_t s) {
  if (!x.shape.numel()) return;
  SL_REQUIRE(x.shape.n <= 65535 && x.shape.h <= 65535 * 8, "hog_gradient on the GPU: input ", x.shape.str(),
             " too large for the grid");
  SL_REQUIRE(x.shape.c <= kTileChannels, "hog_gradient on the GPU: at most ", kTileChannels, " channels, got ",
             x.shape.c);
  const dim3 block(kGradX, kGradY);
  hog_gradient_tile_kernel<<<grid2d(x.shape.w, x.shape.h, x.shape.n, block), block, 0, s>>>(
      x.f32(), y.f32(), x.shape.c, x.shape.h, x.shape.w, bins, gamma, signed_gradient);
  SL_CUDA_CHECK(cudaGetLastError(), "hog_gradient kernel");
}

void hog_blocks(const TensorView& x, const TensorView& y, int cell, int cells, int stride, int bins, float sigma,
                float clip, cudaStream_t s) {
  if (!y.shape.numel()) return;
  const int B = cell * cells, ncell = cells * cells;
  if (ncell * bins <= kMaxEntries && B * B <= kMaxBlockPixels && y.shape.h <= 65535 && y.shape.n <= 65535) {
    const size_t smem = blocks_smem_bytes(B * B, ncell * bins);
    if (smem > 48 * 1024)  // beyond the default: asked for
      allow_dynamic_smem(reinterpret_cast<const void*>(hog_blocks_warp_kernel), smem, "hog_blocks: shared memory");
    // About kBlocksCtas CTAs (or one a row of blocks, where fewer): each builds its pixel table once.
    constexpr int kBlocksCtas = 2048;
    const int gx = (y.shape.w + kWarpsPerCta - 1) / kWarpsPerCta;
    const int gy = std::min(y.shape.h, std::max(1, kBlocksCtas / gx));
    const dim3 grid(unsigned(gx), unsigned(gy), unsigned(y.shape.n));
    hog_blocks_warp_kernel<<<grid, kWarpsPerCta * 32, smem, s>>>(x.f32(), y.f32(), x.shape.h, x.shape.w,
                                                                 y.shape.h, y.shape.w, cell, cells, stride,
                                                                 bins, sigma, clip);
    SL_CUDA_CHECK(cudaGetLastError(), "hog_blocks kernel");
    return;
  }
  SL_REQUIRE(bins <= kMaxBins, "hog_blocks on the GPU: at most ", kMaxBins, " bins, got ", bins);
  int group = 1;
  while (group < ncell) group <<= 1;
  SL_REQUIRE(group <= 32, "hog_blocks on the GPU: at most 32 cells a block");
  const size_t total = size_t(y.shape.n) * y.shape.plane() * size_t(group);
  hog_blocks_kernel<<<blocks_for(total), kThreads, 0, s>>>(x.f32(), y.f32(), x.shape.n, x.shape.h, x.shape.w,
                                                           y.shape.h, y.shape.w, cell, cells, stride, bins,
                                                           sigma, clip, group);
  SL_CUDA_CHECK(cudaGetLastError(), "hog_blocks kernel");
}

namespace {

template <int KW>
void launch_tiled(const TensorView& x, const float* weight, const float* bias, const TensorView& y, int kh,
                  size_t smem, cudaStream_t s) {
  if (smem > 48 * 1024)
    allow_dynamic_smem(reinterpret_cast<const void*>(linear_window_tiled_kernel<KW>), smem,
                       "linear_window: shared memory");
  const dim3 grid(unsigned((y.shape.w + 31) / 32), unsigned((y.shape.h + kRows - 1) / kRows),
                  unsigned(y.shape.n * y.shape.c));
  linear_window_tiled_kernel<KW><<<grid, kSplit * 32, smem, s>>>(x.f32(), weight, bias, y.f32(), y.shape.c,
                                                                 x.shape.c, x.shape.h, x.shape.w, y.shape.h,
                                                                 y.shape.w, kh);
}

}  // namespace

void linear_window(const TensorView& x, const float* weight, const float* bias, const TensorView& y, int kh,
                   int kw, cudaStream_t s) {
  if (!y.shape.numel()) return;
  SL_REQUIRE(y.shape.h <= 65535 && size_t(y.shape.n) * y.shape.c <= 65535,
             "linear_window on the GPU: output of ", y.shape.str(), " too large for the grid");
  const size_t smem =
      (size_t(x.shape.c) * kh * kw + size_t(kSplit) * kRows * 32 + size_t(kSplit) * 32 * kTilePerLane) * sizeof(float);
  if (kh == 15 && kw == 7) {  // the people detector's window of 15 x 7 blocks
    const dim3 grid(unsigned((y.shape.w + 31) / 32), unsigned((y.shape.h + kRows - 1) / kRows),
                    unsigned(y.shape.n * y.shape.c));
    linear_window_reg_kernel<15, 7><<<grid, kSplit * 32, 0, s>>>(x.f32(), weight, bias, y.f32(), y.shape.c,
                                                                x.shape.c, x.shape.h, x.shape.w, y.shape.h,
                                                                y.shape.w);
  } else if (kw <= 8 && (kRows + kh - 1) * (32 + kw - 1) <= 32 * kTilePerLane && smem <= 96 * 1024) {
    switch (kw) {
      case 1: launch_tiled<1>(x, weight, bias, y, kh, smem, s); break;
      case 2: launch_tiled<2>(x, weight, bias, y, kh, smem, s); break;
      case 3: launch_tiled<3>(x, weight, bias, y, kh, smem, s); break;
      case 4: launch_tiled<4>(x, weight, bias, y, kh, smem, s); break;
      case 5: launch_tiled<5>(x, weight, bias, y, kh, smem, s); break;
      case 6: launch_tiled<6>(x, weight, bias, y, kh, smem, s); break;
      case 7: launch_tiled<7>(x, weight, bias, y, kh, smem, s); break;
      default: launch_tiled<8>(x, weight, bias, y, kh, smem, s); break;
    }
  } else {
    const int threads = 128;
    const dim3 grid(unsigned((y.shape.w + threads - 1) / threads), unsigned(y.shape.h),
                    unsigned(y.shape.n * y.shape.c));
    linear_window_kernel<<<grid, threads, 0, s>>>(x.f32(), weight, bias, y.f32(), y.shape.n, y.shape.c, x.shape.c,
                                                  x.shape.h, x.shape.w, y.shape.h, y.shape.w, kh, kw);
  }
  SL_CUDA_CHECK(cudaGetLastError(), "linear_window kernel");
}

}  // namespace scenelab::cuda
