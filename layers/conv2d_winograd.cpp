#include "layers/conv2d_winograd.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "layers/cpu_gemm.h"

namespace scenelab {
namespace {

constexpr int kA = WinogradMatrices::kAlpha;  // 8: the tile's side
constexpr int kPos = kA * kA;                  // 64 tile positions, one GEMM each
// Transform-domain floats (V and M, 64 x tiles x (cin + cout)) a band may hold: 6 MiB. Measured
// on the multiscale net at 480x360 (2 threads, Zen 5: 1 MiB L2 a core, 32 MiB L3): 1, 2, 4, 6, 8,
// 12 and 16 MiB bands; 6-8 MiB were the fastest (larger bands give the GEMMs more rows, smaller
// ones stay in the caches between the transforms and the GEMMs).
constexpr size_t kBandFloats = size_t(3) << 19;
constexpr int kMinBands = 16;  // bands a plane is cut into at least (where it has the tiles)

size_t round16(size_t n) { return (n + 15) / 16 * 16; }  // keeps sub-buffers 64-byte aligned

// dst[r][i] = sum over j < 8 of coef[r * 8 + j] * src[j][i], r < ROWS, i < n: one 1-D transform
// applied to n tiles at once (the tiles are the vector lanes), each source read once.
template <int ROWS>
void transform(float* const* dst, const float* const* src, const float* coef, size_t n) {
  float c[ROWS][kA];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < kA; ++j) c[r][j] = coef[r * kA + j];
  const float *s0 = src[0], *s1 = src[1], *s2 = src[2], *s3 = src[3], *s4 = src[4], *s5 = src[5],
              *s6 = src[6], *s7 = src[7];
  float* d[ROWS];
  for (int r = 0; r < ROWS; ++r) d[r] = dst[r];
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float v[kA] = {s0[i], s1[i], s2[i], s3[i], s4[i], s5[i], s6[i], s7[i]};
    for (int r = 0; r < ROWS; ++r) {
      float acc = 0.f;
      for (int j = 0; j < kA; ++j) acc += c[r][j] * v[j];
      d[r][i] = acc;
    }
  }
}
// The output transform's A^T has m = 9 - k rows.
void transform_rows(int rows, float* const* dst, const float* const* src, const float* coef, size_t n) {
  switch (rows) {
    case 2: return transform<2>(dst, src, coef, n);
    case 4: return transform<4>(dst, src, coef, n);
    case 6: return transform<6>(dst, src, coef, n);
    default: return transform<kA>(dst, src, coef, n);
  }
}

}  // namespace

WinogradMatrices winograd_matrices(int r) {
  SL_REQUIRE(r == 3 || r == 5 || r == 7, "Winograd convolution: kernel size ", r, " not supported (3, 5, 7)");
  static const double p[kA - 1] = {0, 1, -1, 2, -2, 0.5, -0.5};
  WinogradMatrices t;
  t.r = r;
  t.m = kA + 1 - r;
  t.AT.assign(size_t(t.m) * kA, 0.0);
  t.G.assign(size_t(kA) * r, 0.0);
  t.BT.assign(size_t(kA) * kA, 0.0);
  // Coefficients (lowest power first) of the product of (x - p_l) over the finite points l != skip.
  auto poly = [&](int skip) {
    std::vector<double> c{1.0};
    for (int l = 0; l < kA - 1; ++l) {
      if (l == skip) continue;
      std::vector<double> n(c.size() + 1, 0.0);
      for (size_t i = 0; i < c.size(); ++i) {
        n[i + 1] += c[i];
        n[i] -= p[l] * c[i];
      }
      c = n;
    }
    return c;
  };
  for (int j = 0; j < kA - 1; ++j) {
    double f = 1;
    for (int l = 0; l < kA - 1; ++l)
      if (l != j) f *= p[j] - p[l];
    for (int i = 0; i < t.m; ++i) t.AT[size_t(i) * kA + j] = std::pow(p[j], i);
    for (int k = 0; k < r; ++k) t.G[size_t(j) * r + k] = std::pow(p[j], k) / f;
    const std::vector<double> c = poly(j);
    for (size_t i = 0; i < c.size(); ++i) t.BT[size_t(j) * kA + i] = c[i];
  }
  // The point at infinity: the products' leading coefficients.
  t.AT[size_t(t.m - 1) * kA + kA - 1] = 1;
  t.G[size_t(kA - 1) * r + r - 1] = 1;
  const std::vector<double> c = poly(-1);
  for (size_t i = 0; i < c.size(); ++i) t.BT[size_t(kA - 1) * kA + i] = c[i];
  return t;
}

WinogradConv::WinogradConv(const float* weight, int cout, int cin, int k)
    : cin_(cin), cout_(cout), m_(kA + 1 - k) {
  const WinogradMatrices t = winograd_matrices(k);
  at_.assign(t.AT.begin(), t.AT.end());
  bt_.assign(t.BT.begin(), t.BT.end());
  u_.assign(size_t(kPos) * cout * cin, 0.f);
  std::vector<double> gg(size_t(kA) * k);  // G g
  for (int o = 0; o < cout; ++o)
    for (int c = 0; c < cin; ++c) {
      const float* g = weight + (size_t(o) * cin + c) * k * k;
      for (int i = 0; i < kA; ++i)
        for (int x = 0; x < k; ++x) {
          double s = 0;
          for (int y = 0; y < k; ++y) s += t.G[size_t(i) * k + y] * g[y * k + x];
          gg[size_t(i) * k + x] = s;
        }
      for (int i = 0; i < kA; ++i)
        for (int j = 0; j < kA; ++j) {  // (G g G^T)[i][j]
          double s = 0;
          for (int x = 0; x < k; ++x) s += gg[size_t(i) * k + x] * t.G[size_t(j) * k + x];
          u_[(size_t(i * kA + j) * cout + o) * cin + c] = float(s);
        }
    }
}

WinogradConv::Plan WinogradConv::plan(int cin, int cout, int k, int h, int w, int pad) {
  SL_REQUIRE(supported(k), "Winograd convolution: kernel size ", k, " not supported (3, 5, 7)");
  Plan p;
  p.cin = cin, p.cout = cout, p.m = kA + 1 - k, p.h = h, p.w = w, p.pad = pad;
  p.ho = h + 2 * pad - k + 1;
  p.wo = w + 2 * pad - k + 1;
  SL_REQUIRE(p.ho >= 1 && p.wo >= 1, "Winograd convolution: input ", w, "x", h, " smaller than the kernel");
  p.tiles_y = (p.ho + p.m - 1) / p.m;
  p.tiles_x = (p.wo + p.m - 1) / p.m;
  // Bands of about `target` tiles, rows and columns split evenly (no narrow last band).
  const int target = int(std::max<size_t>(8, kBandFloats / (size_t(kPos) * (cin + cout))));
  p.bands_x = (p.tiles_x + target - 1) / target;
  p.band_cols = (p.tiles_x + p.bands_x - 1) / p.bands_x;
  int bands_y = (p.tiles_y + std::max(1, target / p.band_cols) - 1) / std::max(1, target / p.band_cols);
  bands_y = std::min(p.tiles_y, std::max(bands_y, (kMinBands + p.bands_x - 1) / p.bands_x));
  p.band_rows = (p.tiles_y + bands_y - 1) / bands_y;
  p.bands = p.bands_x * ((p.tiles_y + p.band_rows - 1) / p.band_rows);
  return p;
}

size_t WinogradConv::workspace_floats(const Plan& p) {
  const int m = p.m;
  const size_t tiles = size_t(p.band_rows) * p.band_cols;
  const size_t rows = size_t(m) * (p.band_rows - 1) + kA;
  return round16(kPos * tiles * p.cin) + round16(kPos * tiles * p.cout) +  // V, M
         round16(rows * kA * p.band_cols) +                               // rows transformed
         round16(size_t(m) * (p.band_cols + kA)) +                        // a row's m phases
         round16(size_t(m) * kA * tiles) + size_t(m) * m * tiles;          // output transform
}

void WinogradConv::run_band(const Plan& p, int band, const float* x, float* y, const float* bias, bool relu,
                            float* ws) const {
  const int m = m_;
  const int ty0 = band / p.bands_x * p.band_rows, tx0 = band % p.bands_x * p.band_cols;
  const int nr = std::min(p.tiles_y, ty0 + p.band_rows) - ty0;
  const size_t nc = size_t(std::min(p.tiles_x, tx0 + p.band_cols) - tx0);
  const size_t T = nr * nc;  // tiles in this band, tile (r, c) at r * nc + c
  const int R = m * (nr - 1) + kA;  // input rows the band reads
  const size_t tmax = size_t(p.band_rows) * p.band_cols;
  const size_t L = size_t(p.band_cols) + kA;  // a phase's length
  float* V = ws;
  float* M = V + round16(kPos * tmax * cin_);
  float* rowt = M + round16(kPos * tmax * cout_);
  float* phase = rowt + round16((size_t(m) * (p.band_rows - 1) + kA) * kA * p.band_cols);
  float* colt = phase + round16(size_t(m) * L);
  float* outv = colt + round16(size_t(m) * kA * tmax);

  // Input transform, a channel at a time: B^T along each input row (rowt: R rows x 8 x nc), then
  // along the columns into V (64 matrices, tiles x cin, column-major).
  const size_t plane = size_t(p.h) * p.w;
  const float* src[kA];
  float* dst[kA];
  for (int c = 0; c < cin_; ++c) {
    const float* xc = x + c * plane;
    for (int rr = 0; rr < R; ++rr) {
      float* rt = rowt + size_t(rr) * kA * nc;
      const int iy = m * ty0 - p.pad + rr;
      if (iy < 0 || iy >= p.h) {
        std::memset(rt, 0, kA * nc * sizeof(float));
        continue;
      }
      // Phase q holds the row's pixels m * (tx0 + u) + q - pad: tap j of tile column u is phase
      // j % m at u + j / m, so each row of the transform reads contiguous memory.
      const float* xr = xc + size_t(iy) * p.w;
      const int len = int(nc) + (kA + m - 1) / m;
      const int x0 = m * tx0 - p.pad;  // input column of phase 0, u = 0
      if (x0 >= 0 && x0 + m * len <= p.w) {  // inside the row: no edge tests
        for (int q = 0; q < m; ++q) {
          float* ph = phase + size_t(q) * L;
          const float* xs = xr + x0 + q;
          for (int u = 0; u < len; ++u) ph[u] = xs[m * u];
        }
      } else {
        for (int q = 0; q < m; ++q) {
          float* ph = phase + size_t(q) * L;
          for (int u = 0; u < len; ++u) {
            const int ix = x0 + m * u + q;
            ph[u] = ix >= 0 && ix < p.w ? xr[ix] : 0.f;
          }
        }
      }
      for (int j = 0; j < kA; ++j) src[j] = phase + size_t(j % m) * L + j / m;
      for (int nu = 0; nu < kA; ++nu) dst[nu] = rt + size_t(nu) * nc;
      transform<kA>(dst, src, bt_.data(), nc);
    }
    for (int r = 0; r < nr; ++r)
      for (int nu = 0; nu < kA; ++nu) {
        for (int i = 0; i < kA; ++i) src[i] = rowt + (size_t(m * r + i) * kA + nu) * nc;
        for (int xi = 0; xi < kA; ++xi) dst[xi] = V + (size_t(xi * kA + nu) * cin_ + c) * T + r * nc;
        transform<kA>(dst, src, bt_.data(), nc);
      }
  }

  // M_e (tiles x cout) = V_e (tiles x cin) U_e (cin x cout), each tile position e.
  for (int e = 0; e < kPos; ++e)
    sgemm_colmajor(T, cout_, cin_, V + size_t(e) * cin_ * T, T, &u_[size_t(e) * cout_ * cin_], cin_,
                   M + size_t(e) * cout_ * T, T);

  // Output transform, an output channel at a time over all the band's tiles: A^T along the tiles'
  // columns (colt: m x 8 x T), then along their rows (outv: m x m x T), bias and ReLU, into y.
  const size_t oplane = size_t(p.ho) * p.wo;
  const int valid = std::min<int>(int(nc) * m, p.wo - m * tx0);  // output columns in this band
  for (int o = 0; o < cout_; ++o) {
    for (int nu = 0; nu < kA; ++nu) {
      for (int xi = 0; xi < kA; ++xi) src[xi] = M + (size_t(xi * kA + nu) * cout_ + o) * T;
      for (int a = 0; a < m; ++a) dst[a] = colt + size_t(a * kA + nu) * T;
      transform_rows(m, dst, src, at_.data(), T);
    }
    for (int a = 0; a < m; ++a) {
      for (int nu = 0; nu < kA; ++nu) src[nu] = colt + size_t(a * kA + nu) * T;
      for (int bcol = 0; bcol < m; ++bcol) dst[bcol] = outv + size_t(a * m + bcol) * T;
      transform_rows(m, dst, src, at_.data(), T);
    }
    const float b = bias ? bias[o] : 0.f;
    for (int r = 0; r < nr; ++r)
      for (int a = 0; a < m; ++a) {
        const int oy = m * (ty0 + r) + a;
        if (oy >= p.ho) break;
        float* yrow = y + o * oplane + size_t(oy) * p.wo + size_t(m) * tx0;
        for (int bcol = 0; bcol < m; ++bcol) {
          const float* v = outv + size_t(a * m + bcol) * T + r * nc;
          const int n = (valid - bcol + m - 1) / m;  // this phase's columns within the output
          if (relu)
            for (int cc = 0; cc < n; ++cc) yrow[m * cc + bcol] = std::max(v[cc] + b, 0.f);
          else
            for (int cc = 0; cc < n; ++cc) yrow[m * cc + bcol] = v[cc] + b;
        }
      }
  }
}

}  // namespace scenelab
