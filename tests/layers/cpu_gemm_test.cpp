// The CPU convolutions' GEMM (layers/cpu_gemm.h: our AVX-512 blocks where the build targets
// AVX-512, else the BLAS) against a float64 product: odd sizes across the 48-row blocks, the 1-3
// vector tails and every column remainder 1-7, leading dimensions larger than the matrices,
// outputs poisoned and the padding between columns left untouched. Bound: relative error 1e-5 of
// the largest |C| (float32 sums of up to 771 products; measured ~1e-7).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "layers/cpu_gemm.h"

using namespace scenelab;

TEST(CpuGemm, AgainstFloat64OddSizesAndStrides) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const float poison = std::numeric_limits<float>::quiet_NaN();
  for (size_t m : {1, 15, 16, 17, 33, 47, 48, 49, 97, 131})
    for (size_t n : {1, 3, 7, 8, 9, 16, 23})
      for (size_t k : {1, 5, 64, 771}) {
        const size_t lda = m + 3, ldb = k + 2, ldc = m + 5;
        std::vector<float> a(lda * k), b(ldb * n), c(ldc * n, poison);
        for (float& v : a) v = u(rng);
        for (float& v : b) v = u(rng);
        sgemm_colmajor(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc);
        double num = 0, den = 0;
        size_t untouched = 0;
        for (size_t j = 0; j < n; ++j) {
          for (size_t i = 0; i < m; ++i) {
            double want = 0;
            for (size_t p = 0; p < k; ++p) want += double(a[p * lda + i]) * b[j * ldb + p];
            const double d = std::abs(double(c[j * ldc + i]) - want);
            num = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(num, d);
            den = std::max(den, std::abs(want));
          }
          for (size_t i = m; i < ldc; ++i) untouched += std::isnan(c[j * ldc + i]);
        }
        EXPECT_LT(num / den, 1e-5) << m << "x" << n << "x" << k;
        EXPECT_EQ(untouched, (ldc - m) * n) << m << "x" << n << "x" << k << ": wrote past the rows";
      }
}
