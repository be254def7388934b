// ReLU, max(0, x). Usually fused into the preceding conv2d by the graph planner.
#include <algorithm>

#include "engine/layer.h"
#include "core/parallel.h"
#include "layers/formats.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class Relu : public Layer {
 public:
  explicit Relu(const NodeDesc& d) : Layer(d) { d.attrs.check_known({}); }
  const char* type() const override { return "relu"; }
  Format format(const std::vector<Format>& in, const Backend& b) const override {
    return follow_on_gpu(in[0], b);
  }
  Shape infer_shape(const std::vector<Shape>& in) const override { return in[0]; }
  Epilogue as_epilogue() const override { return {Epilogue::Kind::Relu}; }
  void forward_cpu(const ForwardArgs& a) const override {
    const size_t n = a.out.shape.numel(), chunk = 1 << 16;
    parallel_for(int64_t((n + chunk - 1) / chunk), a.threads, [&](int64_t b) {
      const size_t i0 = size_t(b) * chunk, i1 = std::min(n, i0 + chunk);
      for (size_t i = i0; i < i1; ++i) a.out.f32()[i] = std::max(a.in[0].f32()[i], 0.f);
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::relu(a.in[0], a.out, ctx.stream);
  }
#endif
};

}  // namespace

std::unique_ptr<Layer> make_relu(const NodeDesc& d) { return std::make_unique<Relu>(d); }

}  // namespace scenelab
