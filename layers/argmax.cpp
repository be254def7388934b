// Index of the largest channel at each pixel (as float); ties go to the lowest index and NaN
// scores never win (all-NaN gives 0).
#include <algorithm>
#include <cstring>

#include "engine/layer.h"
#include "core/parallel.h"
#include "layers/formats.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class Argmax : public Layer {
 public:
  explicit Argmax(const NodeDesc& d) : Layer(d) { d.attrs.check_known({}); }
  const char* type() const override { return "argmax"; }
  Format format(const std::vector<Format>& in, const Backend& b) const override {
    return follow_on_gpu(in[0], b);
  }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    return Shape(in[0].n, 1, in[0].h, in[0].w);
  }
  Epilogue as_epilogue() const override { return {Epilogue::Kind::Argmax}; }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView& x = a.in[0];
    for (int n = 0; n < x.shape.n; ++n) {
      float* out = a.out.channel(n, 0);
      parallel_for(int64_t(x.shape.h), a.threads, [&](int64_t row) {
        // spans of a row, the channels outer: each pass runs over contiguous pixels (vectorised)
        constexpr size_t kSpan = 256;
        const size_t end = size_t(row + 1) * x.shape.w;
        for (size_t i0 = size_t(row) * x.shape.w; i0 < end; i0 += kSpan) {
          const size_t count = std::min(kSpan, end - i0);
          float bv[kSpan], best[kSpan];
          const float* p0 = x.channel(n, 0) + i0;
          for (size_t j = 0; j < count; ++j) bv[j] = p0[j], best[j] = 0.f;
          for (int c = 1; c < x.shape.c; ++c) {
            const float* p = x.channel(n, c) + i0;
            const float fc = float(c);
            for (size_t j = 0; j < count; ++j) {
              const float v = p[j];
              const bool take = v > bv[j] || (bv[j] != bv[j] && v == v);  // a NaN loses to any number
              bv[j] = take ? v : bv[j];
              best[j] = take ? fc : best[j];
            }
          }
          std::memcpy(out + i0, best, count * sizeof(float));
        }
      });
    }
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::argmax(a.in[0], a.out, ctx.stream);
  }
#endif
};

}  // namespace

std::unique_ptr<Layer> make_argmax(const NodeDesc& d) { return std::make_unique<Argmax>(d); }

}  // namespace scenelab
