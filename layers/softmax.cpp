// Softmax over channels at each pixel (max-subtracted for stability).
#include "engine/layer.h"
#include "core/parallel.h"
#include "layers/channel_math.h"
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
    const size_t w = size_t(x.shape.w);
    for (int n = 0; n < x.shape.n; ++n)
      parallel_for(int64_t(x.shape.h), a.threads, [&](int64_t row) {
        for_each_span(w, [&](size_t j, size_t count) { softmax_span(x, y, n, size_t(row) * w + j, count); });
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
