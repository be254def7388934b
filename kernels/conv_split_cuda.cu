// The fp32 convolution on TF32 tensor cores (--conv split; kernels/conv_cuda.h): the input's
// two-piece split into the 3*cin-channel NHWC tensor, the weights' matching split (once), and
// the NHWC float result back to NCHW with the bias and the ReLU.

#include "kernels/conv_cuda.h"

namespace scenelab::cuda {
namespace {

constexpr int kTile = 32;  // pixels of a row (split) / pixels and channels (transpose) a block

// x = big + small (+ what is dropped): big is x rounded to TF32's 10-bit mantissa (its low 13
// bits zero, so the tensor cores take it exactly), small is the rest (x - big, exact in fp32)
// rounded the same way: taken exactly too, so the tensor cores' truncation of their inputs never
// applies, and what is dropped (at most 2^-22 of |x|) is rounded to nearest, without bias.
struct Pieces {
  float big, small;
};
__device__ __forceinline__ float to_tf32(float x) {
  const unsigned u = __float_as_uint(x);
  // to nearest (ties away from zero) on the magnitude; Inf and NaN stay as they are
  return (u & 0x7f800000u) == 0x7f800000u ? x : __uint_as_float((u + 0x1000u) & 0xffffe000u);
}
__device__ __forceinline__ Pieces split2(float x) {
  Pieces p;
  p.big = to_tf32(x);
  p.small = isfinite(x) ? to_tf32(x - p.big) : 0.f;
  return p;
}
// The piece a slot group holds: the input [big big small], the weights [big small big], so the
// three groups of the convolution's channels multiply big*big, big*small and small*big.
__device__ __forceinline__ float input_piece(const Pieces& p, int g) { return g < 2 ? p.big : p.small; }
__device__ __forceinline__ float weight_piece(const Pieces& p, int g) { return g == 1 ? p.small : p.big; }

// A block: 32 pixels of one row of one image, the channels in chunks of 32 through shared memory
// (reads coalesced along the row, writes along the channels).
__global__ void split_input_kernel(const float* __restrict__ x, int cin, int h, int w, int cp,
                                   float* __restrict__ out) {
  __shared__ float t[kTile][kTile + 1];  // [channel][pixel]
  const int x0 = blockIdx.x * kTile, y = blockIdx.y, b = blockIdx.z;
  const int px = min(kTile, w - x0);
  const size_t plane = size_t(h) * w;
  const float* src = x + size_t(b) * cin * plane + size_t(y) * w + x0;
  float* dst = out + ((size_t(b) * h + y) * w + x0) * cp;
  for (int c0 = 0; c0 < cin; c0 += kTile) {
    const int cc = min(kTile, cin - c0);
    __syncthreads();
    for (int i = threadIdx.x; i < kTile * kTile; i += blockDim.x) {
      const int c = i / kTile, p = i % kTile;
      if (c < cc && p < px) t[c][p] = src[size_t(c0 + c) * plane + p];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < px * 3 * cc; i += blockDim.x) {
      const int c = i % cc, g = (i / cc) % 3, p = i / (3 * cc);
      dst[size_t(p) * cp + g * cin + c0 + c] = input_piece(split2(t[c][p]), g);
    }
  }
  const int pad = cp - 3 * cin;  // zero channels up to a multiple of 4 (16 bytes)
  for (int i = threadIdx.x; i < px * pad; i += blockDim.x) dst[size_t(i / pad) * cp + 3 * cin + i % pad] = 0.f;
}

// One thread a KRSC element: OIHW float -> (cout, k, k, cp) float pieces.
__global__ void split_weights_kernel(const float* __restrict__ w, int cout, int cin, int k, int cp,
                                     float* __restrict__ out) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t total = size_t(cout) * k * k * cp;
  if (i >= total) return;
  const int slot = int(i % cp);
  const size_t rs = (i / cp) % (size_t(k) * k);
  const size_t o = i / (size_t(cp) * k * k);
  if (slot >= 3 * cin) {
    out[i] = 0.f;
    return;
  }
  const int g = slot / cin, ci = slot % cin;
  out[i] = weight_piece(split2(w[(o * cin + ci) * k * k + rs]), g);
}

// NHWC (pixels x c) -> NCHW (c x pixels) through a 32 x 32 shared tile, bias and ReLU on the way.
__global__ void nhwc_to_nchw_bias_act_kernel(const float* __restrict__ y, int c, size_t pixels,
                                             const float* __restrict__ bias, bool relu,
                                             float* __restrict__ out) {
  __shared__ float t[kTile][kTile + 1];  // [pixel][channel]
  const size_t p0 = size_t(blockIdx.x) * kTile;
  const int c0 = blockIdx.y * kTile, b = blockIdx.z;
  const float* src = y + size_t(b) * pixels * c;
  float* dst = out + size_t(b) * c * pixels;
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {  // r: pixel, lanes: channels
    const size_t p = p0 + r;
    const int ch = c0 + threadIdx.x;
    if (p < pixels && ch < c) t[r][threadIdx.x] = src[p * c + ch];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {  // r: channel, lanes: pixels
    const int ch = c0 + r;
    const size_t p = p0 + threadIdx.x;
    if (p >= pixels || ch >= c) continue;
    float v = t[threadIdx.x][r] + (bias ? bias[ch] : 0.f);
    if (relu) v = fmaxf(v, 0.f);
    dst[size_t(ch) * pixels + p] = v;
  }
}

}  // namespace

int split_channels(int cin) { return (3 * cin + 3) / 4 * 4; }

void split_input(const float* x, int n, int cin, int h, int w, void* out, cudaStream_t s) {
  if (!n || !h || !w) return;
  const dim3 grid(unsigned((w + kTile - 1) / kTile), unsigned(h), unsigned(n));
  split_input_kernel<<<grid, 256, 0, s>>>(x, cin, h, w, split_channels(cin), static_cast<float*>(out));
  SL_CUDA_CHECK(cudaGetLastError(), "split convolution: the input's pieces");
}

const void* SplitWeights::get(const float* w, const ConvShape& c, cudaStream_t s) {
  if (w != of_) {
    const size_t total = size_t(c.cout) * c.k * c.k * split_channels(c.cin);
    buf_.resize(total * sizeof(float), "split convolution weights");
    split_weights_kernel<<<unsigned((total + 255) / 256), 256, 0, s>>>(
        w, c.cout, c.cin, c.k, split_channels(c.cin), static_cast<float*>(buf_.get()));
    SL_CUDA_CHECK(cudaGetLastError(), "split convolution: the weights' pieces");
    of_ = w;
  }
  return buf_.get();
}

void nhwc_to_nchw_bias_act(const float* y, int n, int c, size_t pixels, const float* b, bool relu,
                           float* out, cudaStream_t s) {
  if (!n || !c || !pixels) return;
  const dim3 grid(unsigned((pixels + kTile - 1) / kTile), unsigned((c + kTile - 1) / kTile), unsigned(n));
  nhwc_to_nchw_bias_act_kernel<<<grid, dim3(kTile, 8), 0, s>>>(y, c, pixels, b, relu, out);
  SL_CUDA_CHECK(cudaGetLastError(), "split convolution: NHWC -> NCHW with bias and ReLU");
}

}  // namespace scenelab::cuda
