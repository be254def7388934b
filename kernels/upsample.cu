// GPU kernels of the upsample layer (layers/upsample.cpp; taps in layers/upsample_taps.h), and the
// upsample fused with the argmax that follows it (upsample_argmax).
// Launchers declared in kernels/layers_cuda.h; shared helpers in kernels/common.cuh.
#include "kernels/common.cuh"
#include "kernels/layers_cuda.h"
#include "layers/upsample_taps.h"

namespace scenelab::cuda {
namespace {

// One resampling, as every kernel here takes it: c channels (planes, for NCHW f32), hi x wi in,
// ho x wo out; the taps of output row oy (col: column ox) in the input, by the two maps' geometry
// where `geometry`, else by the sizes alone.
struct Resample {
  int c, hi, wi, ho, wo;
  bool geometry, bilinear;
  Geometry gi, go;
  __device__ __forceinline__ UpsampleTap row(int oy) const {
    return upsample_tap(oy, hi, ho, geometry, bilinear, gi.offset_y, gi.stride_y, go.offset_y, go.stride_y);
  }
  __device__ __forceinline__ UpsampleTap col(int ox) const {
    return upsample_tap(ox, wi, wo, geometry, bilinear, gi.offset_x, gi.stride_x, go.offset_x, go.stride_x);
  }
};

__global__ void upsample_kernel(const float* x, float* y, Resample r) {
  const int hi = r.hi, wi = r.wi, ho = r.ho, wo = r.wo;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(r.c) * ho * wo) return;
  const auto [p, oy, ox] = plane_pixel(i, ho, wo);
  const UpsampleTap t = r.row(oy), u = r.col(ox);
  const float* r0 = x + p * hi * wi + size_t(t.i0) * wi;
  const float* r1 = x + p * hi * wi + size_t(t.i1) * wi;
  const float top = r0[u.i0] + u.w1 * (r0[u.i1] - r0[u.i0]);
  const float bot = r1[u.i0] + u.w1 * (r1[u.i1] - r1[u.i0]);
  y[i] = top + t.w1 * (bot - top);
}

template <typename T>
__global__ void upsample_nhwc_kernel(const T* x, T* y, Resample r, size_t total) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const Nhwc o = nhwc_of(i, r.ho, r.wo, r.c);
  const UpsampleTap t = r.row(o.y), u = r.col(o.x);
  auto at = [&](int yy, int xx) { return ld(x, ((o.b * r.hi + size_t(yy)) * r.wi + size_t(xx)) * r.c + o.c); };
  const float a0 = at(t.i0, u.i0), a1 = at(t.i0, u.i1), b0 = at(t.i1, u.i0), b1 = at(t.i1, u.i1);
  const float top = a0 + u.w1 * (a1 - a0), bot = b0 + u.w1 * (b1 - b0);
  st(y, i, top + t.w1 * (bot - top));
}

// 2-byte types with channels a multiple of 8: one thread 8 channels of an output pixel (its taps
// computed once for them), 16-byte loads of the four neighbours and one 16-byte store.
template <typename T>
__global__ void upsample_nhwc8_kernel(const T* x, T* y, Resample r, size_t groups) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= groups) return;
  const int c = r.c, gc = c / 8;
  const int cg = int(i % gc);
  const size_t pix = i / gc;
  const int ox = int(pix % r.wo), oy = int((pix / r.wo) % r.ho);
  const size_t b = pix / (size_t(r.wo) * r.ho);
  const UpsampleTap t = r.row(oy), u = r.col(ox);
  auto at = [&](int yy, int xx) {
    return *reinterpret_cast<const uint4*>(x + ((b * r.hi + size_t(yy)) * r.wi + size_t(xx)) * c + 8 * size_t(cg));
  };
  const uint4 va0 = at(t.i0, u.i0), va1 = at(t.i0, u.i1), vb0 = at(t.i1, u.i0), vb1 = at(t.i1, u.i1);
  const T *a0 = reinterpret_cast<const T*>(&va0), *a1 = reinterpret_cast<const T*>(&va1);
  const T *b0 = reinterpret_cast<const T*>(&vb0), *b1 = reinterpret_cast<const T*>(&vb1);
  uint4 out;
  T* o = reinterpret_cast<T*>(&out);
  for (int q = 0; q < 8; ++q) {
    const float p00 = ld(a0, q), p01 = ld(a1, q), p10 = ld(b0, q), p11 = ld(b1, q);
    const float top = p00 + u.w1 * (p01 - p00), bot = p10 + u.w1 * (p11 - p10);
    st(o, q, top + t.w1 * (bot - top));
  }
  *reinterpret_cast<uint4*>(y + pix * c + 8 * size_t(cg)) = out;
}

// One thread an output pixel: every channel resampled in float and compared.
constexpr int kUaW = 64, kUaH = 4;
template <typename T>
__global__ void __launch_bounds__(kUaW * kUaH) upsample_argmax_kernel(const T* x, T* y, Resample r, bool nhwc) {
  const int c = r.c, hi = r.hi, wi = r.wi, ho = r.ho, wo = r.wo;
  // A block of kUaW x kUaH output pixels (grid: columns, rows, images; no integer division):
  // the taps of its columns and rows, in double, computed once each into shared memory.
  __shared__ UpsampleTap col_tap[kUaW], row_tap[kUaH];
  pdl_wait();
  const int ox = int(blockIdx.x * kUaW + threadIdx.x), oy = int(blockIdx.y * kUaH + threadIdx.y);
  if (threadIdx.y == 0 && ox < wo)
    col_tap[threadIdx.x] = r.col(ox);
  if (threadIdx.x == 0 && oy < ho)
    row_tap[threadIdx.y] = r.row(oy);
  __syncthreads();
  if (ox >= wo || oy >= ho) return;
  const size_t b = blockIdx.z;
  const size_t i = (b * ho + size_t(oy)) * wo + size_t(ox);
  const UpsampleTap t = row_tap[threadIdx.y], u = col_tap[threadIdx.x];
  const size_t plane = size_t(hi) * wi;
  // Element (channel k, pixel p) of image b: NHWC or NCHW.
  const size_t cs = nhwc ? 1 : plane, ps = nhwc ? size_t(c) : 1;
  const T* xb = x + b * c * plane;
  const size_t p00 = (size_t(t.i0) * wi + u.i0) * ps, p01 = (size_t(t.i0) * wi + u.i1) * ps;
  const size_t p10 = (size_t(t.i1) * wi + u.i0) * ps, p11 = (size_t(t.i1) * wi + u.i1) * ps;
  int best = 0;
  float bv = 0;
  for (int k = 0; k < c; ++k) {
    const size_t o = size_t(k) * cs;
    const float a0 = ld(xb, p00 + o), a1 = ld(xb, p01 + o), b0 = ld(xb, p10 + o), b1 = ld(xb, p11 + o);
    const float top = a0 + u.w1 * (a1 - a0), bot = b0 + u.w1 * (b1 - b0);
    const float v = top + t.w1 * (bot - top);
    if (k == 0 || v > bv || (bv != bv && v == v)) bv = v, best = k;
  }
  st(y, i, float(best));
}

}  // namespace

void upsample(const TensorView& x, const TensorView& y, bool geometry, bool bilinear,
              const Geometry& gin, const Geometry& gout, cudaStream_t s) {
  require_same_format(x, y, "upsample");
  const Shape &a = x.shape, &b = y.shape;
  const size_t n = b.numel();
  const Resample r{a.c, a.h, a.w, b.h, b.w, geometry, bilinear, gin, gout};
  if (is_nchw_f32(x)) {
    Resample planes = r;
    planes.c = a.n * a.c;
    upsample_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.f32(), y.f32(), planes);
  } else {
    const bool by8 = vector8(x, y, a.c);
    with_type(y, [&](auto* t) {
      using T = std::remove_pointer_t<decltype(t)>;
      if (by8)
        upsample_nhwc8_kernel<<<blocks_for(n / 8), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), r, n / 8);
      else
        upsample_nhwc_kernel<<<blocks_for(n), kThreads, 0, s>>>(x.as<const T>(), y.as<T>(), r, n);
    });
  }
  SL_LAUNCH_CHECK("upsample kernel");
}

void upsample_argmax(const TensorView& x, const TensorView& y, bool geometry, bool bilinear,
                     const Geometry& gin, const Geometry& gout, cudaStream_t s) {
  require_same_format(x, y, "upsample + argmax");
  const Shape &a = x.shape, &b = y.shape;
  SL_REQUIRE(b.c == 1 && b.n == a.n, "upsample + argmax: output ", b.str(), " for input ", a.str());
  const size_t n = b.numel();
  if (!n) return;
  SL_REQUIRE(b.n <= 65535, "upsample + argmax: output ", b.str(), " is too large");
  with_type(y, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    launch_pdl(&upsample_argmax_kernel<T>,
               dim3(unsigned((b.w + kUaW - 1) / kUaW), unsigned((b.h + kUaH - 1) / kUaH), unsigned(b.n)),
               dim3(kUaW, kUaH), 0, s, "upsample + argmax kernel", x.as<const T>(), y.as<T>(),
               Resample{a.c, a.h, a.w, b.h, b.w, geometry, bilinear, gin, gout}, x.format.layout == Layout::NHWC);
  });
  SL_LAUNCH_CHECK("upsample + argmax kernel");
}

}  // namespace scenelab::cuda
