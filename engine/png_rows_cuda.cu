#include "core/cuda_check.h"
#include "engine/png_rows_cuda.h"

namespace scenelab::cuda {
namespace {

constexpr int kThreads = 256;

// Byte i of row y of frame f, as plain pixels.
struct Plain {
  const uint8_t* px;
  int h, s;
  __device__ __forceinline__ int operator()(int f, int y, int i) const {
    return px[(size_t(f) * h + y) * size_t(s) + i];
  }
};

// Byte i of row y of frame f of the overlay: the pixel's byte blended with its label's colour.
struct Overlay {
  const uint8_t* rgb;
  const uint8_t* labels;
  const uint8_t* lut;
  int w256;
  int h, w;
  __device__ __forceinline__ int operator()(int f, int y, int i) const {
    const size_t row = size_t(f) * h + y;
    const int x = i / 3, k = i - 3 * x;
    const int a = rgb[row * size_t(3 * w) + i];
    const int b = lut[3 * labels[row * size_t(w) + x] + k];
    return ((256 - w256) * a + w256 * b + 128) >> 8;
  }
};

__device__ __forceinline__ int paeth(int a, int u, int c) {
  const int pa = abs(u - c), pb = abs(a - c), pc = abs(a + u - 2 * c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? u : c;
}

// The four residuals of byte i (cur v, left a, up u, up-left c; zero outside the image), in the
// order of the tie rule: up, Paeth, sub, average.
__device__ __forceinline__ void residuals(int v, int a, int u, int c, uint8_t r[4]) {
  r[0] = uint8_t(v - u);
  r[1] = uint8_t(v - paeth(a, u, c));
  r[2] = uint8_t(v - a);
  r[3] = uint8_t(v - ((a + u) >> 1));
}

// One block a row (blockIdx.x) of a frame (blockIdx.y): the four sums, the choice, the row.
template <typename Src>
__global__ void png_rows_kernel(Src src, int s, int bpp, uint8_t* __restrict__ out) {
  const int y = blockIdx.x, f = blockIdx.y, h = gridDim.x;
  auto bytes = [&](int i, uint8_t r[4]) {
    const int v = src(f, y, i);
    const int a = i >= bpp ? src(f, y, i - bpp) : 0;
    const int u = y > 0 ? src(f, y - 1, i) : 0;
    const int c = y > 0 && i >= bpp ? src(f, y - 1, i - bpp) : 0;
    residuals(v, a, u, c, r);
  };
  unsigned sum[4] = {0, 0, 0, 0};
  for (int i = threadIdx.x; i < s; i += blockDim.x) {
    uint8_t r[4];
    bytes(i, r);
    for (int k = 0; k < 4; ++k) sum[k] += unsigned(abs(int(int8_t(r[k]))));
  }
  __shared__ unsigned warp_sums[kThreads / 32][4];
  __shared__ int best;
  for (int k = 0; k < 4; ++k)
    for (int o = 16; o > 0; o >>= 1) sum[k] += __shfl_down_sync(0xffffffffu, sum[k], o);
  if ((threadIdx.x & 31) == 0)
    for (int k = 0; k < 4; ++k) warp_sums[threadIdx.x >> 5][k] = sum[k];
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned total[4] = {0, 0, 0, 0};
    for (int wp = 0; wp < int(blockDim.x) / 32; ++wp)
      for (int k = 0; k < 4; ++k) total[k] += warp_sums[wp][k];
    int b = 0;
    for (int k = 1; k < 4; ++k)
      if (total[k] < total[b]) b = k;
    best = b;
    static constexpr uint8_t kType[4] = {2, 4, 1, 3};  // up, Paeth, sub, average
    out[(size_t(f) * h + y) * size_t(s + 1)] = kType[b];
  }
  __syncthreads();
  uint8_t* o = out + (size_t(f) * h + y) * size_t(s + 1) + 1;
  const int b = best;
  for (int i = threadIdx.x; i < s; i += blockDim.x) {
    uint8_t r[4];
    bytes(i, r);
    o[i] = r[b];
  }
}

}  // namespace

void overlay_png_rows(const uint8_t* rgb, const uint8_t* labels, const uint8_t* lut, int w256,
                      int n, int h, int w, uint8_t* out, cudaStream_t s) {
  if (n <= 0 || h <= 0 || w <= 0) return;
  const Overlay src{rgb, labels, lut, w256, h, w};
  png_rows_kernel<<<dim3(unsigned(h), unsigned(n)), kThreads, 0, s>>>(src, 3 * w, 3, out);
  SL_CUDA_CHECK(cudaGetLastError(), "overlay PNG rows");
}

void png_rows(const uint8_t* px, int n, int h, int w, int bpp, uint8_t* out, cudaStream_t s) {
  if (n <= 0 || h <= 0 || w <= 0) return;
  const Plain src{px, h, w * bpp};
  png_rows_kernel<<<dim3(unsigned(h), unsigned(n)), kThreads, 0, s>>>(src, w * bpp, bpp, out);
  SL_CUDA_CHECK(cudaGetLastError(), "PNG rows");
}

}  // namespace scenelab::cuda
