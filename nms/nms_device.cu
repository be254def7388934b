// nms_on_device (scenelab/nms.h): the GPU NMS of nms/nms_cuda.h on a caller's device memory, with
// int64 classes and indices (a framework's tensors) converted on the device. Workspace per GPU
// and calling thread, grown as needed (allocation only when a call brings more boxes than before).
#include <algorithm>
#include <cmath>
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

struct Scratch {
  GpuNms nms;
  GpuSparseNms sparse;
  DeviceBuffer groups, keep, count, flags;
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

}  // namespace

int nms_on_device(const float* boxes, const float* scores, const int64_t* classes, int n, const Options& o,
                  Method method, int64_t* keep, void* stream) {
  SL_REQUIRE(n >= 0, "nms_on_device: ", n, " boxes");
  if (n == 0) return 0;
  SL_REQUIRE(boxes && scores && keep, "nms_on_device: null boxes, scores or keep");
  const int device = device_of(boxes, "boxes");
  SL_REQUIRE(device_of(scores, "scores") == device && device_of(keep, "kept indices") == device &&
                 (!classes || device_of(classes, "classes") == device),
             "nms_on_device: the boxes, scores, classes and indices must be on one GPU");
  DeviceScope scope(device);
  thread_local std::map<int, Scratch> per_device;
  Scratch& w = per_device[device];
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
    w.nms.reserve_oro(n);
    const int k = (w.nms.oro_capacity() + 1023) / 1024;
    w.flags.resize(size_t(n), "nms_on_device: flags");
    w.nms.oro(in, o, k, w.flags.get<uint8_t>(), s);
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
  if (method == Method::Greedy && n > kDenseGreedyMax && o.threshold >= 0) {
    // Past the dense path's sizes (its mask is n^2 / 64 words): the sparse greedy, same indices.
    w.sparse.reserve(n);
    w.sparse.greedy(in, o, w.keep.get<int>(), w.count.get<int>(), s);
  } else {
    w.nms.reserve(n);
    if (method == Method::Greedy) w.nms.greedy(in, o, w.keep.get<int>(), w.count.get<int>(), s);
    else w.nms.cluster(in, o, w.keep.get<int>(), w.count.get<int>(), s);
  }
  keep_to_int64<<<(n + 255) / 256, 256, 0, s>>>(w.keep.get<int>(), w.count.get<int>(), keep);
  SL_CUDA_CHECK(cudaGetLastError(), "nms_on_device: kept indices");
  SL_CUDA_CHECK(cudaMemcpyAsync(&count, w.count.get(), sizeof(int), cudaMemcpyDeviceToHost, s), "nms_on_device");
  SL_CUDA_CHECK(cudaStreamSynchronize(s), "nms_on_device");
  return count;
}

}  // namespace scenelab::nms
