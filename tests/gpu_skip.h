// GPU tests compile everywhere and skip, saying why, where they cannot run.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

// SCENELAB_TEST_QUICK (tools/gpu_check.sh sets it for compute-sanitizer, under which racecheck
// runs our kernels 100-1000x slower: a 97x61 image through the reference net took about 19 s on an
// H200): the whole-network tests then run fewer images, sizes and cases through the same kernels.
inline bool scenelab_test_quick() { return std::getenv("SCENELAB_TEST_QUICK") != nullptr; }
// The cases a loop runs: `quick` under SCENELAB_TEST_QUICK, else `full`.
template <class T>
std::vector<T> scenelab_quick_or(std::vector<T> quick, std::vector<T> full) {
  return scenelab_test_quick() ? quick : full;
}

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
