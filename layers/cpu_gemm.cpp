#include "layers/cpu_gemm.h"

#include "core/error.h"

#ifdef __AVX512F__
#include <immintrin.h>
#elif defined(SCENELAB_WITH_OPENBLAS)
#include <cblas.h>
#else
#include <Eigen/Core>
#endif

namespace scenelab {
namespace {

#ifdef __AVX512F__
// Columns of A fetched ahead: where A's columns are far apart (a 1x1 convolution's input
// planes, one a channel) the hardware prefetchers do not follow them, and the loads wait on
// memory (BiSeNet V2's 1024 -> 11 classifier at 480x360, 2 threads: 0.82-1.00 ms, 0.57-0.62
// with 8 ahead; 16 gives the same, the other layers are level).
constexpr size_t kPrefetch = 8;
// Where A's column k starts: A + k lda (a matrix), or base + offsets[k] (columns read in place:
// sgemm_indirect), each then from row `row` on.
struct StridedColumns {
  const float* a;
  size_t lda;
  const float* operator()(size_t k, size_t row) const { return a + k * lda + row; }
};
struct OffsetColumns {
  const float* base;
  const uint32_t* offsets;
  const float* operator()(size_t k, size_t row) const { return base + offsets[k] + row; }
};

// C (rows x NR) = A (rows x K, from row `row` of the columns) B (K x NR), column-major, rows <= 16
// MV: MV vectors of rows by NR columns of accumulators in registers (24 of the 32 vector registers
// at 8 x 3), the last vector masked; A read a column (k) at a time, B's entries broadcast. Each
// element's sum runs over k in order whatever the block: the blocking never changes the result.
template <int NR, int MV, typename Cols>
void gemm_block(size_t rows, size_t K, const Cols& A, size_t row, const float* B, size_t ldb, float* C,
                size_t ldc) {
  __mmask16 mask[MV];
  for (int v = 0; v < MV; ++v) {
    const size_t from = size_t(v) * 16;
    mask[v] = rows - from >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (rows - from)) - 1);
  }
  __m512 acc[NR][MV];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j)
    for (int v = 0; v < MV; ++v) acc[j][v] = _mm512_setzero_ps();
  for (size_t k = 0; k < K; ++k) {
    const float* a = A(k, row);
    if (k + kPrefetch < K) {
      const float* p = A(k + kPrefetch, row);
      for (int v = 0; v < MV; ++v) _mm_prefetch(reinterpret_cast<const char*>(p + 16 * v), _MM_HINT_T0);
    }
    __m512 av[MV];
    for (int v = 0; v < MV; ++v) av[v] = _mm512_maskz_loadu_ps(mask[v], a + 16 * v);
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const __m512 b = _mm512_set1_ps(B[j * ldb + k]);
      for (int v = 0; v < MV; ++v) acc[j][v] = _mm512_fmadd_ps(av[v], b, acc[j][v]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j)
    for (int v = 0; v < MV; ++v) _mm512_mask_storeu_ps(C + j * ldc + 16 * v, mask[v], acc[j][v]);
}

// rows (<= 48) x all n columns: panels of 8 columns, then the remaining 1-7.
template <int MV, typename Cols>
void gemm_rows(size_t rows, size_t n, size_t K, const Cols& A, size_t row, const float* B, size_t ldb, float* C,
               size_t ldc) {
  size_t j = 0;
  for (; j + 8 <= n; j += 8) gemm_block<8, MV>(rows, K, A, row, B + j * ldb, ldb, C + j * ldc, ldc);
  B += j * ldb, C += j * ldc;
  switch (n - j) {
    case 7: return gemm_block<7, MV>(rows, K, A, row, B, ldb, C, ldc);
    case 6: return gemm_block<6, MV>(rows, K, A, row, B, ldb, C, ldc);
    case 5: return gemm_block<5, MV>(rows, K, A, row, B, ldb, C, ldc);
    case 4: return gemm_block<4, MV>(rows, K, A, row, B, ldb, C, ldc);
    case 3: return gemm_block<3, MV>(rows, K, A, row, B, ldb, C, ldc);
    case 2: return gemm_block<2, MV>(rows, K, A, row, B, ldb, C, ldc);
    case 1: return gemm_block<1, MV>(rows, K, A, row, B, ldb, C, ldc);
    default: return;
  }
}

// Blocks of 48 rows (the rest in one block of 1-3 vectors), each across all columns while its
// rows of A stay in the first-level caches.
template <typename Cols>
void gemm(size_t m, size_t n, size_t k, const Cols& a, const float* b, size_t ldb, float* c, size_t ldc) {
  size_t i = 0;
  for (; i + 48 <= m; i += 48) gemm_rows<3>(48, n, k, a, i, b, ldb, c + i, ldc);
  const size_t rest = m - i;
  if (rest > 32) gemm_rows<3>(rest, n, k, a, i, b, ldb, c + i, ldc);
  else if (rest > 16) gemm_rows<2>(rest, n, k, a, i, b, ldb, c + i, ldc);
  else if (rest > 0) gemm_rows<1>(rest, n, k, a, i, b, ldb, c + i, ldc);
}
#endif

}  // namespace

void sgemm_colmajor(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* b, size_t ldb,
                    float* c, size_t ldc) {
#ifdef __AVX512F__
  // The same code, hence the same sums, whatever BLAS the machine has and whichever kernels that
  // BLAS picks at run time.
  gemm(m, n, k, StridedColumns{a, lda}, b, ldb, c, ldc);
#elif defined(SCENELAB_WITH_OPENBLAS)
  cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n), blasint(k), 1.f, a,
              blasint(lda), b, blasint(ldb), 0.f, c, blasint(ldc));
#else
  using ColMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<ColMat, 0, Stride> C(c, Eigen::Index(m), Eigen::Index(n), Stride(Eigen::Index(ldc)));
  Eigen::Map<const ColMat, 0, Stride> A(a, Eigen::Index(m), Eigen::Index(k), Stride(Eigen::Index(lda)));
  Eigen::Map<const ColMat, 0, Stride> B(b, Eigen::Index(k), Eigen::Index(n), Stride(Eigen::Index(ldb)));
  C.noalias() = A * B;
#endif
}

bool has_indirect_gemm() {
#ifdef __AVX512F__
  return true;
#else
  return false;
#endif
}

void sgemm_indirect(size_t m, size_t n, size_t k, const float* base, const uint32_t* offsets, const float* b,
                    size_t ldb, float* c, size_t ldc) {
#ifdef __AVX512F__
  gemm(m, n, k, OffsetColumns{base, offsets}, b, ldb, c, ldc);
#else
  (void)m, (void)n, (void)k, (void)base, (void)offsets, (void)b, (void)ldb, (void)c, (void)ldc;
  throw_error("sgemm_indirect: this build has no AVX-512 (has_indirect_gemm() is false)");
#endif
}

}  // namespace scenelab
