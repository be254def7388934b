// GPU tests compile everywhere and skip, saying why, where they cannot run.
#pragma once
#include <gtest/gtest.h>

#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>
inline bool scenelab_gpu_present() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#define SCENELAB_REQUIRE_GPU()                                                       \
  do {                                                                               \
    if (!scenelab_gpu_present()) GTEST_SKIP() << "no CUDA device: GPU test skipped"; \
  } while (0)
#else
#define SCENELAB_REQUIRE_GPU() \
  GTEST_SKIP() << "built without CUDA (no toolkit or -DSCENELAB_ENABLE_CUDA=OFF): GPU test skipped"
#endif
