// The GPU NMS's host conveniences (nms/nms_cuda.h): boxes copied in, the rule run, the kept
// indices copied out. For tests and simple callers; the hot path keeps its boxes on the device.
#include <algorithm>

#include "nms/nms_cuda.h"

namespace scenelab::nms {

namespace {

struct Uploaded {
  DeviceBuffer boxes, scores, groups, keep, count, flags;
  DeviceBoxes view;
};

Uploaded upload(const std::vector<Detection>& d, const Options& o, cudaStream_t s) {
  Uploaded u;
  const size_t n = d.size();
  std::vector<float4> b(n);
  std::vector<float> sc(n);
  std::vector<int> g(n);
  for (size_t i = 0; i < n; ++i) {
    b[i] = make_float4(d[i].box.x1, d[i].box.y1, d[i].box.x2, d[i].box.y2);
    sc[i] = d[i].score;
    g[i] = o.per_class ? d[i].cls : 0;
  }
  u.boxes.resize(std::max<size_t>(n, 1) * sizeof(float4));
  u.scores.resize(std::max<size_t>(n, 1) * sizeof(float));
  u.groups.resize(std::max<size_t>(n, 1) * sizeof(int));
  u.keep.resize(std::max<size_t>(n, 1) * sizeof(int));
  u.count.resize(sizeof(int));
  u.flags.resize(std::max<size_t>(n, 1));
  if (n) {
    SL_CUDA_CHECK(cudaMemcpyAsync(u.boxes.get(), b.data(), n * sizeof(float4), cudaMemcpyHostToDevice, s), "upload boxes");
    SL_CUDA_CHECK(cudaMemcpyAsync(u.scores.get(), sc.data(), n * sizeof(float), cudaMemcpyHostToDevice, s), "upload scores");
    SL_CUDA_CHECK(cudaMemcpyAsync(u.groups.get(), g.data(), n * sizeof(int), cudaMemcpyHostToDevice, s), "upload groups");
    SL_CUDA_CHECK(cudaStreamSynchronize(s), "upload");
  }
  u.view = {u.boxes.get<float4>(), u.scores.get<float>(), u.groups.get<int>(), int(n)};
  return u;
}

std::vector<int> download_keep(const Uploaded& u, cudaStream_t s) {
  int count = 0;
  SL_CUDA_CHECK(cudaMemcpyAsync(&count, u.count.get(), sizeof(int), cudaMemcpyDeviceToHost, s), "download count");
  SL_CUDA_CHECK(cudaStreamSynchronize(s), "download count");
  std::vector<int> keep(static_cast<size_t>(count));
  if (count)
    SL_CUDA_CHECK(cudaMemcpy(keep.data(), u.keep.get(), size_t(count) * sizeof(int), cudaMemcpyDeviceToHost), "download keep");
  return keep;
}

}  // namespace

// The boxes up, an exact greedy (GpuNms or GpuSparseNms) run on them, the kept indices down.
template <typename Nms>
std::vector<int> greedy_with(const std::vector<Detection>& d, const Options& o, Nms* given = nullptr) {
  CudaStream s;
  Uploaded u = upload(d, o, s.get());
  Nms own(given ? 0 : int(d.size()));
  Nms& nms = given ? *given : own;
  nms.reserve(int(d.size()));
  nms.greedy(u.view, o, u.keep.get<int>(), u.count.get<int>(), s.get());
  return download_keep(u, s.get());
}

std::vector<int> greedy_nms_gpu(const std::vector<Detection>& d, const Options& o) { return greedy_with<GpuNms>(d, o); }

std::vector<int> sparse_greedy_nms_gpu(const std::vector<Detection>& d, const Options& o, GpuSparseNms* nms) {
  return greedy_with<GpuSparseNms>(d, o, nms);
}

std::vector<std::vector<int>> batched_greedy_nms_gpu(const std::vector<std::vector<Detection>>& images,
                                                     const Options& o) {
  // One set: image b's box i at start[b] + i, its group image x classes + class.
  std::vector<Detection> all;
  std::vector<size_t> start;
  int classes = 1;
  for (const auto& im : images)
    for (const auto& x : im) classes = std::max(classes, o.per_class ? x.cls + 1 : 1);
  for (size_t b = 0; b < images.size(); ++b) {
    start.push_back(all.size());
    for (const auto& x : images[b]) {
      Detection y = x;
      y.cls = int(b) * classes + (o.per_class ? x.cls : 0);
      all.push_back(y);
    }
  }
  Options g = o;
  g.per_class = true;
  g.max_outputs = -1;  // a cap is per image: applied below
  const std::vector<int> kept = sparse_greedy_nms_gpu(all, g);
  std::vector<std::vector<int>> out(images.size());
  for (int k : kept) {
    const size_t b = size_t(std::upper_bound(start.begin(), start.end(), size_t(k)) - start.begin()) - 1;
    if (o.max_outputs < 0 || int(out[b].size()) < o.max_outputs) out[b].push_back(k - int(start[b]));
  }
  return out;
}

std::vector<int> cluster_nms_gpu(const std::vector<Detection>& d, const Options& o, int* iterations) {
  CudaStream s;
  Uploaded u = upload(d, o, s.get());
  GpuNms nms(int(d.size()));
  int it = nms.cluster(u.view, o, u.keep.get<int>(), u.count.get<int>(), s.get());
  if (iterations) *iterations = it;
  return download_keep(u, s.get());
}

std::vector<int> oro_nms_gpu(const std::vector<Detection>& d, const Options& o, int k, int dmax) {
  CudaStream s;
  Uploaded u = upload(d, o, s.get());
  const int n = int(d.size());
  if (dmax <= 0) dmax = std::max(k, (n + k - 1) / k * k);
  GpuNms nms;
  nms.reserve_oro(dmax);
  nms.oro(u.view, o, k, u.flags.get<uint8_t>(), s.get());
  std::vector<uint8_t> flags(static_cast<size_t>(n));
  if (n) {
    SL_CUDA_CHECK(cudaMemcpyAsync(flags.data(), u.flags.get(), size_t(n), cudaMemcpyDeviceToHost, s.get()), "download flags");
    SL_CUDA_CHECK(cudaStreamSynchronize(s.get()), "download flags");
  }
  // Kept indices in rank order, as the CPU rule reports them.
  std::vector<int> keep;
  for (int i : rank_order(d, o))
    if (flags[size_t(i)]) keep.push_back(i);
  if (o.max_outputs >= 0 && int(keep.size()) > o.max_outputs) keep.resize(size_t(o.max_outputs));
  return keep;
}

}  // namespace scenelab::nms
