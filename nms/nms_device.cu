// nms_on_device (scenelab/nms.h): the GPU NMS of nms/nms_cuda.h on a caller's device memory, with
// int64 classes and indices (a framework's tensors) converted on the device. Workspace per GPU
// and calling thread, grown as needed (allocation only when a call brings more boxes than before).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "nms/nms_cuda.h"

namespace scenelab::nms {
namespace {

__global__ void classes_to_groups(const int64_t* classes, int n, int* groups) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) groups[i] = int(classes[i]);
}

__global__ void keep_to_int64(const int* keep, const int* count, int64_t* out) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < *count) out[i] = keep[i];
}

// The batch as one set: entry i = b n + j, its score (NaN past image b's valid boxes: dropped) and
// its group, b x per_image + class; a class outside [0, per_image) raises *bad.
__global__ void batch_groups(const float* scores, const int64_t* classes, const int* valid, int batch, int n,
                             int per_image, float* masked, int* groups, int* bad) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(batch) * n) return;
  const int b = int(i / size_t(n)), j = int(i % size_t(n));
  const bool in = !valid || j < valid[b];
  masked[i] = in ? scores[i] : __int_as_float(0x7fc00000);
  int64_t c = classes ? classes[i] : 0;
  if (c < 0 || c >= per_image) {
    if (in) atomicExch(bad, 1);
    c = 0;
  }
  groups[i] = b * per_image + int(c);
}

// Kept entry k (of *count, in rank order): its image as the sort key (past the count: batch, last)
// and its count per image.
__global__ void kept_images(const int* keep, const int* count, int total, int n, int batch, int* image, int* per_image) {
  const int k = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (k >= total) return;
  const int b = k < *count ? keep[k] / n : batch;
  image[k] = b;
  if (b < batch) atomicAdd(&per_image[b], 1);
}

// Sorted by image (stably: rank order within each), entry p goes to image b's slot p - start[b].
__global__ void place_kept(const int* image, const int* kept, const int* count, const int* start, int n,
                           int max_outputs, int64_t* out) {
  const int p = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (p >= *count) return;
  const int b = image[p], local = p - start[b];
  if (max_outputs < 0 || local < max_outputs) out[size_t(b) * n + local] = kept[p] - int64_t(b) * n;
}

struct Scratch {
  GpuGreedyNms nms;
  DeviceBuffer groups, keep, count, flags;
  // batched: scores masked by the valid counts, valid counts, class check, kept images (and sorted),
  // kept sorted by image, counts and first slots per image, the sort's and the scan's workspace
  DeviceBuffer masked, valid, bad, image, image_sorted, kept_sorted, per_image, start, temp;
};

// The device the memory is on (it must be device memory).
int device_of(const void* p, const char* what) {
  cudaPointerAttributes a{};
  SL_CUDA_CHECK(cudaPointerGetAttributes(&a, p), "nms_on_device: where the memory is");
  SL_REQUIRE(a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged, "nms_on_device: the ", what,
             " are not in GPU memory");
  return a.device;
}

// Makes `device` current for the scope.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    SL_CUDA_CHECK(cudaGetDevice(&old_), "nms_on_device");
    if (device != old_) SL_CUDA_CHECK(cudaSetDevice(device), "nms_on_device");
  }
  ~DeviceScope() { cudaSetDevice(old_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int old_ = 0;
};

// The one GPU that the boxes, scores, classes (if any) and the kept indices are all on.
int common_device(const float* boxes, const float* scores, const int64_t* classes, const int64_t* keep,
                  const char* who) {
  SL_REQUIRE(boxes && scores && keep, who, ": null boxes, scores or keep");
  const int device = device_of(boxes, "boxes");
  SL_REQUIRE(device_of(scores, "scores") == device && device_of(keep, "kept indices") == device &&
                 (!classes || device_of(classes, "classes") == device),
             who, ": the boxes, scores, classes and indices must be on one GPU");
  return device;
}

// The calling thread's workspace on `device` (current), shared by the single and the batched call.
Scratch& scratch_on(int device) {
  thread_local std::map<int, Scratch> per_device;
  return per_device[device];
}

}  // namespace

int nms_on_device(const float* boxes, const float* scores, const int64_t* classes, int n, const Options& o,
                  Method method, int64_t* keep, void* stream) {
  SL_REQUIRE(n >= 0, "nms_on_device: ", n, " boxes");
  if (n == 0) return 0;
  const int device = common_device(boxes, scores, classes, keep, "nms_on_device");
  DeviceScope scope(device);
  Scratch& w = scratch_on(device);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int* groups = nullptr;
  if (classes && o.per_class) {
    w.groups.resize(size_t(n) * sizeof(int), "nms_on_device: classes");
    classes_to_groups<<<(n + 255) / 256, 256, 0, s>>>(classes, n, w.groups.get<int>());
    SL_CUDA_CHECK(cudaGetLastError(), "nms_on_device: classes");
    groups = w.groups.get<int>();
  }
  const DeviceBoxes in{reinterpret_cast<const float4*>(boxes), scores, groups, n};
  w.count.resize(sizeof(int), "nms_on_device: count");
  int count = 0;
  if (method == Method::Oro) {
    // Oro's keep flags, then the kept indices in rank order (score descending, ties by index),
    // as fast_nms: the flags and scores come to the host for that.
    GpuNms& dense = w.nms.dense();
    dense.reserve_oro(n);
    const int k = (dense.oro_capacity() + 1023) / 1024;
    w.flags.resize(size_t(n), "nms_on_device: flags");
    dense.oro(in, o, k, w.flags.get<uint8_t>(), s);
    std::vector<uint8_t> flags(static_cast<size_t>(n));
    std::vector<float> sc(static_cast<size_t>(n));
    SL_CUDA_CHECK(cudaMemcpyAsync(flags.data(), w.flags.get(), size_t(n), cudaMemcpyDeviceToHost, s), "nms_on_device");
    SL_CUDA_CHECK(cudaMemcpyAsync(sc.data(), scores, size_t(n) * sizeof(float), cudaMemcpyDeviceToHost, s),
                  "nms_on_device");
    SL_CUDA_CHECK(cudaStreamSynchronize(s), "nms_on_device");
    std::vector<int64_t> kept;
    for (int i = 0; i < n; ++i)
      if (flags[size_t(i)]) kept.push_back(i);
    std::stable_sort(kept.begin(), kept.end(), [&](int64_t a, int64_t b) { return sc[size_t(a)] > sc[size_t(b)]; });
    if (o.max_outputs >= 0 && int(kept.size()) > o.max_outputs) kept.resize(size_t(o.max_outputs));
    count = int(kept.size());
    if (count)
      SL_CUDA_CHECK(cudaMemcpyAsync(keep, kept.data(), kept.size() * sizeof(int64_t), cudaMemcpyHostToDevice, s),
                    "nms_on_device");
    SL_CUDA_CHECK(cudaStreamSynchronize(s), "nms_on_device");
    return count;
  }
  w.keep.resize(size_t(n) * sizeof(int), "nms_on_device: kept");
  if (method == Method::Greedy) {
    w.nms.greedy(in, o, w.keep.get<int>(), w.count.get<int>(), s);  // dense or sparse: the same indices
  } else {
    w.nms.dense().reserve(n);
    w.nms.dense().cluster(in, o, w.keep.get<int>(), w.count.get<int>(), s);
  }
  keep_to_int64<<<(n + 255) / 256, 256, 0, s>>>(w.keep.get<int>(), w.count.get<int>(), keep);
  SL_CUDA_CHECK(cudaGetLastError(), "nms_on_device: kept indices");
  SL_CUDA_CHECK(cudaMemcpyAsync(&count, w.count.get(), sizeof(int), cudaMemcpyDeviceToHost, s), "nms_on_device");
  SL_CUDA_CHECK(cudaStreamSynchronize(s), "nms_on_device");
  return count;
}

std::vector<int> batched_nms_on_device(const float* boxes, const float* scores, const int64_t* classes,
                                       const int64_t* valid, int batch, int n, const Options& o, int64_t* keep,
                                       void* stream) {
  SL_REQUIRE(batch >= 0 && n >= 0, "batched_nms_on_device: ", batch, " images of ", n, " boxes");
  SL_REQUIRE(size_t(batch) * size_t(n) <= size_t(std::numeric_limits<int>::max()),
             "batched_nms_on_device: ", batch, " x ", n, " boxes exceed 2^31 in all");
  std::vector<int> counts(static_cast<size_t>(batch), 0);
  const int total = batch * n;
  if (total == 0) return counts;
  SL_REQUIRE(o.threshold >= 0, "batched_nms_on_device: the threshold must be >= 0, got ", o.threshold);
  std::vector<int> valid32(static_cast<size_t>(batch), n);
  for (int b = 0; valid && b < batch; ++b) {
    SL_REQUIRE(valid[b] >= 0 && valid[b] <= n, "batched_nms_on_device: valid[", b, "] is ", valid[b], ", expected 0..",
               n);
    valid32[size_t(b)] = int(valid[b]);
  }
  const int device = common_device(boxes, scores, classes, keep, "batched_nms_on_device");
  DeviceScope scope(device);
  Scratch& w = scratch_on(device);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const size_t N = size_t(total);
  w.masked.resize(N * sizeof(float), "batched NMS: scores");
  w.groups.resize(N * sizeof(int), "batched NMS: groups");
  w.valid.resize(size_t(batch) * sizeof(int), "batched NMS: valid counts");
  w.bad.resize(sizeof(int), "batched NMS: class check");
  w.keep.resize(N * sizeof(int), "batched NMS: kept");
  w.count.resize(sizeof(int), "batched NMS: count");
  w.image.resize(N * sizeof(int), "batched NMS: kept images");
  w.image_sorted.resize(N * sizeof(int), "batched NMS: kept images");
  w.kept_sorted.resize(N * sizeof(int), "batched NMS: kept by image");
  w.per_image.resize(size_t(batch) * sizeof(int), "batched NMS: counts");
  w.start.resize(size_t(batch) * sizeof(int), "batched NMS: first slots");
  int bits = 1;
  while ((1ll << bits) <= batch) ++bits;  // image keys 0..batch
  size_t sort_bytes = 0, scan_bytes = 0;
  SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (int*)nullptr, (int*)nullptr, (int*)nullptr,
                                                (int*)nullptr, total, 0, bits, s),
                "batched NMS: sort workspace");
  SL_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, (int*)nullptr, (int*)nullptr, batch, s),
                "batched NMS: scan workspace");
  w.temp.resize(std::max(sort_bytes, scan_bytes), "batched NMS: workspace");
  SL_CUDA_CHECK(cudaMemcpyAsync(w.valid.get(), valid32.data(), valid32.size() * sizeof(int), cudaMemcpyHostToDevice, s),
                "batched NMS: valid counts");
  SL_CUDA_CHECK(cudaMemsetAsync(w.bad.get(), 0, sizeof(int), s), "batched NMS: class check");
  SL_CUDA_CHECK(cudaMemsetAsync(w.per_image.get(), 0, size_t(batch) * sizeof(int), s), "batched NMS: counts");
  const int per_image = std::numeric_limits<int>::max() / batch;
  const unsigned blocks = unsigned((N + 255) / 256);
  batch_groups<<<blocks, 256, 0, s>>>(scores, classes && o.per_class ? classes : nullptr, w.valid.get<int>(), batch,
                                      n, per_image, w.masked.get<float>(), w.groups.get<int>(), w.bad.get<int>());
  SL_CUDA_CHECK(cudaGetLastError(), "batched NMS: groups");
  Options g = o;
  g.per_class = true;
  g.max_outputs = -1;  // a cap is per image: applied when placing
  const DeviceBoxes in{reinterpret_cast<const float4*>(boxes), w.masked.get<float>(), w.groups.get<int>(), total};
  w.nms.greedy(in, g, w.keep.get<int>(), w.count.get<int>(), s);
  kept_images<<<blocks, 256, 0, s>>>(w.keep.get<int>(), w.count.get<int>(), total, n, batch, w.image.get<int>(),
                                     w.per_image.get<int>());
  SL_CUDA_CHECK(cudaGetLastError(), "batched NMS: kept images");
  size_t bytes = sort_bytes;
  SL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(w.temp.get(), bytes, w.image.get<int>(), w.image_sorted.get<int>(),
                                                w.keep.get<int>(), w.kept_sorted.get<int>(), total, 0, bits, s),
                "batched NMS: by image");
  bytes = scan_bytes;
  SL_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(w.temp.get(), bytes, w.per_image.get<int>(), w.start.get<int>(), batch, s),
                "batched NMS: first slots");
  place_kept<<<blocks, 256, 0, s>>>(w.image_sorted.get<int>(), w.kept_sorted.get<int>(), w.count.get<int>(),
                                    w.start.get<int>(), n, o.max_outputs, keep);
  SL_CUDA_CHECK(cudaGetLastError(), "batched NMS: placing");
  int bad = 0;
  SL_CUDA_CHECK(cudaMemcpyAsync(counts.data(), w.per_image.get(), size_t(batch) * sizeof(int), cudaMemcpyDeviceToHost, s),
                "batched NMS: counts");
  SL_CUDA_CHECK(cudaMemcpyAsync(&bad, w.bad.get(), sizeof(int), cudaMemcpyDeviceToHost, s), "batched NMS: class check");
  SL_CUDA_CHECK(cudaStreamSynchronize(s), "batched NMS");
  SL_REQUIRE(!bad, "batched_nms_on_device: a class outside [0, ", per_image, ") (2^31 / images)");
  if (o.max_outputs >= 0)
    for (int& c : counts) c = std::min(c, o.max_outputs);
  return counts;
}

}  // namespace scenelab::nms
