// GPU NMS kernels. Papers: the bitmask kernel of Faster R-CNN's nms (masks per 64-box block),
// Oro et al., "Work-efficient parallel non-maximum suppression" (ICASSP 2016; map/reduce with
// __syncthreads_and), Zheng et al. 2020 (Cluster-NMS). Built with --fmad=false so overlap values
// are bit-identical to nms_cpu.cpp (compiled with -ffp-contract=off): exact greedy must match the
// CPU reference index for index, even at the threshold.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>

#include "nms/nms_cuda.h"
#include "nms/nms_dev.cuh"

namespace scenelab::nms {
namespace {

constexpr int kBlock = 64;  // boxes per mask word
inline int div_up(int a, int b) { return (a + b - 1) / b; }
__device__ __forceinline__ int div_up_dev(int a, int b) { return (a + b - 1) / b; }

// Sorted entry r is input i: its box, group and area (the same float operations as nms::area).
// An invalid entry's inputs are not read - a caller may leave them unwritten, as the window head
// does past its hits (initcheck's reports, 2026-11-26) - and zeros stand in; nothing ranked at or
// below the last valid box is ever read.
__device__ __forceinline__ void put_sorted(const float4* boxes, const int* groups, int i, int r, bool valid,
                                           DevOptions o, float4* sorted_boxes, int* sorted_groups,
                                           float* sorted_area) {
  const float4 b = valid ? boxes[i] : make_float4(0.f, 0.f, 0.f, 0.f);
  sorted_boxes[r] = b;
  sorted_groups[r] = valid && groups ? groups[i] : 0;
  sorted_area[r] = fmaxf(0.f, b.z - b.x + o.e) * fmaxf(0.f, b.w - b.y + o.e);
}

// Sorted boxes, groups and areas; the number of valid boxes is where the sorted keys drop to 0.
__global__ void gather_kernel(const float4* boxes, const int* groups, const int* order,
                              const unsigned* sorted_keys, int n, DevOptions o,
                              float4* sorted_boxes, int* sorted_groups, float* sorted_area,
                              int* num_valid) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  put_sorted(boxes, groups, order[r], r, sorted_keys[r] != 0u, o, sorted_boxes, sorted_groups, sorted_area);
  if (sorted_keys[r] != 0u && (r == n - 1 || sorted_keys[r + 1] == 0u)) *num_valid = r + 1;
}

// mask[i * col_blocks + c] bit b: sorted box i (ranked above) suppresses box c*64 + b.
// A CTA of 64 threads covers two row blocks (each thread the boxes t and 64 + t of them, so a
// column box read from shared memory serves two pairs) against one column block; the grid holds
// only the CTAs on or above the diagonal (a linear index mapped onto the upper triangle), so no
// CTA is launched to return at once. The kernel is compute-bound (about 15 instructions per
// pair); most pairs take no branch. Only intersecting pairs reach the division; the operations
// are those of nms::overlap.

// Upper-triangle CTA index -> (row group g, column block): group g (row blocks 2g, 2g + 1) has
// the column blocks 2g .. col_blocks - 1; C(g) = g * (col_blocks - g + 1) CTAs come before it.
__host__ __device__ inline long long mask_ctas_before(long long g, long long cb) {
  return g * (cb - g + 1);
}

template <bool kGroups>
__global__ void __launch_bounds__(kBlock)
mask_kernel(const float4* boxes, const int* groups, const float* areas, const int* num_valid,
            DevOptions o, int col_blocks, unsigned long long* mask) {
  const long long L = blockIdx.x, cb = col_blocks;
  long long g = (long long)(((cb + 1) - sqrt(double(cb + 1) * double(cb + 1) - 4.0 * double(L))) / 2);
  g = max(0ll, g);
  while (g > 0 && mask_ctas_before(g, cb) > L) --g;
  while (mask_ctas_before(g + 1, cb) <= L) ++g;
  const int cbk = int(2 * g + (L - mask_ctas_before(g, cb)));
  const int rb1 = int(2 * g), rb2 = rb1 + 1;
  const int nv = *num_valid;
  const int col_begin = cbk * kBlock;
  const int size = min(nv - col_begin, kBlock);
  if (size <= 0 || rb1 * kBlock >= nv) return;
  __shared__ float4 cbox[kBlock];
  __shared__ int cgrp[kGroups ? kBlock : 1];
  __shared__ float carea[kBlock];
  const int t = threadIdx.x;
  if (t < size) {
    cbox[t] = boxes[col_begin + t];
    if (kGroups) cgrp[t] = groups[col_begin + t];
    carea[t] = areas[col_begin + t];
  }
  __syncthreads();
  const int i1 = rb1 * kBlock + t, i2 = rb2 * kBlock + t;
  // First candidate column of each row (columns ranked below it); kBlock: none.
  const int from1 = i1 >= nv ? kBlock : cbk == rb1 ? t + 1 : 0;
  const int from2 = i2 >= nv || cbk < rb2 ? kBlock : cbk == rb2 ? t + 1 : 0;
  const float4 b1 = from1 < kBlock ? boxes[i1] : make_float4(0.f, 0.f, 0.f, 0.f);
  const float4 b2 = from2 < kBlock ? boxes[i2] : make_float4(0.f, 0.f, 0.f, 0.f);
  const float a1 = from1 < kBlock ? areas[i1] : 0.f, a2 = from2 < kBlock ? areas[i2] : 0.f;
  const int g1 = kGroups && from1 < kBlock ? groups[i1] : 0;
  const int g2 = kGroups && from2 < kBlock ? groups[i2] : 0;
  // nms::overlap is 0 for non-intersecting pairs, so those suppress only when threshold < 0.
  const bool zero_suppresses = 0.f > o.threshold;
  auto suppresses = [&](const float4& bi, float ai, int gi, const float4& c, int b) {
    const float iw = fminf(c.z, bi.z) - fmaxf(c.x, bi.x) + o.e;
    const float ih = fminf(c.w, bi.w) - fmaxf(c.y, bi.y) + o.e;
    const bool same = !kGroups || cgrp[b] == gi;
    bool sup = zero_suppresses && same;
    if (iw > 0.f && ih > 0.f && same) {  // rare: the operations of nms::overlap
      const float aa = carea[b];
      float ov = 0.f;
      if (aa > 0.f && ai > 0.f) {
        const float inter = iw * ih;
        const float den = o.iou ? aa + ai - inter : aa;
        ov = den > 0.f ? inter / den : 0.f;
      }
      sup = ov > o.threshold;
    }
    return sup;
  };
  unsigned long long m1 = 0, m2 = 0;
#pragma unroll 4
  for (int b = min(from1, from2); b < size; ++b) {
    const float4 c = cbox[b];  // the candidate, ranked below both rows where counted
    if (b >= from1 && suppresses(b1, a1, g1, c, b)) m1 |= 1ull << b;
    if (b >= from2 && suppresses(b2, a2, g2, c, b)) m2 |= 1ull << b;
  }
  if (i1 < nv) mask[size_t(i1) * col_blocks + cbk] = m1;  // cbk >= rb1 always
  if (i2 < nv && cbk >= rb2) mask[size_t(i2) * col_blocks + cbk] = m2;
}

void launch_mask(const float4* boxes, const int* groups, const float* areas, const int* num_valid,
                 const DevOptions& d, int cb, unsigned long long* mask, cudaStream_t s) {
  const long long ctas = mask_ctas_before((cb + 1) / 2, cb);
  auto* kernel = groups ? mask_kernel<true> : mask_kernel<false>;
  kernel<<<unsigned(ctas), kBlock, 0, s>>>(boxes, groups, areas, num_valid, d, cb, mask);
  SL_CUDA_CHECK(cudaGetLastError(), "GpuNms mask_kernel");
}

// Rank by counting, for up to kSmallRank boxes (all keys in shared memory): the rank of box i is
// the number of boxes ahead of it in the stable descending order (larger key, or equal key and
// smaller index) -- the order of the radix sort, without its several kernels and host-side
// dispatch. A CTA ranks 64 boxes, each counted by kRankParts threads over a part of the keys
// (j < i: equal keys count, j > i: they do not); the box is then written to its sorted position
// (box, group, area, input index), and the number of valid boxes (key != 0) raised to its
// rank + 1. O(n^2) compares spread over the whole GPU.
constexpr int kSmallRank = 12288;  // 48 KB of keys
constexpr int kRankParts = 16;

__global__ void __launch_bounds__(kBlock * kRankParts)
rank_count_kernel(const float4* boxes, const float* scores, const int* groups, int n, DevOptions o,
                  int* sorted_idx, float4* sorted_boxes, int* sorted_groups, float* sorted_area,
                  int* num_valid) {
  extern __shared__ unsigned keys[];
  __shared__ int partial[kRankParts][kBlock];
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float s = scores[j];
    const bool valid = !isnan(s) && s >= o.score_threshold;
    unsigned u = __float_as_uint(s + 0.f);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    keys[j] = valid ? u : 0u;
  }
  __syncthreads();
  const int li = threadIdx.x % kBlock, part = threadIdx.x / kBlock;
  const int i = blockIdx.x * kBlock + li;
  int c = 0;
  if (i < n) {
    const unsigned ki = keys[i];
    const int per = div_up_dev(n, kRankParts);
    const int a = part * per, b = min(n, a + per);
    const int mid = max(a, min(b, i));
#pragma unroll 8
    for (int j = a; j < mid; ++j) c += keys[j] >= ki;
#pragma unroll 8
    for (int j = max(mid, i + 1); j < b; ++j) c += keys[j] > ki;
  }
  partial[part][li] = c;
  __syncthreads();
  if (part != 0 || i >= n) return;
  int r = 0;
#pragma unroll
  for (int p = 0; p < kRankParts; ++p) r += partial[p][li];
  sorted_idx[r] = i;
  put_sorted(boxes, groups, i, r, keys[i] != 0u, o, sorted_boxes, sorted_groups, sorted_area);
  if (keys[i] != 0u) atomicMax(num_valid, r + 1);
}

// Exact greedy over the mask, one block, in tiles of kTile words (kTile * 64 boxes):
//  1. the tile's upper-triangular mask words go to shared memory (one parallel load);
//  2. warp 0 resolves the tile's boxes in rank order: the removed bits of the tile's words sit
//     in its lanes' registers, kept boxes' rows are ORed into the later words of the tile (no
//     global memory access on this serial path);
//  3. all threads OR the rows of the tile's kept boxes into the removed bits of later words.
// One round of global-memory latency per tile instead of per word or per kept box.
constexpr int kTile = 16;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kScanThreads = 1024;
static_assert(kTile * kBlock * kTile % kScanThreads == 0, "scan tile must split evenly");

__global__ void __launch_bounds__(kScanThreads)
scan_kernel(const unsigned long long* mask, const int* order, const int* num_valid,
            int col_blocks, int max_outputs, int* keep_out, int* count_out) {
  extern __shared__ unsigned long long smem[];
  unsigned long long* S = smem;                          // [kTile * 64][kTile]
  unsigned long long* removed = smem + kTile * kBlock * kTile;  // [words]
  __shared__ int tile_rows[kTile * kBlock];  // sorted indices of the tile's kept boxes
  __shared__ int count, done, tile_kept, tile_base;
  const int nv = *num_valid;
  const int words = (nv + kBlock - 1) / kBlock;
  for (int w = threadIdx.x; w < words; w += blockDim.x) removed[w] = 0;
  if (threadIdx.x == 0) count = 0, done = 0;
  __syncthreads();
  for (int t0 = 0; t0 < words && !done; t0 += kTile) {
    const int tw = min(kTile, words - t0);
    {
      // All of a thread's loads are issued before any is stored: one round of latency.
      constexpr int kPer = kTile * kBlock * kTile / kScanThreads;
      unsigned long long vals[kPer];
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const int e = threadIdx.x + u * kScanThreads;
        const int ra = e / kTile, b = e % kTile;
        const int r = t0 * kBlock + ra;
        vals[u] = (b < tw && b >= ra / kBlock && r < nv) ? mask[size_t(r) * col_blocks + t0 + b] : 0ull;
      }
#pragma unroll
      for (int u = 0; u < kPer; ++u) S[threadIdx.x + u * kScanThreads] = vals[u];
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x;
      unsigned long long cur = lane < tw ? removed[t0 + lane] : 0ull;
      int cnt = count, nk = 0;
      bool stop = false;
      for (int a = 0; a < tw && !stop; ++a) {
        const unsigned long long ca = __shfl_sync(kFull, cur, a);
        const int rows = min(nv - (t0 + a) * kBlock, kBlock);
        const unsigned long long valid = rows >= kBlock ? ~0ull : ((1ull << rows) - 1);
        const unsigned long long* Sa = S + size_t(a) * kBlock * kTile;
        // The 64 boxes of word a, resolved by the warp at once: lane l holds the in-block mask
        // words of boxes l and l + 32, and the kept set is iterated to its fixed point,
        // kept = cand & ~OR{D[b] : b in kept} (Cluster-NMS within the block). D is strictly
        // upper triangular (a box only suppresses lower-ranked ones), so the fixed point is
        // unique and equals the greedy result; it takes a few iterations of two warp-wide ORs
        // instead of a chain of dependent shared-memory loads per kept box.
        const unsigned long long d0 = Sa[lane * kTile + a], d1 = Sa[(lane + 32) * kTile + a];
        const unsigned long long cand = valid & ~ca;
        unsigned long long kept = cand;
        while (true) {
          const unsigned long long c = (((kept >> lane) & 1ull) ? d0 : 0ull) |
                                       (((kept >> (lane + 32)) & 1ull) ? d1 : 0ull);
          const unsigned lo = __reduce_or_sync(kFull, unsigned(c));
          const unsigned hi = __reduce_or_sync(kFull, unsigned(c >> 32));
          const unsigned long long next = cand & ~((static_cast<unsigned long long>(hi) << 32) | lo);
          if (next == kept) break;
          kept = next;
        }
        if (max_outputs >= 0 && cnt + __popcll(kept) > max_outputs) {  // top-k: the first ones
          const int room = max(0, max_outputs - cnt);
          while (__popcll(kept) > room) kept &= ~(1ull << (63 - __clzll(kept)));
          stop = true;
        }
        // Kept rows in rank order: lane l places boxes l and l + 32 (keep_out is written below).
        const unsigned long long below = (1ull << lane) - 1;
        if ((kept >> lane) & 1ull) tile_rows[nk + __popcll(kept & below)] = (t0 + a) * kBlock + lane;
        if ((kept >> (lane + 32)) & 1ull)
          tile_rows[nk + __popcll(kept & ((below << 32) | 0xffffffffull))] = (t0 + a) * kBlock + lane + 32;
        const int kc = __popcll(kept);
        cnt += kc;
        nk += kc;
        if (lane > a && lane < tw) {
          unsigned long long kb = kept;
          while (kb) {
            const int b = __ffsll(kb) - 1;
            kb &= kb - 1;
            cur |= Sa[b * kTile + lane];
          }
        }
      }
      if (lane == 0) tile_base = count, count = cnt, done = stop, tile_kept = nk;
    }
    __syncthreads();
    // The tile's kept boxes, by input index, in rank order (off the serial path).
    for (int k = threadIdx.x; k < tile_kept; k += blockDim.x) keep_out[tile_base + k] = order[tile_rows[k]];
    // Each thread owns later words and ORs in every kept row of the tile: independent loads,
    // coalesced across threads, unrolled for memory-level parallelism.
    // When fewer later words than threads remain, groups of threads split the kept rows of a word
    // and merge with a shared atomicOr.
    const int nk = tile_kept;
    const int later = words - t0 - tw;
    if (later > 0 && nk > 0) {
      const int groups = max(1, min(nk, int(blockDim.x) / later));
      const int g = threadIdx.x / max(later, 1);
      if (g < groups) {
        for (int v = t0 + tw + threadIdx.x % later; v < words; v += (groups == 1 ? blockDim.x : later)) {
          // Batches of 8 independent loads (one round of latency each), not one load a step.
          unsigned long long acc = 0;
          for (int k = g; k < nk; k += 8 * groups) {
            unsigned long long m[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
              const int kk = k + u * groups;
              m[u] = kk < nk ? mask[size_t(tile_rows[kk]) * col_blocks + v] : 0ull;
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) acc |= m[u];
          }
          if (groups == 1)
            removed[v] |= acc;
          else if (acc)
            atomicOr(&removed[v], acc);
          if (groups > 1) break;  // a thread of a group owns one word
        }
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *count_out = count;
}

size_t scan_smem_bytes(int words) {
  return (size_t(kTile) * kBlock * kTile + size_t(words)) * sizeof(unsigned long long);
}

// Oro map kernel: B[i * dmax + j] = 0 when j outranks i and overlaps it beyond the threshold
// (i is not a representative), and B[i][i] = 0 for invalid i; 1 elsewhere.
__global__ void oro_map_kernel(const float4* boxes, const float* scores, const int* groups, int n,
                               int dmax, DevOptions o, uint8_t* B) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= dmax || j >= dmax) return;
  uint8_t v = 1;
  if (i < n && j < n) {
    const float si = scores[i], sj = scores[j];
    const bool vi = !isnan(si) && si >= o.score_threshold;
    const bool vj = !isnan(sj) && sj >= o.score_threshold;
    if (i == j) {
      v = vi;
    } else if (vi && vj && (sj > si || (sj == si && j < i)) &&
               (!groups || groups[i] == groups[j]) &&
               overlap_dev(boxes[i], boxes[j], o) > o.threshold) {
      v = 0;
    }
  } else if (i < n && j >= n) {
    v = 1;
  }
  B[size_t(i) * dmax + j] = v;
}

// Oro reduce kernel (Algorithm 2): one block per row, blockDim = ceil(dmax / k) threads, each
// ANDing k entries strided by blockDim with __syncthreads_and.
__global__ void oro_reduce_kernel(const uint8_t* B, int dmax, int k, int n, uint8_t* V) {
  const int i = blockIdx.x;
  const int stride = blockDim.x;
  int j = threadIdx.x;
  const uint8_t* row = B + size_t(i) * dmax;
  int v = __syncthreads_and(j < dmax ? row[j] : 1);
  for (int p = 1; p < k; ++p) {
    j += stride;
    v = __syncthreads_and(v && (j < dmax ? row[j] : 1));
  }
  if (threadIdx.x == 0 && i < n) V[i] = uint8_t(v);
}

__global__ void alive_init_kernel(const int* num_valid, int words, unsigned long long* alive) {
  const int w = blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= words) return;
  const int nv = *num_valid;
  const int rows = nv - w * kBlock;
  alive[w] = rows >= kBlock ? ~0ull : rows > 0 ? ((1ull << rows) - 1) : 0ull;
}

// One Cluster-NMS step for column word c: dead = OR of mask[q][c] over alive q above.
__global__ void cluster_step_kernel(const unsigned long long* mask, const int* num_valid,
                                    int col_blocks, const unsigned long long* alive,
                                    unsigned long long* next, int* changed) {
  const int c = blockIdx.x;
  const int nv = *num_valid;
  if (c * kBlock >= nv) {  // no valid box in this word: the mask kernel wrote none of its column
    if (threadIdx.x == 0) next[c] = 0;
    return;
  }
  const int rows_above = min(nv, (c + 1) * kBlock);
  unsigned long long acc = 0;
  for (int q = threadIdx.x; q < rows_above; q += blockDim.x)
    if ((alive[q / kBlock] >> (q % kBlock)) & 1ull) acc |= mask[size_t(q) * col_blocks + c];
  __shared__ unsigned long long red[256];
  red[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] |= red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const int rows = nv - c * kBlock;
    const unsigned long long valid = rows >= kBlock ? ~0ull : rows > 0 ? ((1ull << rows) - 1) : 0ull;
    const unsigned long long nw = valid & ~red[0];
    next[c] = nw;
    if (nw != alive[c]) *changed = 1;
  }
}

__global__ void alive_to_keep_kernel(const unsigned long long* alive, const int* order,
                                     const int* num_valid, int max_outputs, int* keep_out,
                                     int* count_out) {
  // Tiny and serial: runs once after convergence.
  const int nv = *num_valid;
  const int words = (nv + kBlock - 1) / kBlock;
  if (threadIdx.x == 0) {
    int c = 0;
    for (int w = 0; w < words; ++w) {
      unsigned long long a = alive[w];
      while (a) {
        const int b = __ffsll(a) - 1;
        a &= a - 1;
        if (max_outputs >= 0 && c >= max_outputs) break;
        keep_out[c++] = order[w * kBlock + b];
      }
    }
    *count_out = c;
  }
}

}  // namespace

void GpuNms::reserve(int n) {
  n = std::max(n, 1);
  if (n <= capacity_) return;
  const size_t N = size_t(n);
  const int cb = div_up(n, kBlock);
  idx_in_.resize(N * sizeof(int), "GpuNms idx");
  idx_sorted_.resize(N * sizeof(int), "GpuNms order");
  keys_in_.resize(N * sizeof(unsigned), "GpuNms keys");
  keys_sorted_.resize(N * sizeof(unsigned), "GpuNms sorted keys");
  num_valid_.resize(sizeof(int), "GpuNms count");
  sorted_boxes_.resize(N * sizeof(float4), "GpuNms boxes");
  sorted_groups_.resize(N * sizeof(int), "GpuNms groups");
  sorted_area_.resize(N * sizeof(float), "GpuNms areas");
  mask_.resize(N * size_t(cb) * sizeof(unsigned long long), "GpuNms mask");
  alive_.resize(size_t(cb) * sizeof(unsigned long long), "GpuNms alive");
  dead_.resize(size_t(cb) * sizeof(unsigned long long), "GpuNms alive2");
  changed_.resize(sizeof(int), "GpuNms changed");
  size_t bytes = 0;
  SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
                    nullptr, bytes, (unsigned*)nullptr, (unsigned*)nullptr, (int*)nullptr,
                    (int*)nullptr, n),
                "GpuNms: sort workspace size");
  cub_temp_.resize(bytes, "GpuNms sort workspace");
  cub_temp_bytes_ = bytes;
  // The scan keeps a tile of the mask and one removed bit per box in shared memory.
  const size_t smem = scan_smem_bytes(cb);
  int max_smem = 0, device = 0;
  SL_CUDA_CHECK(cudaGetDevice(&device), "GpuNms: device");
  SL_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                "GpuNms: shared memory limit");
  SL_REQUIRE(smem + 1024 <= size_t(max_smem), "GpuNms: capacity ", n,
             " exceeds the on-chip scan limit of this GPU (about ",
             (size_t(max_smem) - 1024 - scan_smem_bytes(0)) / 8 * kBlock, " boxes)");
  allow_dynamic_smem(reinterpret_cast<const void*>(scan_kernel), smem, "GpuNms: scan shared memory");
  allow_dynamic_smem(reinterpret_cast<const void*>(rank_count_kernel), kSmallRank * sizeof(unsigned),
                     "GpuNms: rank shared memory");
  capacity_ = n;
}

void GpuNms::reserve_oro(int dmax) {
  if (dmax <= oro_capacity_) return;
  oro_matrix_.resize(size_t(dmax) * size_t(dmax), "GpuNms Oro matrix");
  oro_capacity_ = dmax;
}

int GpuNms::rank(const DeviceBoxes& in, const Options& o, cudaStream_t s) {
  SL_REQUIRE(in.n <= capacity_, "GpuNms: ", in.n, " boxes exceed the reserved capacity ",
             capacity_, " (call reserve())");
  const DevOptions d = dev_options(o);
  const int n = in.n;
  SL_CUDA_CHECK(cudaMemsetAsync(num_valid_.get(), 0, sizeof(int), s), "GpuNms rank");
  if (n == 0) return 0;
  const int cb = div_up(n, kBlock);
  if (n <= kSmallRank) {
    rank_count_kernel<<<div_up(n, kBlock), kBlock * kRankParts, size_t(n) * sizeof(unsigned), s>>>(
        in.boxes, in.scores, in.groups, n, d, idx_sorted_.get<int>(), sorted_boxes_.get<float4>(),
        sorted_groups_.get<int>(), sorted_area_.get<float>(), num_valid_.get<int>());
    SL_CUDA_CHECK(cudaGetLastError(), "GpuNms rank_count_kernel");
  } else {
    make_keys_kernel<<<div_up(n, 256), 256, 0, s>>>(in.scores, n, d, keys_in_.get<unsigned>(),
                                                    idx_in_.get<int>());
    SL_CUDA_CHECK(cudaGetLastError(), "GpuNms make_keys_kernel");
    size_t bytes = cub_temp_bytes_;
    SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
                      cub_temp_.get(), bytes, keys_in_.get<unsigned>(), keys_sorted_.get<unsigned>(),
                      idx_in_.get<int>(), idx_sorted_.get<int>(), n, 0, 32, s),
                  "GpuNms sort");
    gather_kernel<<<div_up(n, 256), 256, 0, s>>>(
        in.boxes, in.groups, idx_sorted_.get<int>(), keys_sorted_.get<unsigned>(), n, d,
        sorted_boxes_.get<float4>(), sorted_groups_.get<int>(), sorted_area_.get<float>(),
        num_valid_.get<int>());
    SL_CUDA_CHECK(cudaGetLastError(), "GpuNms gather_kernel");
  }
  const int* groups = in.groups ? sorted_groups_.get<int>() : nullptr;
  launch_mask(sorted_boxes_.get<float4>(), groups, sorted_area_.get<float>(),
                   num_valid_.get<int>(), d, cb, mask_.get<unsigned long long>(), s);
  return n;
}

void GpuNms::greedy(const DeviceBoxes& in, const Options& o, int* keep_out, int* count_out,
                    cudaStream_t s) {
  const int n = rank(in, o, s);
  if (n == 0) {
    SL_CUDA_CHECK(cudaMemsetAsync(count_out, 0, sizeof(int), s), "GpuNms greedy");
    return;
  }
  const int cb = div_up(n, kBlock);
  scan_kernel<<<1, kScanThreads, scan_smem_bytes(cb), s>>>(
      mask_.get<unsigned long long>(), idx_sorted_.get<int>(), num_valid_.get<int>(), cb,
      o.max_outputs, keep_out, count_out);
  SL_CUDA_CHECK(cudaGetLastError(), "GpuNms scan_kernel");
}

void GpuNms::oro(const DeviceBoxes& in, const Options& o, int k, uint8_t* keep_flags,
                 cudaStream_t s) {
  SL_REQUIRE(k >= 1, "Oro NMS: k must be >= 1, got ", k);
  SL_REQUIRE(in.n <= oro_capacity_, "Oro NMS: ", in.n, " boxes exceed Dmax = ", oro_capacity_,
             " (call reserve_oro())");
  const int dmax = oro_capacity_;
  const int threads = div_up(dmax, k);
  SL_REQUIRE(threads <= 1024, "Oro NMS: Dmax / k = ", threads,
             " threads per block exceeds 1024; use k >= ", div_up(dmax, 1024));
  if (in.n == 0) return;
  dim3 blk(32, 8), grid(div_up(dmax, 32), div_up(dmax, 8));
  oro_map_kernel<<<grid, blk, 0, s>>>(in.boxes, in.scores, in.groups, in.n, dmax, dev_options(o),
                                      oro_matrix_.get<uint8_t>());
  SL_CUDA_CHECK(cudaGetLastError(), "Oro map kernel");
  oro_reduce_kernel<<<in.n, threads, 0, s>>>(oro_matrix_.get<uint8_t>(), dmax, k, in.n, keep_flags);
  SL_CUDA_CHECK(cudaGetLastError(), "Oro reduce kernel");
}

int GpuNms::cluster(const DeviceBoxes& in, const Options& o, int* keep_out, int* count_out,
                    cudaStream_t s) {
  const int n = rank(in, o, s);
  if (n == 0) {
    SL_CUDA_CHECK(cudaMemsetAsync(count_out, 0, sizeof(int), s), "GpuNms cluster");
    return 0;
  }
  const int cb = div_up(n, kBlock);
  auto* a = alive_.get<unsigned long long>();
  auto* b = dead_.get<unsigned long long>();
  alive_init_kernel<<<div_up(cb, 256), 256, 0, s>>>(num_valid_.get<int>(), cb, a);
  int iterations = 0;
  while (true) {
    ++iterations;
    SL_CUDA_CHECK(cudaMemsetAsync(changed_.get(), 0, sizeof(int), s), "Cluster-NMS");
    cluster_step_kernel<<<cb, 256, 0, s>>>(mask_.get<unsigned long long>(), num_valid_.get<int>(),
                                           cb, a, b, changed_.get<int>());
    SL_CUDA_CHECK(cudaGetLastError(), "Cluster-NMS step kernel");
    int changed = 0;
    SL_CUDA_CHECK(cudaMemcpyAsync(&changed, changed_.get(), sizeof(int), cudaMemcpyDeviceToHost, s),
                  "Cluster-NMS convergence flag");
    SL_CUDA_CHECK(cudaStreamSynchronize(s), "Cluster-NMS convergence flag");
    std::swap(a, b);
    if (!changed) break;
  }
  alive_to_keep_kernel<<<1, 32, 0, s>>>(a, idx_sorted_.get<int>(), num_valid_.get<int>(),
                                        o.max_outputs, keep_out, count_out);
  SL_CUDA_CHECK(cudaGetLastError(), "Cluster-NMS compaction");
  return iterations;
}

}  // namespace scenelab::nms
