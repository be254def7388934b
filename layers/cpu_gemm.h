// The CPU convolutions' matrix product, on the calling thread: OpenBLAS's sgemm where the build
// has it (SCENELAB_WITH_OPENBLAS), else Eigen's product.
#pragma once
#include <cstddef>

namespace scenelab {

// C (m x n) = A (m x k) * B (k x n), all column-major with leading dimensions lda, ldb, ldc.
void sgemm_colmajor(size_t m, size_t n, size_t k, const float* a, size_t lda, const float* b, size_t ldb,
                    float* c, size_t ldc);

}  // namespace scenelab
