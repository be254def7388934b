// GPU sliding-window head (see sliding_window.h); the arithmetic is sliding_window_box.h's,
// shared with the CPU path. Built with --fmad=false.
#include <cub/device/device_select.cuh>

#include <algorithm>

#include "nms/sliding_window.h"
#include "nms/sliding_window_box.h"

namespace scenelab::nms {
namespace {

constexpr int kMaxSizes = 64;
struct SizeTable {
  int n;
  int h[kMaxSizes], w[kMaxSizes], nx[kMaxSizes], stride[kMaxSizes], begin[kMaxSizes + 1];
  float bonus[kMaxSizes];
};

// g = nullptr: every size that fits (the bound reserve() sizes buffers by).
int count_windows(int H, int W, const WindowHeadOptions& o, const MapGeometry* g, SizeTable* t) {
  SL_REQUIRE(int(o.sizes.size()) <= kMaxSizes, "window head: at most ", kMaxSizes, " sizes");
  int total = 0, k = 0;
  for (const SlidSize& z : slid_sizes(H, W, o, g)) {
    const int ny = (H - z.h) / z.stride + 1, nx = (W - z.w) / z.stride + 1;
    if (t) t->h[k] = z.h, t->w[k] = z.w, t->nx[k] = nx, t->stride[k] = z.stride, t->begin[k] = total,
           t->bonus[k] = z.bonus;
    total += ny * nx;
    ++k;
  }
  if (t) t->n = k, t->begin[k] = total;
  return total;
}

// The integral image S, (H+1) x (W+1) with a zero first row and column, of the probabilities
// in fixed point. Integer sums: any order of addition gives the CPU's values exactly.
// Rows: a warp a row, a warp-wide inclusive scan of 32 columns at a time plus the carry; it also
// writes the zero column (and row 0, by the first row's warp).
__global__ void row_prefix_kernel(const float* __restrict__ prob, int H, int W, int64_t* __restrict__ S) {
  const int lane = threadIdx.x & 31;
  const int y = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (y >= H) return;
  int64_t* row = S + size_t(y + 1) * (W + 1);
  if (lane == 0) row[0] = 0;
  if (y == 0)
    for (int x = lane; x <= W; x += 32) S[x] = 0;
  int64_t carry = 0;
  for (int x0 = 0; x0 < W; x0 += 32) {
    const int x = x0 + lane;
    int64_t v = x < W ? window_fixed(prob[size_t(y) * W + x]) : 0;
    for (int d = 1; d < 32; d <<= 1) {
      const int64_t u = __shfl_up_sync(0xffffffffu, v, d);
      if (lane >= d) v += u;
    }
    v += carry;
    if (x < W) row[x + 1] = v;
    carry = __shfl_sync(0xffffffffu, v, 31);
  }
}

// Columns: a thread a column, the running sum in a register, 8 rows loaded before they are added
// (independent loads in flight rather than one load after each store).
__global__ void col_prefix_kernel(int H, int W, int64_t* __restrict__ S) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x + 1;
  if (x > W) return;
  const size_t pitch = size_t(W) + 1;
  int64_t acc = 0;
  int y = 1;
  for (; y + 8 <= H + 1; y += 8) {
    int64_t v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = S[size_t(y + k) * pitch + x];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      acc += v[k];
      S[size_t(y + k) * pitch + x] = acc;
    }
  }
  for (; y <= H; ++y) {
    acc += S[size_t(y) * pitch + x];
    S[size_t(y) * pitch + x] = acc;
  }
}

// Window idx's size (returned: its index in t) and position.
__device__ int decode(const SizeTable& t, int idx, int* h, int* w, int* y, int* x) {
  int s = 0, hi = t.n - 1;  // the last size whose first window is at or before idx
  while (s < hi) {
    const int mid = (s + hi + 1) / 2;
    if (t.begin[mid] <= idx) s = mid;
    else hi = mid - 1;
  }
  const int r = idx - t.begin[s];
  *h = t.h[s];
  *w = t.w[s];
  *y = (r / t.nx[s]) * t.stride[s];
  *x = (r % t.nx[s]) * t.stride[s];
  return s;
}

__global__ void window_kernel(const int64_t* S, int H, int W, SizeTable t, float ring,
                              float threshold, int total, uint8_t* flags, int* idx) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  int h, w, y, x;
  decode(t, i, &h, &w, &y, &x);
  flags[i] = window_objectness(S, H, W, y, x, h, w, ring) >= threshold;
  idx[i] = i;
}

__global__ void candidate_kernel(const int64_t* S, int H, int W, SizeTable t, float ring,
                                 const int* cand_idx, const int* count, MapGeometry g,
                                 int image_w, int image_h, float4* boxes, float* scores) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= *count) return;
  int h, w, y, x;
  const int s = decode(t, cand_idx[k], &h, &w, &y, &x);
  const Box b = window_box(y, x, h, w, g, image_w, image_h);
  boxes[k] = make_float4(b.x1, b.y1, b.x2, b.y2);
  scores[k] = window_objectness(S, H, W, y, x, h, w, ring) + t.bonus[s];  // as the CPU adds it
}

}  // namespace

void GpuWindowHead::reserve(int H, int W, const WindowHeadOptions& o) {
  const int plane = H * W, windows = std::max(1, count_windows(H, W, o, nullptr, nullptr));
  if (plane > max_plane_) {
    integral_.resize(size_t(H + 1) * (W + 1) * sizeof(int64_t), "window head integral");
    max_plane_ = plane;
  }
  if (windows > max_windows_) {
    flags_.resize(size_t(windows), "window head flags");
    idx_all_.resize(size_t(windows) * sizeof(int), "window head indices");
    cand_idx_.resize(size_t(windows) * sizeof(int), "window head candidates");
    cand_boxes_.resize(size_t(windows) * sizeof(float4), "window head boxes");
    cand_scores_.resize(size_t(windows) * sizeof(float), "window head scores");
    keep_.resize(size_t(windows) * sizeof(int), "window head keep");
    size_t bytes = 0;
    SL_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, bytes, (int*)nullptr, (uint8_t*)nullptr,
                                             (int*)nullptr, (int*)nullptr, windows),
                  "window head: compaction workspace size");
    cub_temp_.resize(bytes, "window head compaction workspace");
    cub_bytes_ = bytes;
    max_windows_ = windows;
  }
  count_.resize(sizeof(int), "window head count");
  keep_count_.resize(sizeof(int), "window head keep count");
}

std::vector<Detection> GpuWindowHead::detect(const float* prob, int H, int W, int cls,
                                             const WindowHeadOptions& o, const MapGeometry& g,
                                             int image_w, int image_h, cudaStream_t s) {
  SizeTable t{};
  const int total = count_windows(H, W, o, &g, &t);
  SL_REQUIRE(H * W <= max_plane_ && total <= max_windows_, "window head: map ", W, "x", H,
             " exceeds the reserved size (call reserve())");
  if (total == 0) return {};
  auto* S = integral_.get<int64_t>();
  row_prefix_kernel<<<(H + 3) / 4, 128, 0, s>>>(prob, H, W, S);  // 4 rows (warps) a block
  col_prefix_kernel<<<(W + 63) / 64, 64, 0, s>>>(H, W, S);
  window_kernel<<<(total + 255) / 256, 256, 0, s>>>(S, H, W, t, o.ring, o.threshold, total,
                                                    flags_.get<uint8_t>(), idx_all_.get<int>());
  SL_CUDA_CHECK(cudaGetLastError(), "window head kernels");
  size_t bytes = cub_bytes_;
  SL_CUDA_CHECK(cub::DeviceSelect::Flagged(cub_temp_.get(), bytes, idx_all_.get<int>(),
                                           flags_.get<uint8_t>(), cand_idx_.get<int>(),
                                           count_.get<int>(), total, s),
                "window head compaction");
  int count = 0;
  SL_CUDA_CHECK(cudaMemcpyAsync(&count, count_.get(), sizeof(int), cudaMemcpyDeviceToHost, s),
                "window head candidate count");
  SL_CUDA_CHECK(cudaStreamSynchronize(s), "window head candidate count");
  if (count == 0) return {};
  candidate_kernel<<<(count + 255) / 256, 256, 0, s>>>(S, H, W, t, o.ring, cand_idx_.get<int>(),
                                                       count_.get<int>(), g, image_w, image_h,
                                                       cand_boxes_.get<float4>(),
                                                       cand_scores_.get<float>());
  SL_CUDA_CHECK(cudaGetLastError(), "window head candidate_kernel");
  nms_.greedy(DeviceBoxes{cand_boxes_.get<float4>(), cand_scores_.get<float>(), nullptr, count}, o.nms,
              keep_.get<int>(), keep_count_.get<int>(), s);
  int kept = 0;
  SL_CUDA_CHECK(cudaMemcpyAsync(&kept, keep_count_.get(), sizeof(int), cudaMemcpyDeviceToHost, s),
                "window head kept count");
  SL_CUDA_CHECK(cudaStreamSynchronize(s), "window head kept count");
  std::vector<int> keep(static_cast<size_t>(kept));
  std::vector<float4> boxes(static_cast<size_t>(count));
  std::vector<float> scores(static_cast<size_t>(count));
  SL_CUDA_CHECK(cudaMemcpy(keep.data(), keep_.get(), size_t(kept) * sizeof(int), cudaMemcpyDeviceToHost), "window head keep");
  SL_CUDA_CHECK(cudaMemcpy(boxes.data(), cand_boxes_.get(), size_t(count) * sizeof(float4), cudaMemcpyDeviceToHost), "window head boxes");
  SL_CUDA_CHECK(cudaMemcpy(scores.data(), cand_scores_.get(), size_t(count) * sizeof(float), cudaMemcpyDeviceToHost), "window head scores");
  std::vector<Detection> out;
  for (int k : keep) {
    const float4 b = boxes[size_t(k)];
    out.push_back({{b.x, b.y, b.z, b.w}, scores[size_t(k)], cls});
  }
  return out;
}

}  // namespace scenelab::nms
