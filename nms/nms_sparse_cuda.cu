// Sparse exact greedy NMS on the GPU (nms/nms_cuda.h, GpuSparseNms): greedy()'s indices for any
// number of boxes, with memory linear in them.
//
// The boxes are ranked (the dense path's keys and a stable radix sort) and put on a grid of
// square cells about the median box's size (a power of two from a histogram of the sides), the
// cells keyed by a hash of (group, column, row). nms/sparse_grid.h says which cells list a box
// (its probe points' cells, or the cells it covers) and which cells a box looks through (those
// its extent covers): every box that can suppress it is listed in one of them. A cell's list is
// sorted by rank. A box whose extent covers too many cells looks instead through the "big" boxes
// (those large enough to suppress it), and every box through the few the grid cannot index.
//
// Then one persistent cooperative kernel decides the boxes in rounds. A group of lanes takes a
// box and scans each of its lists from a cursor, a group's width of candidates a step: a kept box
// that suppresses it suppresses it; an undecided one that would makes it wait (the cursor stays
// there for the next round); a box whose every scan reached the boxes ranked below it is kept.
// A decision is final and written at once (a stale read only makes a box wait), so decisions
// flow through a round; the highest-ranked undecided box is decided in every round, so the
// rounds end, and clustered boxes take a few.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cmath>

#include "nms/nms_cuda.h"
#include "nms/nms_dev.cuh"
#include "nms/sparse_grid.h"

namespace scenelab::nms {
namespace {

constexpr int kCoverSpan = 4;  // cover mode: cells along an axis a listed box may cover
constexpr int kQuerySpan = 6;  // probe mode: cells along an axis a box may look through
constexpr int kMaxListed = 16;  // cells a box is listed in: kCoverSpan^2, grid::kMaxProbes^2
constexpr int kMaxQueries = 36;  // cells a box looks through: kQuerySpan^2 (>= kCoverSpan^2)
constexpr int kSideBins = 256;   // the sides' histogram: binary exponents -128..127
constexpr int kThreads = 256;
inline int blocks(long long n) { return int(std::max<long long>(1, (n + kThreads - 1) / kThreads)); }

// The states of a ranked box during the rounds.
constexpr unsigned char kUndecided = 0, kKept = 1, kSuppressed = 2;

__device__ __forceinline__ float area_dev(float4 b, float e) {
  return fmaxf(0.f, b.z - b.x + e) * fmaxf(0.f, b.w - b.y + e);
}

__device__ __forceinline__ unsigned cell_key(int group, long long x, long long y) {
  unsigned long long h = (unsigned long long)x * 0x9E3779B97F4A7C15ULL ^
                         ((unsigned long long)y + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL ^
                         ((unsigned long long)(unsigned)group + 0x165667B19E3779F9ULL) * 0xD6E8FEB86659FD93ULL;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 32;
  return unsigned(h);  // two cells of one key only add tests, never lose one
}

// How the grid is used in this call (nms/sparse_grid.h).
struct GridMode {
  int probes;   // probe points along an axis; 0 with cover: the cover mode
  bool cover;
  double t;     // the threshold
  float e;
  int shift;    // the cell side is the median side / 2^shift (rounded to a power of two)
};

// Ranked box r: its box and group (zeros past the valid ones, never read as boxes), whether it
// can overlap anything (positive area), and its side into the histogram.
__global__ void gather_kernel(const float4* boxes, const int* groups, const int* order, const unsigned* keys, int n,
                              DevOptions o, float4* sboxes, int* sgroups, unsigned char* live, int* num_valid,
                              unsigned* side_hist) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const bool valid = keys[r] != 0u;
  const float4 b = valid ? boxes[order[r]] : make_float4(0.f, 0.f, 0.f, 0.f);
  sboxes[r] = b;
  sgroups[r] = valid && groups ? groups[order[r]] : 0;
  const bool l = valid && area_dev(b, o.e) > 0.f;
  live[r] = l;
  if (valid && (r == n - 1 || keys[r + 1] == 0u)) *num_valid = r + 1;
  if (l) {
    const double s = fmax(double(b.z) - b.x + o.e, double(b.w) - b.y + o.e);
    if (isfinite(s) && s > 0) {
      int ex = 0;
      frexp(s, &ex);
      atomicAdd(&side_hist[min(max(ex + 128, 0), kSideBins - 1)], 1u);
    }
  }
}

// The cell side: the histogram's median bin's power of two over 2^shift.
__global__ void side_kernel(const unsigned* side_hist, int shift, double* side) {
  unsigned total = 0;
  for (int i = 0; i < kSideBins; ++i) total += side_hist[i];
  unsigned seen = 0;
  int bin = 128 + 1 + shift;  // no live box: side 2
  for (int i = 0; i < kSideBins && total; ++i) {
    seen += side_hist[i];
    if (2 * seen >= total) {
      bin = i;
      break;
    }
  }
  *side = ldexp(1.0, bin - 128 - shift);
}

// The distinct cells of a box's probe points along one axis (they ascend with k): false where
// one cannot be indexed.
__device__ __forceinline__ bool probe_cells(float lo, float hi, const GridMode& g, double side, long long* cells,
                                            int& count) {
  count = 0;
  for (int k = 1; k <= g.probes; ++k) {
    long long c = 0;
    if (!grid::probe_cell(lo, hi, g.e, g.t, k, side, c)) return false;
    if (count == 0 || cells[count - 1] != c) cells[count++] = c;
  }
  return true;
}

// Per valid live box: the cells it is listed in and looks through (counts), whether the grid
// cannot list it ("unlisted": everyone looks at it) and whether it looks through too many cells
// ("wide": it looks through the big boxes instead). The smallest wide box's side, for the big.
__global__ void count_kernel(const float4* sboxes, const unsigned char* live, const int* num_valid, int n, GridMode g,
                             const double* side_p, int* listed, int* queries, unsigned char* unlisted,
                             unsigned char* wide, unsigned* min_wide) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r > n) return;
  int nl = 0, nq = 0;
  unsigned char u = 0, w = 0;
  if (r < *num_valid && live[r]) {
    const float4 b = sboxes[r];
    const double side = *side_p;
    const grid::Span s = grid::cover_span(b.x, b.y, b.z, b.w, g.e, side);
    const long long sx = s.x2 - s.x1 + 1, sy = s.y2 - s.y1 + 1;
    if (g.cover) {
      if (s.ok && sx <= kCoverSpan && sy <= kCoverSpan) nl = nq = int(sx * sy);
      else u = w = 1;
    } else {
      long long cx[grid::kMaxProbes], cy[grid::kMaxProbes];
      int mx = 0, my = 0;
      if (probe_cells(b.x, b.z, g, side, cx, mx) && probe_cells(b.y, b.w, g, side, cy, my)) nl = mx * my;
      else u = 1;
      if (s.ok && sx <= kQuerySpan && sy <= kQuerySpan) {
        nq = int(sx * sy);
      } else {
        w = 1;
        atomicMin(min_wide, __float_as_uint(grid::max_side(b.x, b.y, b.z, b.w, g.e)));
      }
    }
  }
  listed[r] = nl;  // [n] = 0: the scans' totals land at [n]
  queries[r] = nq;
  if (r < n) {
    unlisted[r] = u;
    wide[r] = w;
  }
}

// The boxes a wide box looks through: in the cover mode every live box; in the probe mode those
// whose larger side reaches t times the smallest wide box's (sparse_grid.h), and the unlisted.
__global__ void big_kernel(const float4* sboxes, const unsigned char* live, const unsigned char* unlisted,
                           const int* num_valid, int n, GridMode g, const unsigned* min_wide, unsigned char* big) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  bool b = false;
  if (r < *num_valid && live[r]) {
    if (g.cover || unlisted[r]) {
      b = true;
    } else if (*min_wide != 0xffffffffu) {
      const float4 x = sboxes[r];
      const double bound = g.t * double(__uint_as_float(*min_wide)) * (1.0 - 1e-5);
      const float ms = grid::max_side(x.x, x.y, x.z, x.w, g.e);
      b = !(double(ms) < bound);  // NaN sides count as big
    }
  }
  big[r] = b;
}

// The listing entries (cell key, rank), in rank order.
__global__ void fill_kernel(const float4* sboxes, const int* sgroups, const int* listed, const int* offsets,
                            const int* num_valid, GridMode g, const double* side_p, unsigned* keys, int* ranks) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= *num_valid || listed[r] == 0) return;
  const float4 b = sboxes[r];
  const double side = *side_p;
  int p = offsets[r];
  auto put = [&](long long x, long long y) {
    keys[p] = cell_key(sgroups[r], x, y);
    ranks[p++] = r;
  };
  if (g.cover) {
    const grid::Span s = grid::cover_span(b.x, b.y, b.z, b.w, g.e, side);
    for (long long y = s.y1; y <= s.y2; ++y)
      for (long long x = s.x1; x <= s.x2; ++x) put(x, y);
  } else {
    long long cx[grid::kMaxProbes], cy[grid::kMaxProbes];
    int mx = 0, my = 0;
    probe_cells(b.x, b.z, g, side, cx, mx);
    probe_cells(b.y, b.w, g, side, cy, my);
    for (int j = 0; j < my; ++j)
      for (int i = 0; i < mx; ++i) put(cx[i], cy[j]);
  }
}

__global__ void heads_kernel(const unsigned* keys, int entries, unsigned char* head) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p < entries) head[p] = p == 0 || keys[p] != keys[p - 1];
}

// The cells' keys (ascending, distinct) and where each cell's list starts; start[cells] = the end.
__global__ void cells_kernel(const unsigned* keys, const int* cells, int entries, int* start, unsigned* cell_keys) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int c = *cells;
  if (i < c) cell_keys[i] = keys[start[i]];
  if (i == 0) start[c] = entries;
}

// Each box's looks: the cell's list [cursor, end) (-1: no such cell, nothing to look at).
__global__ void query_kernel(const float4* sboxes, const int* sgroups, const int* queries, const int* offsets,
                             const int* num_valid, float e, const double* side_p, const unsigned* cell_keys,
                             const int* cells, const int* start, int* cursor, int* end) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= *num_valid || queries[r] == 0) return;
  const float4 b = sboxes[r];
  const grid::Span s = grid::cover_span(b.x, b.y, b.z, b.w, e, *side_p);
  const int nc = *cells;
  int p = offsets[r];
  for (long long y = s.y1; y <= s.y2; ++y)
    for (long long x = s.x1; x <= s.x2; ++x, ++p) {
      const unsigned k = cell_key(sgroups[r], x, y);
      int lo = 0, hi = nc;
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (cell_keys[mid] < k) lo = mid + 1;
        else hi = mid;
      }
      const bool found = lo < nc && cell_keys[lo] == k;
      cursor[p] = found ? start[lo] : -1;
      end[p] = found ? start[lo + 1] : 0;
    }
}

struct Rounds {
  const float4* boxes;
  const int* groups;
  const int* listed_ranks;  // the cells' lists, each ascending by rank
  int* qcursor;             // per look: the next to test (-1: its scan has ended)
  const int* qend;
  const int* qoffsets;      // box r's looks: [qoffsets[r], qoffsets[r + 1])
  const int* unlisted;      // ranks ascending
  const int* unlisted_count;
  const int* big;           // ranks ascending
  const int* big_count;
  int* lcursor;             // per box: the next unlisted (or, wide, big) box to test
  const unsigned char* wide;
  // Read and written across blocks while they run: volatile, so that no stale copy in an SM's
  // L1 is read (a stale "undecided" only makes a box wait a round).
  volatile unsigned char* state;
  int num_valid;
  DevOptions o;
  unsigned* barrier;  // [0] arrivals, [1] generation
  int* blist[2];      // the boxes still undecided (round 0: all), double-buffered
  int* bcount;        // [3]: the lists' sizes, taken in turn by round % 3
  int* rounds;        // the rounds it took
};

// A group of G lanes scans ranks item(k), k in [c, end), ascending, for box r: 0 when it reached
// the end or a rank at or below r's, 1 when a kept box suppresses r, 2 when an undecided one
// would (c is left on it).
template <int G, typename Item>
__device__ __forceinline__ int group_scan(const Rounds& R, int r, float4 br, int gr, int& c, int end, Item item,
                                          int lane, unsigned mask, int base) {
  for (; c < end; c += G) {
    const int k = c + lane;
    int st = 3;
    if (k < end) {
      const int q = item(k);
      st = 0;
      if (q >= r) {
        st = 3;
      } else if (overlap_dev(br, R.boxes[q], R.o) > R.o.threshold && R.groups[q] == gr) {
        const unsigned char sq = R.state[q];
        st = sq == kSuppressed ? 0 : sq == kKept ? 1 : 2;
      }
    }
    const unsigned hit = (__ballot_sync(mask, st != 0) >> base) & (G == 32 ? 0xffffffffu : (1u << G) - 1u);
    if (hit) {
      const int first = __ffs(hit) - 1;
      const int s = __shfl_sync(mask, st, first, G);
      c += first;
      return s == 3 ? 0 : s;
    }
  }
  return 0;
}

// A barrier across the grid (the grid is co-resident: a cooperative launch). Every thread's
// writes are fenced before its block arrives.
__device__ void grid_barrier(unsigned* b) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* gen = b + 1;
    const unsigned g = *gen;
    __threadfence();
    if (atomicAdd(b, 1u) == gridDim.x - 1) {
      b[0] = 0;
      __threadfence();
      atomicAdd(b + 1, 1u);
    } else {
      while (*gen == g) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}

// One box's scans in this round, by its group: whether it is suppressed, or waits.
template <int G>
__device__ __forceinline__ void decide(const Rounds& R, int r, bool& found, bool& blocked, int lane, unsigned mask,
                                       int base) {
  const float4 br = R.boxes[r];
  const int gr = R.groups[r];
  int c = R.lcursor[r];
  if (R.wide[r]) {
    const int res = group_scan<G>(R, r, br, gr, c, *R.big_count, [&](int k) { return R.big[k]; }, lane, mask, base);
    found = res == 1;
    blocked = res == 2;
    __syncwarp(mask);
    if (lane == 0) R.lcursor[r] = c;
    return;
  }
  for (int p = R.qoffsets[r], e = R.qoffsets[r + 1]; p < e && !found; ++p) {
    int qc = R.qcursor[p];
    if (qc < 0) continue;
    const int res =
        group_scan<G>(R, r, br, gr, qc, R.qend[p], [&](int k) { return R.listed_ranks[k]; }, lane, mask, base);
    found = res == 1;
    blocked |= res == 2;
    __syncwarp(mask);
    if (lane == 0) R.qcursor[p] = res == 0 ? -1 : qc;
  }
  if (found) return;
  const int res =
      group_scan<G>(R, r, br, gr, c, *R.unlisted_count, [&](int k) { return R.unlisted[k]; }, lane, mask, base);
  found = res == 1;
  blocked |= res == 2;
  __syncwarp(mask);
  if (lane == 0) R.lcursor[r] = c;
}

template <int G>
__global__ void rounds_kernel(Rounds R) {
  const int t0 = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x % G, base = threadIdx.x % 32 - lane;
  const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1u) << base;
  const int group = t0 / G, groups = gridDim.x * blockDim.x / G;
  for (int round = 0;; ++round) {
    const int cur = round % 3, next = (round + 1) % 3;
    const int* bl = R.blist[round & 1];
    int* bl_next = R.blist[(round + 1) & 1];
    const int nb = round == 0 ? R.num_valid : *(volatile int*)&R.bcount[cur];
    if (t0 == 0) R.bcount[(round + 2) % 3] = 0;  // round + 1's next list
    for (int i = group; i < nb; i += groups) {
      const int r = round == 0 ? i : bl[i];
      if (R.state[r] != kUndecided) continue;  // the same for the whole group
      bool found = false, blocked = false;
      decide<G>(R, r, found, blocked, lane, mask, base);
      __syncwarp(mask);  // every lane has read r's state before it changes
      if (lane == 0) {
        if (found)
          R.state[r] = kSuppressed;
        else if (!blocked)
          R.state[r] = kKept;
        else
          bl_next[atomicAdd(&R.bcount[next], 1)] = r;
      }
    }
    grid_barrier(R.barrier);
    if (*(volatile int*)&R.bcount[next] == 0) {
      if (t0 == 0) *R.rounds = round + 1;
      return;
    }
  }
}

__global__ void init_kernel(const unsigned char* live, const int* num_valid, int n, unsigned char* state,
                            int* lcursor) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  state[r] = r < *num_valid && live[r] ? kUndecided : kKept;  // a box of no area overlaps nothing: kept
  lcursor[r] = 0;
}

__global__ void keep_flags_kernel(const unsigned char* state, const int* num_valid, int n, unsigned char* flags) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) flags[r] = r < *num_valid && state[r] == kKept;
}

__global__ void cap_kernel(int* count, int max_outputs) {
  if (max_outputs >= 0 && *count > max_outputs) *count = max_outputs;
}

template <int G>
int cooperative_grid(int device) {
  int sms = 0, per_sm = 0, coop = 0;
  SL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "GpuSparseNms: SMs");
  SL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rounds_kernel<G>, kThreads, 0),
                "GpuSparseNms: occupancy");
  SL_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device), "GpuSparseNms: cooperative");
  SL_REQUIRE(coop && per_sm > 0, "GpuSparseNms: this GPU cannot launch a cooperative kernel");
  return sms * per_sm;
}

}  // namespace

void GpuSparseNms::tune(int lanes, int cell_shift) {
  SL_REQUIRE(lanes == 8 || lanes == 32, "GpuSparseNms: lanes ", lanes, " (8 or 32)");
  SL_REQUIRE(cell_shift >= 0 && cell_shift <= 3, "GpuSparseNms: cell shift ", cell_shift, " (0..3)");
  lanes_ = lanes;
  cell_shift_ = cell_shift;
}

void GpuSparseNms::reserve(int n) {
  n = std::max(n, 1);
  if (n <= capacity_) return;
  const size_t N = size_t(n), L = N * kMaxListed, Q = N * kMaxQueries;
  keys_in_.resize(N * sizeof(unsigned), "GpuSparseNms keys");
  keys_sorted_.resize(N * sizeof(unsigned), "GpuSparseNms sorted keys");
  idx_in_.resize(N * sizeof(int), "GpuSparseNms idx");
  order_.resize(N * sizeof(int), "GpuSparseNms order");
  boxes_.resize(N * sizeof(float4), "GpuSparseNms boxes");
  groups_.resize(N * sizeof(int), "GpuSparseNms groups");
  flags_.resize(4 * N, "GpuSparseNms flags");  // live, unlisted, wide, big/kept
  listed_.resize((N + 1) * sizeof(int), "GpuSparseNms listed");
  loffsets_.resize((N + 1) * sizeof(int), "GpuSparseNms listed offsets");
  queries_.resize((N + 1) * sizeof(int), "GpuSparseNms looks");
  qoffsets_.resize((N + 1) * sizeof(int), "GpuSparseNms look offsets");
  lists_.resize(2 * N * sizeof(int), "GpuSparseNms unlisted and big");
  state_.resize(N, "GpuSparseNms state");
  lcursor_.resize(N * sizeof(int), "GpuSparseNms list cursor");
  blist_[0].resize(N * sizeof(int), "GpuSparseNms box worklist");
  blist_[1].resize(N * sizeof(int), "GpuSparseNms box worklist");
  lkeys_[0].resize(L * sizeof(unsigned), "GpuSparseNms cell keys");
  lkeys_[1].resize(L * sizeof(unsigned), "GpuSparseNms cell keys");
  lranks_[0].resize(L * sizeof(int), "GpuSparseNms cell ranks");
  lranks_[1].resize(L * sizeof(int), "GpuSparseNms cell ranks");
  heads_.resize(L, "GpuSparseNms cell heads");
  cell_start_.resize((L + 1) * sizeof(int), "GpuSparseNms cell starts");
  cell_keys_.resize(L * sizeof(unsigned), "GpuSparseNms cell table");
  qcursor_.resize(Q * sizeof(int), "GpuSparseNms look cursors");
  qend_.resize(Q * sizeof(int), "GpuSparseNms look ends");
  small_.resize(16 * sizeof(int) + kSideBins * sizeof(unsigned) + sizeof(double), "GpuSparseNms scalars");
  size_t a = 0, b = 0, c = 0, f = 0, g = 0, h = 0;
  SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, a, (unsigned*)nullptr, (unsigned*)nullptr,
                                                          (int*)nullptr, (int*)nullptr, n),
                "GpuSparseNms: sort workspace size");
  SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, b, (unsigned*)nullptr, (unsigned*)nullptr, (int*)nullptr,
                                                (int*)nullptr, int(L)),
                "GpuSparseNms: cell sort workspace size");
  SL_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, c, (int*)nullptr, (int*)nullptr, n + 1),
                "GpuSparseNms: scan workspace size");
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, f, thrust::counting_iterator<int>(0), (unsigned char*)nullptr,
                                           (int*)nullptr, (int*)nullptr, n),
                "GpuSparseNms: select workspace size");
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, g, thrust::counting_iterator<int>(0), (unsigned char*)nullptr,
                                           (int*)nullptr, (int*)nullptr, int(L)),
                "GpuSparseNms: cell select workspace size");
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, h, (int*)nullptr, (unsigned char*)nullptr, (int*)nullptr,
                                           (int*)nullptr, n),
                "GpuSparseNms: select workspace size");
  temp_bytes_ = std::max({a, b, c, f, g, h, size_t(1)});
  temp_.resize(temp_bytes_, "GpuSparseNms workspace");
  int device = 0;
  SL_CUDA_CHECK(cudaGetDevice(&device), "GpuSparseNms: device");
  grid8_ = cooperative_grid<8>(device);
  grid32_ = cooperative_grid<32>(device);
  capacity_ = n;
}

void GpuSparseNms::greedy(const DeviceBoxes& in, const Options& o, int* keep_out, int* count_out, cudaStream_t s) {
  SL_REQUIRE(in.n <= capacity_, "GpuSparseNms: ", in.n, " boxes exceed the reserved capacity ", capacity_,
             " (call reserve())");
  SL_REQUIRE(o.threshold >= 0, "GpuSparseNms: threshold ", o.threshold, " (below 0 every pair suppresses: the dense path)");
  const int n = in.n;
  if (n == 0) {
    SL_CUDA_CHECK(cudaMemsetAsync(count_out, 0, sizeof(int), s), "GpuSparseNms");
    return;
  }
  const DevOptions d = dev_options(o);
  const int probes = grid::probes_for(o.threshold);
  const GridMode g{probes, !(o.criterion == Criterion::IoU && probes <= grid::kMaxProbes), double(o.threshold), d.e,
                   cell_shift_};
  // [0] num_valid, [1] unlisted, [2] big, [3] cells, [4..5] barrier, [6] rounds, [7] smallest wide
  // box's side (float bits), [8..10] worklist sizes
  int* scal = small_.get<int>();
  unsigned* hist = reinterpret_cast<unsigned*>(scal + 16);
  double* side = reinterpret_cast<double*>(hist + kSideBins);
  unsigned* min_wide = reinterpret_cast<unsigned*>(scal + 7);
  SL_CUDA_CHECK(cudaMemsetAsync(small_.get(), 0, small_.bytes(), s), "GpuSparseNms");
  SL_CUDA_CHECK(cudaMemsetAsync(min_wide, 0xff, sizeof(unsigned), s), "GpuSparseNms");
  unsigned char* live = flags_.get<unsigned char>();
  unsigned char* unlisted = live + capacity_;
  unsigned char* wide = unlisted + capacity_;
  unsigned char* big = wide + capacity_;  // then the kept flags
  int* unlisted_list = lists_.get<int>();
  int* big_list = unlisted_list + capacity_;
  size_t bytes = temp_bytes_;
  make_keys_kernel<<<blocks(n), kThreads, 0, s>>>(in.scores, n, d, keys_in_.get<unsigned>(), idx_in_.get<int>());
  SL_CUDA_CHECK(cudaGetLastError(), "GpuSparseNms keys");
  SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(temp_.get(), bytes, keys_in_.get<unsigned>(),
                                                          keys_sorted_.get<unsigned>(), idx_in_.get<int>(),
                                                          order_.get<int>(), n, 0, 32, s),
                "GpuSparseNms rank");
  gather_kernel<<<blocks(n), kThreads, 0, s>>>(in.boxes, in.groups, order_.get<int>(), keys_sorted_.get<unsigned>(), n,
                                               d, boxes_.get<float4>(), groups_.get<int>(), live, scal, hist);
  side_kernel<<<1, 1, 0, s>>>(hist, g.shift, side);
  count_kernel<<<blocks(n + 1), kThreads, 0, s>>>(boxes_.get<float4>(), live, scal, n, g, side, listed_.get<int>(),
                                                  queries_.get<int>(), unlisted, wide, min_wide);
  big_kernel<<<blocks(n), kThreads, 0, s>>>(boxes_.get<float4>(), live, unlisted, scal, n, g, min_wide, big);
  SL_CUDA_CHECK(cudaGetLastError(), "GpuSparseNms cells");
  bytes = temp_bytes_;
  SL_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp_.get(), bytes, listed_.get<int>(), loffsets_.get<int>(), n + 1, s),
                "GpuSparseNms listing offsets");
  bytes = temp_bytes_;
  SL_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp_.get(), bytes, queries_.get<int>(), qoffsets_.get<int>(), n + 1, s),
                "GpuSparseNms look offsets");
  bytes = temp_bytes_;
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(temp_.get(), bytes, thrust::counting_iterator<int>(0), unlisted,
                                           unlisted_list, scal + 1, n, s),
                "GpuSparseNms unlisted boxes");
  bytes = temp_bytes_;
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(temp_.get(), bytes, thrust::counting_iterator<int>(0), big, big_list,
                                           scal + 2, n, s),
                "GpuSparseNms big boxes");
  fill_kernel<<<blocks(n), kThreads, 0, s>>>(boxes_.get<float4>(), groups_.get<int>(), listed_.get<int>(),
                                             loffsets_.get<int>(), scal, g, side, lkeys_[0].get<unsigned>(),
                                             lranks_[0].get<int>());
  SL_CUDA_CHECK(cudaGetLastError(), "GpuSparseNms listing");
  // The sizes the next launches take: one wait for the device.
  int num_valid = 0, entries = 0;
  SL_CUDA_CHECK(cudaMemcpyAsync(&num_valid, scal, sizeof(int), cudaMemcpyDeviceToHost, s), "GpuSparseNms sizes");
  SL_CUDA_CHECK(cudaMemcpyAsync(&entries, loffsets_.get<int>() + n, sizeof(int), cudaMemcpyDeviceToHost, s),
                "GpuSparseNms sizes");
  SL_CUDA_CHECK(cudaStreamSynchronize(s), "GpuSparseNms sizes");
  int which = 0;
  int* cells = scal + 3;
  if (entries > 0) {
    cub::DoubleBuffer<unsigned> k(lkeys_[0].get<unsigned>(), lkeys_[1].get<unsigned>());
    cub::DoubleBuffer<int> v(lranks_[0].get<int>(), lranks_[1].get<int>());
    bytes = temp_bytes_;
    SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.get(), bytes, k, v, entries, 0, 32, s), "GpuSparseNms cells");
    which = k.selector;
    SL_REQUIRE(v.selector == which, "GpuSparseNms: the cell sort's buffers disagree");
    heads_kernel<<<blocks(entries), kThreads, 0, s>>>(k.Current(), entries, heads_.get<unsigned char>());
    bytes = temp_bytes_;
    SL_CUDA_CHECK(cub::DeviceSelect::Flagged(temp_.get(), bytes, thrust::counting_iterator<int>(0),
                                             heads_.get<unsigned char>(), cell_start_.get<int>(), cells, entries, s),
                  "GpuSparseNms cell starts");
    cells_kernel<<<blocks(entries), kThreads, 0, s>>>(k.Current(), cells, entries, cell_start_.get<int>(),
                                                      cell_keys_.get<unsigned>());
  }
  query_kernel<<<blocks(n), kThreads, 0, s>>>(boxes_.get<float4>(), groups_.get<int>(), queries_.get<int>(),
                                              qoffsets_.get<int>(), scal, d.e, side, cell_keys_.get<unsigned>(), cells,
                                              cell_start_.get<int>(), qcursor_.get<int>(), qend_.get<int>());
  init_kernel<<<blocks(n), kThreads, 0, s>>>(live, scal, n, state_.get<unsigned char>(), lcursor_.get<int>());
  SL_CUDA_CHECK(cudaGetLastError(), "GpuSparseNms init");
  if (num_valid > 0) {
    Rounds R{boxes_.get<float4>(), groups_.get<int>(), lranks_[which].get<int>(), qcursor_.get<int>(),
             qend_.get<int>(), qoffsets_.get<int>(), unlisted_list, scal + 1, big_list, scal + 2, lcursor_.get<int>(),
             wide, state_.get<unsigned char>(), num_valid, d, reinterpret_cast<unsigned*>(scal + 4),
             {blist_[0].get<int>(), blist_[1].get<int>()}, scal + 8, scal + 6};
    void* args[] = {&R};
    const bool warp = lanes_ == 32;
    SL_CUDA_CHECK(cudaLaunchCooperativeKernel(warp ? reinterpret_cast<void*>(rounds_kernel<32>)
                                                   : reinterpret_cast<void*>(rounds_kernel<8>),
                                              dim3(unsigned(warp ? grid32_ : grid8_)), dim3(kThreads), args, 0, s),
                  "GpuSparseNms rounds");
  }
  keep_flags_kernel<<<blocks(n), kThreads, 0, s>>>(state_.get<unsigned char>(), scal, n, big);
  bytes = temp_bytes_;
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(temp_.get(), bytes, order_.get<int>(), big, keep_out, count_out, n, s),
                "GpuSparseNms keep");
  cap_kernel<<<1, 1, 0, s>>>(count_out, o.max_outputs);
  SL_CUDA_CHECK(cudaGetLastError(), "GpuSparseNms keep");
}

int GpuSparseNms::last_rounds() const {
  int rounds = 0;
  SL_CUDA_CHECK(cudaMemcpy(&rounds, small_.get<int>() + 6, sizeof(int), cudaMemcpyDeviceToHost), "GpuSparseNms rounds");
  return rounds;
}

}  // namespace scenelab::nms
