// Sparse exact greedy NMS on the GPU (nms/nms_cuda.h, GpuSparseNms): greedy_nms's indices for
// any number of boxes, with memory linear in them. The boxes are ranked (the dense path's keys
// and a stable radix sort), binned on a grid of square cells whose side is about the median
// box's larger side (a power of two, from a histogram of the sides), the cells keyed by a hash of
// (group, column, row): a box's entries, one a cell it covers, sorted by key and rank. A box
// covering more than kSpan cells along an axis, or with coordinates the grid cannot index, is
// "wide". Then one persistent kernel decides the boxes in rounds: each entry scans its cell's
// higher-ranked boxes from a cursor, skipping those suppressed or not suppressing it, and stops
// at a kept one that suppresses it (the box is suppressed) or at an undecided one (the round
// ends for it); every box scans the wide boxes ranked above it the same way, and a wide box every
// box ranked above it (a warp at a time). Each round works through lists of the entries and
// boxes still undecided. A box whose scans all reached their ends is kept. The highest-ranked
// undecided box is decided in every round, so the rounds end; clustered boxes take a few. The
// pairs tested are those sharing a cell (and the wide boxes' pairs), not n^2 / 2.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cmath>

#include "nms/nms_cuda.h"
#include "nms/nms_dev.cuh"

namespace scenelab::nms {
namespace {

constexpr int kSpan = 4;              // cells along an axis before a box is wide
constexpr int kMaxCells = kSpan * kSpan;
constexpr double kMaxCell = 1099511627776.0;  // 2^40: cell indices beyond are not binned
constexpr int kSideBins = 256;        // the sides' histogram: binary exponents -128..127
constexpr int kThreads = 256;
inline int blocks(long long n) { return int(std::max<long long>(1, (n + kThreads - 1) / kThreads)); }

// The states of a ranked box during the rounds.
constexpr unsigned char kUndecided = 0, kKept = 1, kSuppressed = 2;

__device__ __forceinline__ float area_dev(float4 b, float e) {
  return fmaxf(0.f, b.z - b.x + e) * fmaxf(0.f, b.w - b.y + e);
}

// The box's extent widened by a relative 1e-6 (and 1e-30) on each side, so that float rounding in
// the overlap test cannot find an intersection the grid did not (as nms_sparse.cpp).
struct Cells {
  long long x1, y1, x2, y2;
  bool binned;
};
__device__ __forceinline__ Cells cells_of(float4 b, float e, double side) {
  auto lo = [](double v) { return v - fabs(v) * 1e-6 - 1e-30; };
  auto hi = [](double v) { return v + fabs(v) * 1e-6 + 1e-30; };
  const double fx1 = floor(lo(b.x) / side), fy1 = floor(lo(b.y) / side);
  const double fx2 = floor(hi(double(b.z) + e) / side), fy2 = floor(hi(double(b.w) + e) / side);
  Cells c{0, 0, 0, 0, false};
  if (!(fabs(fx1) < kMaxCell && fabs(fy1) < kMaxCell && fabs(fx2) < kMaxCell && fabs(fy2) < kMaxCell)) return c;
  if (fx2 - fx1 >= kSpan || fy2 - fy1 >= kSpan) return c;
  c = {(long long)fx1, (long long)fy1, (long long)fx2, (long long)fy2, true};
  return c;
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

// The cell side: 2^e of the histogram's median bin (about the median box's larger side).
__global__ void side_kernel(const unsigned* side_hist, double* side) {
  unsigned total = 0;
  for (int i = 0; i < kSideBins; ++i) total += side_hist[i];
  unsigned seen = 0;
  int bin = 128 + 1;  // no live box: side 2
  for (int i = 0; i < kSideBins && total; ++i) {
    seen += side_hist[i];
    if (2 * seen >= total) {
      bin = i;
      break;
    }
  }
  *side = ldexp(1.0, bin - 128);
}

// Each valid box's number of entries (its cells; 0 if wide or dead) and whether it is wide.
__global__ void count_kernel(const float4* sboxes, const unsigned char* live, const int* num_valid, int n, float e,
                             const double* side, int* counts, unsigned char* wide) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r > n) return;
  int c = 0;
  unsigned char w = 0;
  if (r < *num_valid && live[r]) {
    const Cells k = cells_of(sboxes[r], e, *side);
    if (k.binned)
      c = int((k.x2 - k.x1 + 1) * (k.y2 - k.y1 + 1));
    else
      w = 1;
  }
  counts[r] = c;  // counts[n] = 0: the scan's total lands at offsets[n]
  if (r < n) wide[r] = w;
}

__global__ void fill_kernel(const float4* sboxes, const int* sgroups, const int* counts, const int* offsets,
                            const int* num_valid, float e, const double* side, unsigned* ekeys, int* eranks) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= *num_valid || counts[r] == 0) return;
  const Cells k = cells_of(sboxes[r], e, *side);
  int p = offsets[r];
  for (long long y = k.y1; y <= k.y2; ++y)
    for (long long x = k.x1; x <= k.x2; ++x) {
      ekeys[p] = cell_key(sgroups[r], x, y);
      eranks[p++] = r;
    }
}

// seg[p]: where entry p's cell starts in the sorted entries (then the inclusive max-scan).
__global__ void heads_kernel(const unsigned* keys, int entries, int* seg) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p < entries) seg[p] = p == 0 || keys[p] != keys[p - 1] ? p : 0;
}

struct MaxOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a > b ? a : b; }
};

struct Rounds {
  const float4* boxes;
  const int* groups;
  const int* eranks;   // sorted entries' ranks
  int* cursor;         // per entry: the next cell-mate to test (from its cell's start)
  const int* wide;     // the wide boxes' ranks, ascending
  int num_wide;
  int* wcursor;        // per box: the next wide box (binned boxes) or the next rank (wide boxes)
  const unsigned char* is_wide;
  // Read and written by other blocks between barriers: volatile, so that no stale copy in an
  // SM's L1 is read.
  volatile unsigned char* state;
  volatile int* left;           // per box: its scans not yet at their end
  volatile unsigned char* found;  // per box: a kept box suppresses it
  int entries, num_valid;
  DevOptions o;
  unsigned* barrier;   // [0] arrivals, [1] generation
  // Worklists: the entries whose scans go on, the boxes still undecided (round 0: all of them),
  // double-buffered; their sizes in counters taken in turn by round % 3.
  int* elist[2];
  int* blist[2];
  int* ecount;         // [3]
  int* bcount;         // [3]
  int* rounds;         // the rounds it took
};

// How many of the wide boxes (ranks ascending) are ranked above r.
__device__ __forceinline__ int wide_before(const int* wide, int count, int r) {
  int lo = 0, hi = count;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (wide[mid] < r) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

__device__ __forceinline__ bool suppresses(const Rounds& R, int q, int r) {
  return R.groups[q] == R.groups[r] && overlap_dev(R.boxes[r], R.boxes[q], R.o) > R.o.threshold;
}

// Advances a scan over ranks given by next(i) for i in [cursor, end): true when it reached end.
// A kept box that suppresses r sets found[r]; an undecided one stops the scan for this round.
template <typename Next>
__device__ __forceinline__ bool scan(const Rounds& R, int r, int& cursor, int end, Next next) {
  int c = cursor;
  bool done = true;
  for (; c < end; ++c) {
    const int q = next(c);
    const unsigned char sq = R.state[q];
    if (sq == kSuppressed || !suppresses(R, q, r)) continue;
    if (sq == kKept) R.found[r] = 1;
    done = false;
    break;
  }
  cursor = c;
  return done;
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

__global__ void rounds_kernel(Rounds R) {
  const int stride = gridDim.x * blockDim.x;
  const int t0 = blockIdx.x * blockDim.x + threadIdx.x;
  for (int round = 0;; ++round) {
    const int cur = round % 3, next = (round + 1) % 3;
    const int* el = R.elist[round & 1];
    int* el_next = R.elist[(round + 1) & 1];
    const int* bl = R.blist[round & 1];
    int* bl_next = R.blist[(round + 1) & 1];
    const int ne = round == 0 ? R.entries : *(volatile int*)&R.ecount[cur];
    const int nb = round == 0 ? R.num_valid : *(volatile int*)&R.bcount[cur];
    if (t0 == 0) R.ecount[(round + 2) % 3] = R.bcount[(round + 2) % 3] = 0;  // round + 1's next lists
    // The scans: each entry through its cell-mates ranked above it, each box through the wide
    // boxes ranked above it (a wide box: through every box ranked above it). A cursor of -1:
    // that scan has ended (counted off `left` once). An entry whose scan waits goes on the next
    // round's list.
    for (int i = t0; i < ne; i += stride) {
      const int p = round == 0 ? i : el[i];
      const int r = R.eranks[p];
      int c = R.cursor[p];
      if (c < 0 || R.state[r] != kUndecided) continue;
      if (scan(R, r, c, p, [&](int k) { return R.eranks[k]; })) {
        atomicSub((int*)&R.left[r], 1);
        c = -1;
      } else {
        el_next[atomicAdd(&R.ecount[next], 1)] = p;
      }
      R.cursor[p] = c;
    }
    for (int i = t0; i < nb; i += stride) {
      const int r = round == 0 ? i : bl[i];
      int c = R.wcursor[r];
      if (c < 0 || R.is_wide[r] || R.state[r] != kUndecided) continue;
      if (scan(R, r, c, wide_before(R.wide, R.num_wide, r), [&](int k) { return R.wide[k]; })) {
        atomicSub((int*)&R.left[r], 1);
        c = -1;
      }
      R.wcursor[r] = c;
    }
    // A wide box's scan through every box ranked above it: a warp a box, 32 ranks at a time,
    // the first that is kept or undecided and suppresses it deciding as scan() would.
    const int lane = threadIdx.x % 32, warps = stride / 32;
    for (int w = t0 / 32; w < R.num_wide; w += warps) {
      const int r = R.wide[w];
      int c = R.wcursor[r];
      if (c < 0 || R.state[r] != kUndecided) continue;  // the same for the whole warp
      bool done = true;
      for (; c < r; c += 32) {
        const int q = c + lane;
        int status = 0;  // 1: kept and suppresses r, 2: undecided and suppresses r
        if (q < r) {
          const unsigned char sq = R.state[q];
          if (sq != kSuppressed && suppresses(R, q, r)) status = sq == kKept ? 1 : 2;
        }
        const unsigned hit = __ballot_sync(0xffffffffu, status != 0);
        if (hit) {
          const int first = __ffs(hit) - 1;
          if (__shfl_sync(0xffffffffu, status, first) == 1 && lane == 0) R.found[r] = 1;
          c += first;
          done = false;
          break;
        }
      }
      if (lane == 0) {
        if (done) atomicSub((int*)&R.left[r], 1);
        R.wcursor[r] = done ? -1 : c;
      }
    }
    grid_barrier(R.barrier);
    // The decisions; a box still undecided goes on the next round's list.
    for (int i = t0; i < nb; i += stride) {
      const int r = round == 0 ? i : bl[i];
      if (R.state[r] != kUndecided) continue;
      if (R.found[r])
        R.state[r] = kSuppressed;
      else if (R.left[r] == 0)
        R.state[r] = kKept;
      else
        bl_next[atomicAdd(&R.bcount[next], 1)] = r;
    }
    grid_barrier(R.barrier);
    if (*(volatile int*)&R.bcount[next] == 0) {
      if (t0 == 0) *R.rounds = round + 1;
      return;
    }
  }
}

__global__ void init_kernel(const unsigned char* live, const int* counts,
                            const int* num_valid, int n, unsigned char* state, int* left, unsigned char* found,
                            int* wcursor) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const bool in = r < *num_valid;
  state[r] = in && live[r] ? kUndecided : kKept;  // a box of no area overlaps nothing: kept
  left[r] = counts[r] + 1;                        // its cells' scans and its wide scan
  found[r] = 0;
  wcursor[r] = 0;
}

__global__ void keep_flags_kernel(const unsigned char* state, const int* num_valid, int n, unsigned char* flags) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) flags[r] = r < *num_valid && state[r] == kKept;
}

__global__ void cap_kernel(int* count, int max_outputs) {
  if (max_outputs >= 0 && *count > max_outputs) *count = max_outputs;
}

}  // namespace

void GpuSparseNms::reserve(int n) {
  n = std::max(n, 1);
  if (n <= capacity_) return;
  const size_t N = size_t(n), E = N * kMaxCells;
  keys_in_.resize(N * sizeof(unsigned), "GpuSparseNms keys");
  keys_sorted_.resize(N * sizeof(unsigned), "GpuSparseNms sorted keys");
  idx_in_.resize(N * sizeof(int), "GpuSparseNms idx");
  order_.resize(N * sizeof(int), "GpuSparseNms order");
  boxes_.resize(N * sizeof(float4), "GpuSparseNms boxes");
  groups_.resize(N * sizeof(int), "GpuSparseNms groups");
  live_.resize(N, "GpuSparseNms live");
  wide_flag_.resize(N, "GpuSparseNms wide");
  counts_.resize((N + 1) * sizeof(int), "GpuSparseNms counts");
  offsets_.resize((N + 1) * sizeof(int), "GpuSparseNms offsets");
  wide_.resize(N * sizeof(int), "GpuSparseNms wide list");
  state_.resize(N, "GpuSparseNms state");
  left_.resize(N * sizeof(int), "GpuSparseNms left");
  found_.resize(N, "GpuSparseNms found");
  wcursor_.resize(N * sizeof(int), "GpuSparseNms wide cursor");
  flags_.resize(N, "GpuSparseNms flags");
  ekeys_[0].resize(E * sizeof(unsigned), "GpuSparseNms entry keys");
  ekeys_[1].resize(E * sizeof(unsigned), "GpuSparseNms entry keys");
  eranks_[0].resize(E * sizeof(int), "GpuSparseNms entry ranks");
  eranks_[1].resize(E * sizeof(int), "GpuSparseNms entry ranks");
  seg_.resize(E * sizeof(int), "GpuSparseNms segments");
  elist_[0].resize(E * sizeof(int), "GpuSparseNms entry worklist");
  elist_[1].resize(E * sizeof(int), "GpuSparseNms entry worklist");
  blist_[0].resize(N * sizeof(int), "GpuSparseNms box worklist");
  blist_[1].resize(N * sizeof(int), "GpuSparseNms box worklist");
  small_.resize(16 * sizeof(int) + kSideBins * sizeof(unsigned) + sizeof(double), "GpuSparseNms scalars");
  size_t a = 0, b = 0, c = 0, d = 0, f = 0;
  SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, a, (unsigned*)nullptr, (unsigned*)nullptr,
                                                          (int*)nullptr, (int*)nullptr, n),
                "GpuSparseNms: sort workspace size");
  SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, b, (unsigned*)nullptr, (unsigned*)nullptr, (int*)nullptr,
                                                (int*)nullptr, int(E)),
                "GpuSparseNms: entry sort workspace size");
  SL_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, c, (int*)nullptr, (int*)nullptr, n + 1),
                "GpuSparseNms: scan workspace size");
  SL_CUDA_CHECK(cub::DeviceScan::InclusiveScan(nullptr, d, (int*)nullptr, (int*)nullptr, MaxOp{}, int(E)),
                "GpuSparseNms: segment scan workspace size");
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, f, thrust::counting_iterator<int>(0), (unsigned char*)nullptr,
                                           (int*)nullptr, (int*)nullptr, n),
                "GpuSparseNms: select workspace size");
  size_t g = 0;
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, g, (int*)nullptr, (unsigned char*)nullptr, (int*)nullptr,
                                           (int*)nullptr, n),
                "GpuSparseNms: select workspace size");
  temp_bytes_ = std::max({a, b, c, d, f, g, size_t(1)});
  temp_.resize(temp_bytes_, "GpuSparseNms workspace");
  int device = 0, sms = 0, per_sm = 0;
  SL_CUDA_CHECK(cudaGetDevice(&device), "GpuSparseNms: device");
  SL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "GpuSparseNms: SMs");
  SL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rounds_kernel, kThreads, 0),
                "GpuSparseNms: occupancy");
  int coop = 0;
  SL_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device), "GpuSparseNms: cooperative");
  SL_REQUIRE(coop && per_sm > 0, "GpuSparseNms: this GPU cannot launch a cooperative kernel");
  grid_ = sms * per_sm;
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
  // [0] num_valid, [1] wide count, [2] rounds, [4..5] barrier, [8..10] entry counts, [11..13] box counts
  int* scal = small_.get<int>();
  unsigned* hist = reinterpret_cast<unsigned*>(scal + 16);
  double* side = reinterpret_cast<double*>(hist + kSideBins);
  SL_CUDA_CHECK(cudaMemsetAsync(small_.get(), 0, small_.bytes(), s), "GpuSparseNms");
  size_t bytes = temp_bytes_;
  make_keys_kernel<<<blocks(n), kThreads, 0, s>>>(in.scores, n, d, keys_in_.get<unsigned>(), idx_in_.get<int>());
  SL_CUDA_CHECK(cudaGetLastError(), "GpuSparseNms keys");
  SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(temp_.get(), bytes, keys_in_.get<unsigned>(),
                                                          keys_sorted_.get<unsigned>(), idx_in_.get<int>(),
                                                          order_.get<int>(), n, 0, 32, s),
                "GpuSparseNms rank");
  gather_kernel<<<blocks(n), kThreads, 0, s>>>(in.boxes, in.groups, order_.get<int>(), keys_sorted_.get<unsigned>(), n,
                                               d, boxes_.get<float4>(), groups_.get<int>(), live_.get<unsigned char>(),
                                               scal, hist);
  side_kernel<<<1, 1, 0, s>>>(hist, side);
  count_kernel<<<blocks(n + 1), kThreads, 0, s>>>(boxes_.get<float4>(), live_.get<unsigned char>(), scal, n, d.e, side,
                                                  counts_.get<int>(), wide_flag_.get<unsigned char>());
  SL_CUDA_CHECK(cudaGetLastError(), "GpuSparseNms cells");
  bytes = temp_bytes_;
  SL_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp_.get(), bytes, counts_.get<int>(), offsets_.get<int>(), n + 1, s),
                "GpuSparseNms offsets");
  bytes = temp_bytes_;
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(temp_.get(), bytes, thrust::counting_iterator<int>(0),
                                           wide_flag_.get<unsigned char>(), wide_.get<int>(), scal + 1, n, s),
                "GpuSparseNms wide boxes");
  fill_kernel<<<blocks(n), kThreads, 0, s>>>(boxes_.get<float4>(), groups_.get<int>(), counts_.get<int>(),
                                             offsets_.get<int>(), scal, d.e, side, ekeys_[0].get<unsigned>(),
                                             eranks_[0].get<int>());
  SL_CUDA_CHECK(cudaGetLastError(), "GpuSparseNms entries");
  // The sizes the next launches take: one wait for the device.
  int sizes[2] = {0, 0}, entries = 0;
  SL_CUDA_CHECK(cudaMemcpyAsync(sizes, scal, 2 * sizeof(int), cudaMemcpyDeviceToHost, s), "GpuSparseNms sizes");
  SL_CUDA_CHECK(cudaMemcpyAsync(&entries, offsets_.get<int>() + n, sizeof(int), cudaMemcpyDeviceToHost, s),
                "GpuSparseNms sizes");
  SL_CUDA_CHECK(cudaStreamSynchronize(s), "GpuSparseNms sizes");
  const int num_valid = sizes[0], num_wide = sizes[1];
  int which = 0;
  if (entries > 0) {
    cub::DoubleBuffer<unsigned> k(ekeys_[0].get<unsigned>(), ekeys_[1].get<unsigned>());
    cub::DoubleBuffer<int> v(eranks_[0].get<int>(), eranks_[1].get<int>());
    bytes = temp_bytes_;
    SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.get(), bytes, k, v, entries, 0, 32, s), "GpuSparseNms cells");
    which = k.selector;
    SL_REQUIRE(v.selector == which, "GpuSparseNms: the entry sort's buffers disagree");
    heads_kernel<<<blocks(entries), kThreads, 0, s>>>(k.Current(), entries, seg_.get<int>());
    bytes = temp_bytes_;
    SL_CUDA_CHECK(cub::DeviceScan::InclusiveScan(temp_.get(), bytes, seg_.get<int>(), seg_.get<int>(), MaxOp{}, entries, s),
                  "GpuSparseNms cell starts");
  }
  init_kernel<<<blocks(n), kThreads, 0, s>>>(live_.get<unsigned char>(), counts_.get<int>(), scal, n, state_.get<unsigned char>(),
                                             left_.get<int>(), found_.get<unsigned char>(), wcursor_.get<int>());
  SL_CUDA_CHECK(cudaGetLastError(), "GpuSparseNms init");
  if (num_valid > 0) {
    Rounds R{boxes_.get<float4>(), groups_.get<int>(), eranks_[which].get<int>(), seg_.get<int>(), wide_.get<int>(),
             num_wide, wcursor_.get<int>(), wide_flag_.get<unsigned char>(), state_.get<unsigned char>(),
             left_.get<int>(), found_.get<unsigned char>(), entries, num_valid, d,
             reinterpret_cast<unsigned*>(scal + 4), {elist_[0].get<int>(), elist_[1].get<int>()},
             {blist_[0].get<int>(), blist_[1].get<int>()}, scal + 8, scal + 11, scal + 2};
    void* args[] = {&R};
    SL_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(rounds_kernel), dim3(unsigned(grid_)),
                                              dim3(kThreads), args, 0, s),
                  "GpuSparseNms rounds");
  }
  keep_flags_kernel<<<blocks(n), kThreads, 0, s>>>(state_.get<unsigned char>(), scal, n, flags_.get<unsigned char>());
  bytes = temp_bytes_;
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(temp_.get(), bytes, order_.get<int>(), flags_.get<unsigned char>(), keep_out,
                                           count_out, n, s),
                "GpuSparseNms keep");
  cap_kernel<<<1, 1, 0, s>>>(count_out, o.max_outputs);
  SL_CUDA_CHECK(cudaGetLastError(), "GpuSparseNms keep");
}

int GpuSparseNms::last_rounds() const {
  int rounds = 0;
  SL_CUDA_CHECK(cudaMemcpy(&rounds, small_.get<int>() + 2, sizeof(int), cudaMemcpyDeviceToHost), "GpuSparseNms rounds");
  return rounds;
}

}  // namespace scenelab::nms
