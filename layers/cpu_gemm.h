// The CPU convolutions' matrix product, on the calling thread: our AVX-512 blocks where the build
// targets AVX-512, else OpenBLAS's sgemm where the build has it (SCENELAB_WITH_OPENBLAS), else
// Eigen's product.
#pragma once
#include <cstddef>
#include <cstdint>

namespace scenelab {

// C (m x n) = A (m x k) * B (k x n), all column-major with leading dimensions lda, ldb, ldc.
void sgemm_colmajor(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* b, size_t ldb,
                    float* c, size_t ldc);

// C (m x n) = A (m x k) * B as above, A's column kk read in place from base + offsets[kk] (m floats
// each): a convolution's taps without an im2col matrix (layers/conv_phases.h). The same sums as
// sgemm_colmajor on those columns. Only where has_indirect_gemm() (AVX-512 builds); elsewhere it
// throws.
bool has_indirect_gemm();
void sgemm_indirect(size_t m, size_t n, size_t k, const float* base, const uint32_t* offsets, const float* b,
                    size_t ldb, float* c, size_t ldc);

}  // namespace scenelab
