// What the GPU NMS kernels share (nms_cuda.cu, nms_sparse_cuda.cu): the options on the device,
// the overlap as nms::overlap computes it (the same float operations; the files are built with
// --fmad=false), and the descending score keys of the ranking. Included in an anonymous
// namespace's place: each file has its own copies.
#pragma once
#include "nms/nms_cuda.h"

namespace scenelab::nms {
namespace {

struct DevOptions {
  float threshold;
  float score_threshold;
  int iou;  // 1: IoU, 0: over candidate
  float e;  // 1 with pixel_inclusive
  int max_outputs;
};

DevOptions dev_options(const Options& o) {
  return {o.threshold, o.score_threshold, o.criterion == Criterion::IoU ? 1 : 0,
          o.pixel_inclusive ? 1.f : 0.f, o.max_outputs};
}

// The same operations, in the same order, as nms::overlap on the CPU.
__device__ __forceinline__ float overlap_dev(float4 a, float4 b, const DevOptions& o) {
  const float iw = fminf(a.z, b.z) - fmaxf(a.x, b.x) + o.e;
  const float ih = fminf(a.w, b.w) - fmaxf(a.y, b.y) + o.e;
  const float aa = fmaxf(0.f, a.z - a.x + o.e) * fmaxf(0.f, a.w - a.y + o.e);
  const float ab = fmaxf(0.f, b.z - b.x + o.e) * fmaxf(0.f, b.w - b.y + o.e);
  if (iw <= 0.f || ih <= 0.f || aa <= 0.f || ab <= 0.f) return 0.f;
  const float inter = iw * ih;
  const float den = o.iou ? aa + ab - inter : aa;
  return den > 0.f ? inter / den : 0.f;
}

// Descending-sortable 32-bit key of a valid score (never 0: the smallest, -Inf, maps to
// 0x007fffff); invalid boxes (NaN, below the score threshold) get key 0 and sort last.
// -0 is made +0 so that it ties with +0 as on the CPU.
__global__ void make_keys_kernel(const float* scores, int n, DevOptions o, unsigned* keys,
                                 int* idx) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = scores[i];
  bool valid = !isnan(s) && s >= o.score_threshold;
  unsigned u = __float_as_uint(s + 0.f);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  keys[i] = valid ? u : 0u;
  idx[i] = i;
}

}  // namespace
}  // namespace scenelab::nms
