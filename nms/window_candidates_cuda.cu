// Sliding-window candidates compacted and fused on the GPU (nms/window_candidates.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "nms/window_candidates.h"

namespace scenelab::nms {

namespace {

// A score map on the device: where its scores and corner tables are, its first chunk.
struct Level {
  const float* scores;
  int rows, cols;
  int first_chunk;      // its first chunk of kChunk windows
  int left_at, top_at;  // its column and row tables in the one table buffer
  int box_w, box_h;
};

constexpr int kChunk = 256;  // windows a CTA (count and write)
constexpr int kScan = 1024;  // threads of the one-CTA scans
constexpr unsigned kFull = 0xffffffffu;

// Result layout (device, and the page-locked copy): header, then the kept boxes, scores, maps.
// The rule and max_outputs are written by the run's own kernels, so that a replayed recording
// says what it did.
struct Header {
  int hits, kept, rule, max_outputs;
};
size_t result_bytes(int cap) { return sizeof(Header) + size_t(cap) * (sizeof(float4) + sizeof(float) + sizeof(int)); }
__host__ __device__ float4* result_boxes(void* r) {
  return reinterpret_cast<float4*>(static_cast<char*>(r) + sizeof(Header));
}
__host__ __device__ float* result_scores(void* r, int cap) { return reinterpret_cast<float*>(result_boxes(r) + cap); }
__host__ __device__ int* result_maps(void* r, int cap) { return reinterpret_cast<int*>(result_scores(r, cap) + cap); }

__device__ __forceinline__ bool window_hit(const Level& L, int idx, float threshold, float* s) {
  if (idx >= L.rows * L.cols) return false;
  *s = L.scores[idx];
  return *s >= threshold;  // NaN: no hit
}

__global__ void __launch_bounds__(kChunk)
count_kernel(const Level* levels, const int* chunk_level, float threshold, int* counts) {
  const int chunk = blockIdx.x;
  const Level L = levels[chunk_level[chunk]];
  float s;
  const bool hit = window_hit(L, (chunk - L.first_chunk) * kChunk + int(threadIdx.x), threshold, &s);
  const int c = __syncthreads_count(hit);
  if (threadIdx.x == 0) counts[chunk] = c;
}

// Block-wide inclusive scan of v over kScan threads (warp shuffles, then the warp totals).
__device__ int block_inclusive_scan(int v, int* warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int x = v;
  for (int d = 1; d < 32; d <<= 1) {
    const int y = __shfl_up_sync(kFull, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int w = warp_sums[lane];
    for (int d = 1; d < 32; d <<= 1) {
      const int y = __shfl_up_sync(kFull, w, d);
      if (lane >= d) w += y;
    }
    warp_sums[lane] = w;
  }
  __syncthreads();
  const int r = x + (warp ? warp_sums[warp - 1] : 0);
  __syncthreads();  // warp_sums free for the next call
  return r;
}

// Exclusive scan of the chunk counts into offsets; the total into the header; the score slots
// past the hits (up to capacity) set to NaN, so the fusion sees them as no box.
__global__ void __launch_bounds__(kScan)
scan_kernel(const int* counts, int chunks, int* offsets, Header* header, float* scores, int capacity) {
  __shared__ int warp_sums[32];
  __shared__ int carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < chunks; base += kScan) {
    const int i = base + int(threadIdx.x);
    const int v = i < chunks ? counts[i] : 0;
    const int inc = block_inclusive_scan(v, warp_sums);
    const int c0 = carry;
    if (i < chunks) offsets[i] = c0 + inc - v;
    __syncthreads();
    if (threadIdx.x == kScan - 1) carry = c0 + inc;
    __syncthreads();
  }
  const int total = carry;
  if (threadIdx.x == 0) header->hits = total;
  for (int i = min(total, capacity) + int(threadIdx.x); i < capacity; i += kScan) scores[i] = __int_as_float(0x7fc00000);
}

__global__ void __launch_bounds__(kChunk)
write_kernel(const Level* levels, const int* chunk_level, float threshold, const int* offsets,
             const int* tables, float4* boxes, float* scores, int* map_of, int capacity) {
  __shared__ int warp_count[kChunk / 32];
  const int chunk = blockIdx.x, map = chunk_level[chunk];
  const Level L = levels[map];
  const int idx = (chunk - L.first_chunk) * kChunk + int(threadIdx.x);
  float s = 0.f;
  const bool hit = window_hit(L, idx, threshold, &s);
  const unsigned ballot = __ballot_sync(kFull, hit);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_count[warp] = __popc(ballot);
  __syncthreads();
  if (!hit) return;
  int before = __popc(ballot & ((1u << lane) - 1u));
  for (int w = 0; w < warp; ++w) before += warp_count[w];
  const int pos = offsets[chunk] + before;
  if (pos >= capacity) return;
  const int r = idx / L.cols, c = idx - r * L.cols;
  const int x = tables[L.left_at + c], y = tables[L.top_at + r];
  boxes[pos] = make_float4(float(x), float(y), float(x + L.box_w), float(y + L.box_h));
  scores[pos] = s;
  map_of[pos] = map;
}

// Greedy: the kept indices (rank order) gathered into the result.
__global__ void gather_kept_kernel(const int* keep, const int* keep_count, const float4* boxes,
                                   const float* scores, const int* map_of, void* result, int capacity) {
  const int n = *keep_count;
  Header* h = static_cast<Header*>(result);
  if (blockIdx.x == 0 && threadIdx.x == 0) h->kept = n, h->rule = int(WindowFusion::Greedy);
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x)) {
    const int k = keep[i];
    result_boxes(result)[i] = boxes[k];
    result_scores(result, capacity)[i] = scores[k];
    result_maps(result, capacity)[i] = map_of[k];
  }
}

// None / Oro: the hits (flags: those flagged) in compaction order, by one CTA's ordered scan.
__global__ void __launch_bounds__(kScan)
gather_flagged_kernel(const uint8_t* flags, const float4* boxes, const float* scores, const int* map_of,
                      void* result, int capacity, int max_outputs) {
  __shared__ int warp_sums[32];
  __shared__ int carry;
  Header* h = static_cast<Header*>(result);
  const int n = min(h->hits, capacity);
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int base = 0; base < n; base += kScan) {
    const int i = base + int(threadIdx.x);
    const int v = i < n && (!flags || flags[i]) ? 1 : 0;
    const int inc = block_inclusive_scan(v, warp_sums);
    const int c0 = carry;
    if (v) {
      const int o = c0 + inc - 1;
      result_boxes(result)[o] = boxes[i];
      result_scores(result, capacity)[o] = scores[i];
      result_maps(result, capacity)[o] = map_of[i];
    }
    __syncthreads();
    if (threadIdx.x == kScan - 1) carry = c0 + inc;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    h->kept = carry;
    h->rule = int(flags ? WindowFusion::Oro : WindowFusion::None);
    h->max_outputs = max_outputs;
  }
}

}  // namespace

void GpuWindowCandidates::plan(const std::vector<ScoreMap>& maps, int capacity, bool oro) {
  SL_REQUIRE(capacity >= 1, "window candidates: capacity must be at least 1, got ", capacity);
  std::vector<Level> lv;
  std::vector<int> chunk_level, tables;
  for (size_t m = 0; m < maps.size(); ++m) {
    const ScoreMap& s = maps[m];
    SL_REQUIRE(s.rows >= 0 && s.cols >= 0 && s.left.size() == size_t(s.cols) && s.top.size() == size_t(s.rows),
               "window candidates: map ", m, " has ", s.left.size(), " column and ", s.top.size(),
               " row corners for ", s.cols, "x", s.rows, " scores");
    Level L{s.scores, s.rows, s.cols, int(chunk_level.size()), int(tables.size()), int(tables.size()) + s.cols,
            s.box_w, s.box_h};
    tables.insert(tables.end(), s.left.begin(), s.left.end());
    tables.insert(tables.end(), s.top.begin(), s.top.end());
    const long long windows = (long long)s.rows * s.cols;
    SL_REQUIRE(windows < (1ll << 31), "window candidates: map ", m, " of ", windows, " windows is too large");
    for (long long c = 0; c < (windows + kChunk - 1) / kChunk; ++c) chunk_level.push_back(int(m));
    lv.push_back(L);
  }
  maps_ = int(lv.size());
  chunks_ = int(chunk_level.size());
  capacity_ = capacity;
  levels_.resize(std::max<size_t>(1, lv.size()) * sizeof(Level), "window candidates: levels");
  chunk_level_.resize(std::max<size_t>(1, chunk_level.size()) * sizeof(int), "window candidates: chunk table");
  tables_.resize(std::max<size_t>(1, tables.size()) * sizeof(int), "window candidates: corner tables");
  counts_.resize(std::max(1, chunks_) * sizeof(int), "window candidates: counts");
  offsets_.resize(std::max(1, chunks_) * sizeof(int), "window candidates: offsets");
  const size_t cap = size_t(capacity);
  boxes_.resize(cap * sizeof(float4), "window candidates: boxes");
  scores_.resize(cap * sizeof(float), "window candidates: scores");
  map_of_.resize(cap * sizeof(int), "window candidates: maps");
  keep_.resize(cap * sizeof(int), "window candidates: kept");
  keep_count_.resize(sizeof(int), "window candidates: kept count");
  result_.resize(result_bytes(capacity), "window candidates: result");
  host_.resize(result_bytes(capacity), "window candidates: host result");
  // run() brings the whole result back in one copy, not knowing on the host how many entries
  // the frame kept; kept() reads only those. Zeroed once here, the rest holds earlier frames'
  // entries or zeros, never bytes nothing wrote (initcheck reported the copy before).
  zero_now(result_.get(), result_bytes(capacity), "window candidates: result");
  upload_now(levels_.get(), lv.data(), lv.size() * sizeof(Level), "window candidates: levels");
  upload_now(chunk_level_.get(), chunk_level.data(), chunk_level.size() * sizeof(int),
             "window candidates: chunk table");
  upload_now(tables_.get(), tables.data(), tables.size() * sizeof(int), "window candidates: corner tables");
  nms_.reserve(capacity);
  oro_ = oro;
  if (oro) {
    nms_.reserve_oro(capacity);
    flags_.resize(size_t(capacity), "window candidates: Oro flags");
  }
  std::memset(host_.get(), 0, sizeof(Header));
}

void GpuWindowCandidates::run(float threshold, WindowFusion rule, const Options& o, cudaStream_t s) {
  SL_REQUIRE(capacity_ >= 1, "window candidates: run before plan");
  if (chunks_ > 0) {
    count_kernel<<<chunks_, kChunk, 0, s>>>(levels_.get<Level>(), chunk_level_.get<int>(), threshold,
                                            counts_.get<int>());
    SL_CUDA_CHECK(cudaGetLastError(), "window candidates: count kernel");
  }
  scan_kernel<<<1, kScan, 0, s>>>(counts_.get<int>(), chunks_, offsets_.get<int>(), result_.get<Header>(),
                                  scores_.get<float>(), capacity_);
  SL_CUDA_CHECK(cudaGetLastError(), "window candidates: scan kernel");
  if (chunks_ > 0) {
    write_kernel<<<chunks_, kChunk, 0, s>>>(levels_.get<Level>(), chunk_level_.get<int>(), threshold,
                                            offsets_.get<int>(), tables_.get<int>(), boxes_.get<float4>(),
                                            scores_.get<float>(), map_of_.get<int>(), capacity_);
    SL_CUDA_CHECK(cudaGetLastError(), "window candidates: write kernel");
  }
  const DeviceBoxes in{boxes_.get<float4>(), scores_.get<float>(), nullptr, capacity_};
  switch (rule) {
    case WindowFusion::Greedy:
      nms_.greedy(in, o, keep_.get<int>(), keep_count_.get<int>(), s);
      gather_kept_kernel<<<(capacity_ + 255) / 256, 256, 0, s>>>(keep_.get<int>(), keep_count_.get<int>(),
                                                                  boxes_.get<float4>(), scores_.get<float>(),
                                                                  map_of_.get<int>(), result_.get(), capacity_);
      SL_CUDA_CHECK(cudaGetLastError(), "window candidates: gather kernel");
      break;
    case WindowFusion::Oro: {
      SL_REQUIRE(oro_, "window candidates: Oro fusion needs a plan for it (plan(..., oro = true))");
      const int k = (nms_.oro_capacity() + kScan - 1) / kScan;
      nms_.oro(in, o, k, flags_.get<uint8_t>(), s);
      gather_flagged_kernel<<<1, kScan, 0, s>>>(flags_.get<uint8_t>(), boxes_.get<float4>(), scores_.get<float>(),
                                                map_of_.get<int>(), result_.get(), capacity_, o.max_outputs);
      SL_CUDA_CHECK(cudaGetLastError(), "window candidates: gather kernel");
      break;
    }
    case WindowFusion::None:
      gather_flagged_kernel<<<1, kScan, 0, s>>>(nullptr, boxes_.get<float4>(), scores_.get<float>(),
                                                map_of_.get<int>(), result_.get(), capacity_, -1);
      SL_CUDA_CHECK(cudaGetLastError(), "window candidates: gather kernel");
      break;
  }
  SL_CUDA_CHECK(cudaMemcpyAsync(host_.get(), result_.get(), result_bytes(capacity_), cudaMemcpyDeviceToHost, s),
                "window candidates: result to the host");
}

int GpuWindowCandidates::hits() const { return host_.get() ? host_.get<Header>()->hits : 0; }

void GpuWindowCandidates::kept(std::vector<Detection>& out, std::vector<int>& maps) const {
  SL_REQUIRE(hits() <= capacity_, "window candidates: ", hits(), " hits exceed the capacity ", capacity_,
             " (fuse on the host, or plan with a larger capacity)");
  const Header& hd = *host_.get<Header>();
  const int n = hd.kept;
  const float4* b = result_boxes(host_.get());
  const float* sc = result_scores(host_.get(), capacity_);
  const int* mp = result_maps(host_.get(), capacity_);
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (hd.rule == int(WindowFusion::Oro)) {
    // fast_nms's order: score descending, ties by input (compaction) order; then max_outputs.
    std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return sc[a] > sc[c]; });
    if (hd.max_outputs >= 0 && int(order.size()) > hd.max_outputs) order.resize(size_t(hd.max_outputs));
  }
  out.clear();
  maps.clear();
  for (int i : order) {
    out.push_back(Detection{{b[i].x, b[i].y, b[i].z, b[i].w}, sc[i], 0});
    maps.push_back(mp[i]);
  }
}

}  // namespace scenelab::nms
