// Which exact greedy path a set takes on the GPU (GreedyChooser, nms/nms_cuda.h): by its size, and
// between the bounds by the share of its boxes that no higher-ranked box of their group overlaps
// beyond the threshold, measured on a sample. Built with --fmad=false like the NMS kernels (the
// overlap is nms_dev.cuh's), though a sample's share needs no exactness. GpuGreedyNms runs the
// path chosen.
#include <algorithm>
#include <cmath>

#include "nms/nms_cuda.h"
#include "nms/nms_dev.cuh"

namespace scenelab::nms {
namespace {

constexpr int kSample = 512;   // boxes sampled, evenly over the input order
constexpr int kThreads = 256;  // a block a sampled box, its threads over the whole set

// counts[0]: valid sampled boxes; counts[1]: those of them no higher-ranked box (larger score, or
// the same score and a smaller index) of their group overlaps beyond the threshold.
__global__ void __launch_bounds__(kThreads)
survivors_kernel(const float4* boxes, const float* scores, const int* groups, int n, DevOptions o, int* counts) {
  const int i = int((long long)blockIdx.x * n / gridDim.x);
  const float si = scores[i];
  if (isnan(si) || si < o.score_threshold) return;  // the whole block: no barrier is left waiting
  const float4 bi = boxes[i];
  const int gi = groups ? groups[i] : 0;
  int hit = 0;
  for (int j = threadIdx.x; j < n && !hit; j += blockDim.x) {
    const float sj = scores[j];
    if (j == i || !(sj > si || (sj == si && j < i)) || sj < o.score_threshold) continue;  // NaN: not above
    if (groups && groups[j] != gi) continue;
    hit = overlap_dev(bi, boxes[j], o) > o.threshold;
  }
  hit = __syncthreads_or(hit);
  if (threadIdx.x == 0) {
    atomicAdd(&counts[0], 1);
    if (!hit) atomicAdd(&counts[1], 1);
  }
}

}  // namespace

bool GreedyChooser::sparse(const DeviceBoxes& in, const Options& o, cudaStream_t s) {
  share_ = -1;
  if (o.threshold < 0 || in.n <= kDenseAlways) return false;  // the sparse path needs threshold >= 0
  if (in.n > kDenseGreedyMax) return true;
  counts_.resize(2 * sizeof(int), "NMS path choice");
  SL_CUDA_CHECK(cudaMemsetAsync(counts_.get(), 0, 2 * sizeof(int), s), "NMS path choice");
  survivors_kernel<<<std::min(kSample, in.n), kThreads, 0, s>>>(in.boxes, in.scores, in.groups, in.n,
                                                                  dev_options(o), counts_.get<int>());
  SL_CUDA_CHECK(cudaGetLastError(), "NMS path choice");
  int c[2] = {0, 0};
  SL_CUDA_CHECK(cudaMemcpyAsync(c, counts_.get(), sizeof c, cudaMemcpyDeviceToHost, s), "NMS path choice");
  SL_CUDA_CHECK(cudaStreamSynchronize(s), "NMS path choice");
  share_ = c[0] ? double(c[1]) / c[0] : 0.0;
  return share_ > sparse_share_above(in.n);
}

bool GpuGreedyNms::greedy(const DeviceBoxes& in, const Options& o, int* keep_out, int* count_out, cudaStream_t s) {
  if (path_.sparse(in, o, s)) {
    sparse_.reserve(in.n);
    sparse_.greedy(in, o, keep_out, count_out, s);
    return true;
  }
  dense_.reserve(in.n);
  dense_.greedy(in, o, keep_out, count_out, s);
  return false;
}

double GreedyChooser::sparse_share_above(int n) { return 0.25 * std::pow(10000.0 / n, 1.2); }

}  // namespace scenelab::nms
