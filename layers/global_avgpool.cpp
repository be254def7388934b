// Global average pooling: y[n, c] = the mean of x[n, c] over the plane (n x c x 1 x 1; the sum in
// double on the CPU, in float per thread and block on the GPU). ONNX's GlobalAveragePool, e.g. a
// squeeze-and-excitation block's or a context branch's pooling.
#include "core/error.h"
#include "core/parallel.h"
#include "engine/layer.h"
#include "layers/formats.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class GlobalAvgPool : public Layer {
 public:
  explicit GlobalAvgPool(const NodeDesc& d) : Layer(d) { d.attrs.check_known({}); }
  const char* type() const override { return "global_avgpool"; }
  Format format(const std::vector<Format>& in, const Backend& b) const override { return follow_on_gpu(in[0], b); }
  Shape infer_shape(const std::vector<Shape>& in) const override { return Shape(in[0].n, in[0].c, 1, 1); }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView& x = a.in[0];
    const size_t plane = x.shape.plane();
    parallel_for(int64_t(x.shape.n) * x.shape.c, a.threads, [&](int64_t p) {
      const float* s = x.f32() + size_t(p) * plane;
      double sum = 0;
      for (size_t i = 0; i < plane; ++i) sum += s[i];
      a.out.f32()[p] = float(sum / double(plane));
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::global_avgpool(a.in[0], a.out, ctx.stream);
  }
#endif
};

}  // namespace

std::unique_ptr<Layer> make_global_avgpool(const NodeDesc& d) { return std::make_unique<GlobalAvgPool>(d); }

}  // namespace scenelab
