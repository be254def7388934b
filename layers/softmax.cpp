// Softmax over channels at each pixel (max-subtracted for stability).
#include <algorithm>
#include <cmath>

#include "engine/layer.h"
#include "engine/parallel.h"
#include "layers/formats.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class Softmax : public Layer {
 public:
  explicit Softmax(const NodeDesc& d) : Layer(d) { d.attrs.check_known({}); }
  const char* type() const override { return "softmax"; }
  Format format(const std::vector<Format>& in, const Backend& b) const override {
    return follow_on_gpu(in[0], b);
  }
  Shape infer_shape(const std::vector<Shape>& in) const override { return in[0]; }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    for (int n = 0; n < x.shape.n; ++n)
      parallel_for(int64_t(x.shape.h), a.threads, [&](int64_t row) {
        for (size_t i = size_t(row) * x.shape.w; i < size_t(row + 1) * x.shape.w; ++i) {
          float m = x.channel(n, 0)[i];
          for (int c = 1; c < x.shape.c; ++c) m = std::max(m, x.channel(n, c)[i]);
          float s = 0;
          for (int c = 0; c < x.shape.c; ++c) {
            float e = std::exp(x.channel(n, c)[i] - m);
            y.channel(n, c)[i] = e;
            s += e;
          }
          const float inv = 1.f / s;
          for (int c = 0; c < x.shape.c; ++c) y.channel(n, c)[i] *= inv;
        }
      });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::softmax(a.in[0], a.out, ctx.stream);
  }
#endif
};

}  // namespace

std::unique_ptr<Layer> make_softmax(const NodeDesc& d) { return std::make_unique<Softmax>(d); }

}  // namespace scenelab
