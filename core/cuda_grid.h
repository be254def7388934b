// Launch-shape helpers shared by the CUDA kernels of every floor: how many blocks cover n items,
// and a 2-D grid over a w x h image with the batch in z.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include <cstddef>

namespace scenelab::cuda {

inline dim3 grid2d(int w, int h, int n, dim3 block) {
  return dim3(unsigned((w + int(block.x) - 1) / int(block.x)), unsigned((h + int(block.y) - 1) / int(block.y)),
              unsigned(n));
}

}  // namespace scenelab::cuda
#endif
