// The GPU's hand-written kernels alone against float64 (the paired 1x1 layers, the fused first
// layer, the implicit-GEMM convolution, the two-pass contrast normalisation, cuBLAS's writes)
// and the planner's fusions on the GPU against the CPU (GPU tests, label gpu); outputs poisoned
// first, bounds stated at each test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <tuple>

#include "job/combine.h"
#include "engine/graph.h"
#include "engine/networks.h"
#include "job/pyramid_detector.h"
#ifdef SCENELAB_WITH_CUDA
#include "kernels/conv_cuda.h"
#include "core/cuda_check.h"
#include "kernels/layers_cuda.h"
#endif
#include "layers/softmax_mean.h"
#include "weights/model_file.h"
#include "tests/engine/cuda_compare.h"
#include "tests/gpu_skip.h"
#include "tests/reference.h"
#include "weights/default_model.h"

using namespace scenelab;
using namespace scenelab::test;

#ifdef SCENELAB_WITH_CUDA
// Waits for the device, reads dy back (a half-precision NHWC tensor of want's shape in type t)
// and checks every element written (the outputs are poisoned with NaN first) and the whole
// within the half types' bound of the float64 reference: f16 1e-3, bf16 8e-3 relative.
void expect_half_nhwc_near(const DeviceBuffer& dy, const Ref& want, DType t) {
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(dy.bytes(), want.v.size() * 2);
  std::vector<uint16_t> yh(want.v.size());
  ASSERT_EQ(cudaMemcpy(yh.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  Tensor got(want.shape);
  to_f32_nchw(TensorView{yh.data(), want.shape, Format{t, Layout::NHWC}}, got.data());
  for (size_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isfinite(got[i])) << "output " << i << " unwritten";
  EXPECT_LT(rel_error(got.view(), want), t == DType::F16 ? 1e-3 : 8e-3);
}

// The fused first-layer kernel alone (kernels/conv_fused_cuda.cu) against a float64 convolution,
// bias, ReLU and 2x2 max-pool of the same half-rounded operands: f16 and bf16, valid and same
// padding, with and without ReLU and bias, odd sizes whose last conv row/column the pool drops,
// batch 1..3; the output poisoned with NaN first, so an unwritten pixel fails. Bound: the output's
// rounding (f16 2^-11, bf16 2^-8 of the largest value, times 2 for the accumulation order).
// Two 1x1 layers in one tensor-core kernel (cuda::conv1x1_pair_nhwc) against float64 on the same
// rounded inputs, the intermediate rounded to the type as the kernel (and the unfused pass) does:
// pixel counts that are not multiples of a warp's 32 or a block's 256, c1 32, 64, 128, 256 and 768 (the
// channel permutation over several 32-channel groups; four K shares from 128), c2 16, 32 and 64,
// c3 1, 7, 11 and 16, ReLU or not, bias or not; outputs poisoned first (NaN).
TEST(CudaBackend, PixelwisePairKernelAgainstFloat64) {
  SCENELAB_REQUIRE_GPU();
  struct Case {
    int pixels, c1, c2, c3;
    bool relu, bias2;
  };
  const std::vector<Case> cases = {{3 * 37 * 53, 256, 64, 11, true, true}, {1000, 32, 16, 16, false, true},
                                   {7, 64, 64, 1, true, false}, {2 * 257, 256, 16, 5, true, true},
                                   {999, 128, 32, 7, true, false},  // four K shares, C1 not unrolled
                                   // blocks of 8 warps staging W1 (the others fill a 132-SM GPU only
                                   // with the small blocks that read it from global memory)
                                   {2 * 97 * 101, 256, 64, 11, true, true},
                                   // the multiscale net's classifier (c1 768): W1 staged past
                                   // 48 KiB of shared memory, and the small blocks' four K shares
                                   {2 * 97 * 101, 768, 64, 11, true, true}, {999, 768, 64, 11, true, true}};
  std::mt19937 rng(33);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (DType t : {DType::F16, DType::BF16}) {
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::to_string(k.pixels) + " px " + std::to_string(k.c1) +
                   "->" + std::to_string(k.c2) + "->" + std::to_string(k.c3));
      ASSERT_TRUE(cuda::conv1x1_pair_supported(k.c1, k.c2, k.c3, t));
      auto round = [&](double v) {
        return t == DType::F16 ? half_to_float(float_to_half(float(v))) : bf16_to_float(float_to_bf16(float(v)));
      };
      auto bits = [&](float v) { return t == DType::F16 ? float_to_half(v) : float_to_bf16(v); };
      auto fill = [&](std::vector<float>& v, std::vector<uint16_t>& h, float scale) {
        h.resize(v.size());
        for (size_t i = 0; i < v.size(); ++i) v[i] = round(scale * uni(rng)), h[i] = bits(v[i]);
      };
      std::vector<float> x(size_t(k.pixels) * k.c1), w1(size_t(k.c2) * k.c1), w2(size_t(k.c3) * k.c2);
      std::vector<uint16_t> xh, w1h, w2h;
      fill(x, xh, 1.f);
      fill(w1, w1h, 0.2f);
      fill(w2, w2h, 0.3f);
      std::vector<float> b1(size_t(k.c2)), b2(size_t(k.c3));
      for (auto& v : b1) v = 0.5f * uni(rng);
      for (auto& v : b2) v = 0.5f * uni(rng);
      // the reference: float64 sums, the intermediate rounded to the type
      std::vector<double> want(size_t(k.pixels) * k.c3);
      double den = 0;
      for (int p = 0; p < k.pixels; ++p) {
        std::vector<double> mid(size_t(k.c2));
        for (int o = 0; o < k.c2; ++o) {
          double acc = b1[size_t(o)];
          for (int i = 0; i < k.c1; ++i) acc += double(x[size_t(p) * k.c1 + i]) * w1[size_t(o) * k.c1 + i];
          mid[size_t(o)] = round(k.relu ? std::max(acc, 0.0) : acc);
        }
        for (int o = 0; o < k.c3; ++o) {
          double acc = k.bias2 ? b2[size_t(o)] : 0.0;
          for (int i = 0; i < k.c2; ++i) acc += mid[size_t(i)] * w2[size_t(o) * k.c2 + i];
          want[size_t(p) * k.c3 + o] = acc;
          den = std::max(den, std::abs(acc));
        }
      }
      DeviceBuffer dx(xh.size() * 2), dw1(w1h.size() * 2), dw2(w2h.size() * 2), db1(b1.size() * 4),
          db2(b2.size() * 4), dy(want.size() * 2);
      ASSERT_EQ(cudaMemcpy(dx.get(), xh.data(), dx.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dw1.get(), w1h.data(), dw1.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dw2.get(), w2h.data(), dw2.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(db1.get(), b1.data(), db1.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(db2.get(), b2.data(), db2.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(dy.get(), 0xff, dy.bytes()), cudaSuccess);  // NaN in f16 and bf16
      cuda::conv1x1_pair_nhwc(k.pixels, k.c1, k.c2, k.c3, dx.get(), dw1.get(), db1.get<float>(), k.relu,
                              dw2.get(), k.bias2 ? db2.get<float>() : nullptr, dy.get(), t, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> yh(want.size());
      ASSERT_EQ(cudaMemcpy(yh.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
      double err = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const double got = t == DType::F16 ? half_to_float(yh[i]) : bf16_to_float(yh[i]);
        ASSERT_TRUE(std::isfinite(got)) << "output " << i << " not written";
        err = std::max(err, std::abs(got - want[i]));
      }
      // the output's rounding (2^-11 or 2^-8 of it), and an intermediate flipping its rounding
      // where the fp32 sum and the float64 one straddle a rounding boundary
      EXPECT_LT(err / den, t == DType::F16 ? 2e-3 : 1.6e-2);
    }
  }
}

TEST(CudaBackend, FusedConvPoolKernelAgainstFloat64) {
  SCENELAB_REQUIRE_GPU();
  struct Case {
    int n, h, w, pad;
    bool relu, bias;
  };
  const std::vector<Case> cases = {{3, 37, 53, 0, true, true}, {2, 29, 40, 3, true, true},
                                   {1, 8, 9, 0, false, true},  {2, 70, 131, 3, false, false},
                                   {1, 7, 7, 0, true, true},
                                   {2, 262, 300, 0, true, true}};  // 64-column blocks (the others 32)
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (DType t : {DType::F16, DType::BF16}) {
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::to_string(k.n) + "x" + std::to_string(k.h) +
                   "x" + std::to_string(k.w) + " pad " + std::to_string(k.pad) + (k.relu ? " relu" : "") +
                   (k.bias ? " bias" : ""));
      const int cin = 3, cout = 16, ks = 7;
      const int ho = k.h + 2 * k.pad - ks + 1, wo = k.w + 2 * k.pad - ks + 1;
      const cuda::ConvShape c{k.n, cin, k.h, k.w, cout, ks, k.pad, ho, wo};
      if (!cuda::conv_pool_supported(c, 2, 2, t)) {
        ASSERT_LT(ho, 2) << "a shape the fused kernel should take";
        continue;
      }
      auto round = [&](float v) {
        return t == DType::F16 ? half_to_float(float_to_half(v)) : bf16_to_float(float_to_bf16(v));
      };
      auto bits = [&](float v) { return t == DType::F16 ? float_to_half(v) : float_to_bf16(v); };
      // Input NHWC, weights KRSC, in the half type; the references from the same rounded values.
      Ref x(Shape(k.n, cin, k.h, k.w)), wr(Shape(cout, cin, ks, ks)), bvec(Shape(cout, 1, 1, 1));
      std::vector<uint16_t> xh(x.v.size());
      for (int n = 0; n < k.n; ++n)
        for (int y = 0; y < k.h; ++y)
          for (int xx = 0; xx < k.w; ++xx)
            for (int ci = 0; ci < cin; ++ci) {
              const float v = round(uni(rng));
              x.at(n, ci, y, xx) = v;
              xh[((size_t(n) * k.h + y) * k.w + xx) * cin + ci] = bits(v);
            }
      std::vector<float> wf(wr.v.size());  // float OIHW, already rounded: the kernel's copy is exact
      for (size_t i = 0; i < wf.size(); ++i) wr.v[i] = wf[i] = round(0.3f * uni(rng));
      std::vector<float> bias(cout);
      for (int o = 0; o < cout; ++o) bvec.v[size_t(o)] = bias[size_t(o)] = k.bias ? 0.5f * uni(rng) : 0.f;
      const Ref want = ref_maxpool(ref_conv2d(x, wr, &bvec, k.pad, k.relu), 2, 2);
      const int hp = ho / 2, wp = wo / 2;
      ASSERT_EQ(want.shape, Shape(k.n, cout, hp, wp));
      DeviceBuffer dx(xh.size() * 2), dw(wf.size() * 4), db(cout * sizeof(float)),
          dy(size_t(k.n) * hp * wp * cout * 2);
      ASSERT_EQ(cudaMemcpy(dx.get(), xh.data(), xh.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dw.get(), wf.data(), dw.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      cuda::HalfWeights frag;
      const void* w16 = frag.get(dw.get<float>(), c, cuda::WeightLayout::MmaConvPool, t, nullptr);
      ASSERT_EQ(cudaMemcpy(db.get(), bias.data(), cout * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(dy.get(), 0xff, dy.bytes()), cudaSuccess);  // NaN in f16 and bf16
      cuda::conv_relu_pool_nhwc(c, dx.get(), w16, k.bias ? db.get<float>() : nullptr, dy.get(), k.relu,
                                t, nullptr);
      expect_half_nhwc_near(dy, want, t);
    }
  }
}

// Our implicit-GEMM convolution (cuda::conv_mma_nhwc) against float64 on the same half-rounded
// operands: cin 16 and 32, cout 64 and 128, padding 0 and 3, the 2x2 pool or none, ReLU or
// not, bias or not, batch 1..3, sizes that are not multiples of the 8 x 16 block (and maps smaller
// than one); outputs poisoned first (NaN).
TEST(CudaBackend, ImplicitGemmConvKernelAgainstFloat64) {
  SCENELAB_REQUIRE_GPU();
  struct Case {
    int n, cin, h, w, cout, pad;
    bool pool, relu, bias;
  };
  const std::vector<Case> cases = {{3, 16, 29, 45, 64, 0, true, true, true},  {2, 32, 23, 31, 128, 0, false, true, true},
                                   {1, 32, 17, 40, 64, 3, true, false, true}, {2, 32, 9, 8, 64, 3, false, false, false},
                                   {1, 16, 8, 9, 64, 0, true, true, false},   {3, 16, 40, 21, 128, 3, false, true, true},
                                   {2, 16, 70, 133, 64, 0, true, true, true}};
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (DType t : {DType::F16, DType::BF16}) {
    for (const Case& k : cases) {
      const int ks = 7, ho = k.h + 2 * k.pad - ks + 1, wo = k.w + 2 * k.pad - ks + 1;
      const cuda::ConvShape c{k.n, k.cin, k.h, k.w, k.cout, ks, k.pad, ho, wo};
      ASSERT_TRUE(cuda::conv_mma_supported(c, k.pool, t));
      auto round = [&](float v) {
        return t == DType::F16 ? half_to_float(float_to_half(v)) : bf16_to_float(float_to_bf16(v));
      };
      auto bits = [&](float v) { return t == DType::F16 ? float_to_half(v) : float_to_bf16(v); };
      Ref x(Shape(k.n, k.cin, k.h, k.w)), wr(Shape(k.cout, k.cin, ks, ks)), bvec(Shape(k.cout, 1, 1, 1));
      std::vector<uint16_t> xh(x.v.size());
      for (int n = 0; n < k.n; ++n)
        for (int y = 0; y < k.h; ++y)
          for (int xx = 0; xx < k.w; ++xx)
            for (int ci = 0; ci < k.cin; ++ci) {
              const float v = round(uni(rng));
              x.at(n, ci, y, xx) = v;
              xh[((size_t(n) * k.h + y) * k.w + xx) * k.cin + ci] = bits(v);
            }
      std::vector<float> wf(wr.v.size());  // float OIHW, already rounded: the kernel's copy is exact
      for (size_t i = 0; i < wf.size(); ++i) wr.v[i] = wf[i] = round(0.1f * uni(rng));
      std::vector<float> bias(size_t(k.cout));
      for (int o = 0; o < k.cout; ++o) bvec.v[size_t(o)] = bias[size_t(o)] = k.bias ? 0.5f * uni(rng) : 0.f;
      Ref want = ref_conv2d(x, wr, &bvec, k.pad, k.relu);
      if (k.pool) want = ref_maxpool(want, 2, 2);
      DeviceBuffer dx(xh.size() * 2), dw(wf.size() * 4), db(bias.size() * 4), dy(want.v.size() * 2);
      ASSERT_EQ(cudaMemcpy(dx.get(), xh.data(), dx.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dw.get(), wf.data(), dw.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(db.get(), bias.data(), db.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      cuda::HalfWeights frag;
      const void* w16 = frag.get(dw.get<float>(), c, cuda::WeightLayout::MmaImplicitGemm, t, nullptr);
      SCOPED_TRACE(str_cat(dtype_name(t), " ", k.n, "x", k.cin, "x", k.h, "x", k.w, " -> ", k.cout, " pad ", k.pad,
                           k.pool ? " pool" : "", k.relu ? " relu" : "", k.bias ? " bias" : ""));
      ASSERT_EQ(cudaMemset(dy.get(), 0xff, dy.bytes()), cudaSuccess);  // NaN in f16 and bf16
      cuda::conv_mma_nhwc(c, dx.get(), w16, k.bias ? db.get<float>() : nullptr, dy.get(), k.relu, k.pool, t,
                          nullptr);
      // the output's rounding (2^-11 or 2^-8 of it) and fp32 accumulation over up to 1568 terms
      expect_half_nhwc_near(dy, want, t);
    }
  }
}

// The two-pass contrast normalisation (cuda::contrast_norm_fused) against the float64 reference:
// f32 NCHW without standardisation, and standardised into f16/bf16/f32 NHWC; odd sizes, sizes
// smaller than the 13x13 window and than a tile, 1 to 4 channels, batch 1..3; outputs poisoned.
TEST(CudaBackend, TwoPassContrastNormAgainstFloat64) {
  SCENELAB_REQUIRE_GPU();
  const std::vector<Shape> shapes = {Shape(3, 3, 37, 53), Shape(1, 3, 5, 7), Shape(2, 1, 70, 131),
                                     Shape(1, 4, 16, 32), Shape(2, 3, 33, 1),
                                     Shape(2, 3, 65, 129),  // small tiles, a block a channel
                                     Shape(1, 3, 32 * 23 + 5, 64 * 23 + 3)};  // 64 x 32 tiles (512 or more)
  const int size = 13;
  const double sigma = 0.25 * size, eps = 1e-4;
  std::vector<float> taps(size);
  double gs = 0;
  for (int i = 0; i < size; ++i) gs += std::exp(-0.5 * std::pow((i - size / 2) / sigma, 2));
  for (int i = 0; i < size; ++i) taps[size_t(i)] = float(std::exp(-0.5 * std::pow((i - size / 2) / sigma, 2)) / gs);
  for (const Shape& sh : shapes) {
    Tensor x = random_tensor(sh, 5, -1.f, 1.f);
    for (int i = 0; i < sh.w * 2 && size_t(i) < x.numel(); ++i) x[size_t(i)] *= 0.01f;  // a flat band
    const Ref lcn = ref_contrast_norm(to_ref(x.view()), size, sigma, eps);
    std::vector<float> mean(size_t(sh.c)), sd(size_t(sh.c));
    std::vector<double> md, sdd;
    for (int c = 0; c < sh.c; ++c) {
      mean[size_t(c)] = 0.1f * float(c) - 0.05f;
      sd[size_t(c)] = 0.7f + 0.2f * float(c);
      md.push_back(mean[size_t(c)]);
      sdd.push_back(sd[size_t(c)]);
    }
    const Ref standardized = ref_standardize(lcn, md, sdd);
    DeviceBuffer dx(x.numel() * 4), dm(mean.size() * 4), ds(sd.size() * 4),
        ws(cuda::contrast_norm_fused_workspace_floats(sh.n, sh.c, sh.h, sh.w) * 4), dy(x.numel() * 4);
    ASSERT_EQ(cudaMemcpy(dx.get(), x.data(), x.numel() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dm.get(), mean.data(), mean.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(ds.get(), sd.data(), sd.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    for (Format f : {Format{}, Format{DType::F32, Layout::NHWC}, Format{DType::F16, Layout::NHWC},
                     Format{DType::BF16, Layout::NHWC}}) {
      for (bool standardize : {false, true}) {
        SCOPED_TRACE(sh.str() + " " + f.str() + (standardize ? " standardized" : ""));
        ASSERT_EQ(cudaMemset(dy.get(), 0xff, dy.bytes()), cudaSuccess);  // NaN in every type
        const TensorView y{dy.get(), sh, f};
        cuda::contrast_norm_fused(dx.get<float>(), y, taps.data(), size, float(eps),
                                  standardize ? dm.get<float>() : nullptr, standardize ? ds.get<float>() : nullptr,
                                  ws.get<float>(), nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint8_t> raw(y.bytes());
        ASSERT_EQ(cudaMemcpy(raw.data(), dy.get(), raw.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        Tensor got(sh);
        to_f32_nchw(TensorView{raw.data(), sh, f}, got.data());
        for (size_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isfinite(got[i])) << "output " << i << " unwritten";
        const double bound = f.dtype == DType::F32 ? 1e-4 : f.dtype == DType::F16 ? 1e-3 : 8e-3;
        EXPECT_LT(rel_error(got.view(), standardize ? standardized : lcn), bound);
      }
    }
  }
}
#endif

// The planner's fusions on the GPU (Layer::can_fuse): conv + ReLU + 2x2 pool into the fused
// kernel under fp16/bf16 (not under fp32, where the pool runs alone), argmax into the upsample
// before it and the standardisation into the contrast normalisation at every precision; the fused followers do not run (profiled time 0) and results
// agree with the CPU path.
// One profiled pass of g planned at `in` on `gpu`, on random pixels: each layer's stats by name
// (a fused follower's time is 0).
std::map<std::string, LayerStat> profiled_pass(Graph& g, const Shape& in, Backend& gpu) {
  g.plan(in.n, in.h, in.w, gpu);
  g.set_profiling(true);
  Tensor x = random_tensor(in, 3, 0.f, 1.f);
  g.run(x.view());
  std::map<std::string, LayerStat> st;
  for (const auto& s : g.stats()) st[s.name] = s;
  return st;
}

TEST(CudaBackend, PlannerFusesPoolAndArgmax) {
  SCENELAB_REQUIRE_GPU();
  const std::string text =
      "input x channels=3\n"
      "lcn = contrast_norm(x) size=13\n"
      "pre = standardize(lcn)\n"
      "c = conv2d(pre) out=16 k=7 pad=same\n"
      "r = relu(c)\n"
      "p = maxpool2d(r) k=2\n"
      "c2 = conv2d(p) out=32 k=5\n"
      "r2 = relu(c2)\n"
      "p2 = maxpool2d(r2) k=2\n"
      "f = conv2d(p2) out=16 k=1\n"
      "fr = relu(f)\n"
      "s = conv2d(fr) out=5 k=1\n"
      "u = upsample(s, x) mode=bilinear align=geometry\n"
      "labels = argmax(u)\n"
      "output p labels\n";
  Model m = random_model_from_text(text, 31);
  for (const char* prec : {"fp32", "fp16", "bf16"}) {
    for (Shape in : {Shape(3, 3, 45, 61), Shape(1, 3, 16, 17)}) {
      SCOPED_TRACE(std::string(prec) + " " + in.str());
      const bool half = std::string(prec) != "fp32";
      compare(m, in, opts("auto", prec), half ? 2e-2 : 1e-4, std::string("fusions ") + prec,
              half ? 0.97 : 0.999);
      auto gpu = make_backend("cuda", 0, opts("auto", prec));
      Graph g(m);
      std::map<std::string, LayerStat> st = profiled_pass(g, in, *gpu);
      EXPECT_EQ(st["r"].time_ms, 0.0) << "the ReLU was not fused";
      EXPECT_EQ(st["p"].time_ms == 0.0, half) << "pool fused: " << (st["p"].time_ms == 0.0);
      EXPECT_EQ(st["c"].detail.find("fused") != std::string::npos, half) << st["c"].detail;
      EXPECT_EQ(st["labels"].time_ms, 0.0) << "the argmax was not fused";
      EXPECT_EQ(st["pre"].time_ms, 0.0) << "the standardisation was not fused";
      EXPECT_EQ(g.shape_of("p"), Shape(in.n, 16, in.h / 2, in.w / 2));
      // the second convolution's pool after cuDNN (bias, ReLU and pool in one kernel)
      EXPECT_EQ(st["r2"].time_ms, 0.0) << "the ReLU was not fused";
      EXPECT_EQ(st["p2"].time_ms == 0.0, half) << "pool fused: " << (st["p2"].time_ms == 0.0);
      EXPECT_EQ(st["c2"].detail.find("pool") != std::string::npos, half) << st["c2"].detail;
      EXPECT_EQ(g.shape_of("p2"), Shape(in.n, 32, (in.h / 2 - 4) / 2, (in.w / 2 - 4) / 2));
      // the two 1x1 layers as one kernel (half precision)
      EXPECT_EQ(st["fr"].time_ms, 0.0) << "the ReLU was not fused";
      EXPECT_EQ(st["s"].time_ms == 0.0, half) << "pixel-wise pair fused: " << (st["s"].time_ms == 0.0);
      EXPECT_EQ(st["f"].detail.find("1x1 pair") != std::string::npos, half) << st["f"].detail;
    }
  }
}

// rgb_to_yuv followed by contrast normalisation and a standardisation: on the GPU one two-pass
// kernel converting on its loads (the YUV image and the normalised one never written), equal to
// the CPU path at every precision.
TEST(CudaBackend, PlannerFusesYuvIntoContrastNorm) {
  SCENELAB_REQUIRE_GPU();
  const std::string text = std::string(kPreprocessText) +
      "c = conv2d(pre) out=8 k=3 pad=same\n"
      "output c\n";
  Model m = random_model_from_text(text, 17);
  for (const char* prec : {"fp32", "fp16"}) {
    for (Shape in : {Shape(2, 3, 45, 61), Shape(1, 3, 70, 131)}) {
      SCOPED_TRACE(std::string(prec) + " " + in.str());
      const bool half = std::string(prec) != "fp32";
      compare(m, in, opts("auto", prec), half ? 2e-2 : 1e-4, std::string("yuv fused ") + prec, half ? 0.97 : 0.999);
      auto gpu = make_backend("cuda", 0, opts("auto", prec));
      Graph g(m);
      std::map<std::string, LayerStat> st = profiled_pass(g, in, *gpu);
      EXPECT_EQ(st["lcn"].time_ms, 0.0) << "the contrast normalisation was not fused";
      EXPECT_EQ(st["pre"].time_ms, 0.0) << "the standardisation was not fused";
      EXPECT_GT(st["yuv"].time_ms, 0.0);
    }
  }
}

#ifdef SCENELAB_WITH_CUDA
// cuBLAS writes every element of a GEMM's output: C is fresh device memory (never written by
// us), the product read back equals a float64 reference, for the GEMMs of the convolutions
// (conv2d_gemm's band shapes: fp32, TF32 and fp16 inputs into fp32). compute-sanitizer's initcheck
// reporting the read-back as uninitialised would show a store it does not see (docs/RELIABILITY.md:
// the reports on the GEMM convolutions).
TEST(CudaBackend, CublasWritesEveryElementOfItsOutput) {
  SCENELAB_REQUIRE_GPU();
  struct Case {
    int M, N, K;
    const char* mode;
  };
  for (const Case& t : {Case{333, 64, 147, "fp32"}, Case{2304, 64, 784, "fp32"}, Case{2304, 256, 3136, "tf32"},
                        Case{2304, 64, 784, "fp16"}}) {
    SCOPED_TRACE(std::string(t.mode) + " " + std::to_string(t.M) + "x" + std::to_string(t.N) + "x" + std::to_string(t.K));
    const int M = t.M, N = t.N, K = t.K;  // column-major C (M x N) = A (M x K) B (K x N)
    const bool half = std::string(t.mode) == "fp16";
    std::mt19937 rng(12);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N);
    for (auto& v : a) v = half ? half_to_float(float_to_half(u(rng))) : u(rng);
    for (auto& v : b) v = half ? half_to_float(float_to_half(u(rng))) : u(rng);
    std::vector<uint16_t> ah(a.size()), bh(b.size());
    for (size_t i = 0; i < a.size(); ++i) ah[i] = float_to_half(a[i]);
    for (size_t i = 0; i < b.size(); ++i) bh[i] = float_to_half(b[i]);
    const size_t es = half ? 2 : 4;
    DeviceBuffer da(a.size() * es), db(b.size() * es), dc(c.size() * sizeof(float));
    ASSERT_EQ(cudaMemcpy(da.get(), half ? (const void*)ah.data() : a.data(), a.size() * es, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(db.get(), half ? (const void*)bh.data() : b.data(), b.size() * es, cudaMemcpyHostToDevice), cudaSuccess);
    cublasHandle_t h = nullptr;
    ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    if (std::string(t.mode) == "tf32") {
      ASSERT_EQ(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
    }
    const float one = 1.f, zero = 0.f;
    if (half)
      EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, da.get(), CUDA_R_16F, M, db.get(), CUDA_R_16F,
                             K, &zero, dc.get(), CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                CUBLAS_STATUS_SUCCESS);
    else
      EXPECT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, da.get<float>(), M, db.get<float>(), K,
                            &zero, dc.get<float>(), M),
                CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cublasDestroy(h);
    ASSERT_EQ(cudaMemcpy(c.data(), dc.get(), c.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    const double tol = std::string(t.mode) == "tf32" ? 2e-3 : 1e-5;  // TF32 rounds the inputs to 10 bits
    for (int j = 0; j < N; ++j)
      for (int i = 0; i < M; ++i) {
        double want = 0, mag = 0;
        for (int k = 0; k < K; ++k) {
          const double p = double(a[size_t(k) * M + i]) * b[size_t(j) * K + k];
          want += p, mag += std::abs(p);
        }
        ASSERT_NEAR(c[size_t(j) * M + i], want, tol * (1 + mag)) << i << "," << j;
      }
  }
}
#endif

