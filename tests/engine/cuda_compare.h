// What the GPU tests of the engine and of the kernels share: a model run on the CPU and on the
// GPU, its outputs compared (and its replay checked bit for bit); CUDA options by algorithm and
// precision; the convolution algorithms this build has.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/graph.h"
#include "tests/reference.h"
#include "tests/test_util.h"

namespace scenelab::test {

// The paper's preprocessing as graph text: the input, YUV, contrast normalisation (13x13) and the
// standardisation, whose output is `pre`.
inline const char* kPreprocessText =
    "input x channels=3\n"
    "yuv = rgb_to_yuv(x)\n"
    "lcn = contrast_norm(yuv) size=13\n"
    "pre = standardize(lcn)\n";

// Runs `m` on the CPU and on the GPU; returns the relative error of every output.
inline void compare(const Model& m, Shape in, const CudaOptions& co, double bound, const std::string& what,
             double min_label_agreement = -1) {
  SCOPED_TRACE(what);
  Tensor x = random_tensor(in, 17, 0.f, 1.f);
  CpuBackend cpu(2);
  auto gpu = make_backend("cuda", 0, co);
  Graph gc(m), gg(m);
  gc.plan(in.n, in.h, in.w, cpu);
  gg.plan(in.n, in.h, in.w, *gpu);
  gc.run(x.view());
  gg.run(x.view());
  // The second run records a CUDA graph and the third replays it: same results, bit for bit.
  std::vector<Tensor> first;
  for (const auto& o : m.graph.outputs) first.push_back(gg.fetch(o));
  for (int r = 0; r < 2; ++r) {
    gg.run(x.view());
    for (size_t k = 0; k < first.size(); ++k) {
      Tensor again = gg.fetch(m.graph.outputs[k]);
      for (size_t i = 0; i < again.numel(); ++i)
        ASSERT_EQ(again[i], first[k][i]) << m.graph.outputs[k] << " run " << r + 2;
    }
  }
  EXPECT_TRUE(gg.replaying()) << "the forward pass was not captured as a CUDA graph";
  for (const auto& o : m.graph.outputs) {
    Tensor want = gc.fetch(o), got = gg.fetch(o);
    if (o.find("label") != std::string::npos) {
      size_t same = 0;
      for (size_t i = 0; i < want.numel(); ++i) same += want[i] == got[i];
      const double agree = double(same) / double(want.numel());
      EXPECT_GE(agree, min_label_agreement) << o;
      continue;
    }
    EXPECT_LT(rel_error(got.view(), to_ref(want.view())), bound) << o << " " << co.conv << " " << co.precision;
  }
}

inline CudaOptions opts(const std::string& conv, const std::string& precision = "fp32") {
  CudaOptions o;
  o.conv = conv;
  o.precision = precision;
  return o;
}

inline std::vector<const char*> conv_algorithms() {
#ifdef SCENELAB_WITH_CUDNN
  return {"gemm", "gemm2s", "direct", "cudnn", "split", "auto"};
#else
  return {"gemm", "gemm2s", "direct", "auto"};
#endif
}

}  // namespace scenelab::test
