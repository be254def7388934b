// Concatenation along channels; all inputs share batch and spatial size.
#include <cstring>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#include "layers/formats.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class Concat : public Layer {
 public:
  explicit Concat(const NodeDesc& d) : Layer(d) { d.attrs.check_known({}); }
  const char* type() const override { return "concat"; }
  Format format(const std::vector<Format>& in, const Backend& b) const override {
    return follow_on_gpu(in[0], b);
  }
  int num_inputs() const override { return -1; }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    Shape s = in[0];
    for (size_t i = 1; i < in.size(); ++i) {
      SL_REQUIRE(in[i].n == s.n && in[i].h == s.h && in[i].w == s.w, "concat '", name_,
                 "': input ", i, " is ", in[i].str(), " but input 0 is ", in[0].str());
      s.c += in[i].c;
    }
    return s;
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView& y = a.out;
    const size_t plane = y.shape.plane();
    // One job per output channel plane.
    std::vector<const float*> src;
    for (int n = 0; n < y.shape.n; ++n)
      for (const auto& x : a.in)
        for (int c = 0; c < x.shape.c; ++c) src.push_back(x.channel(n, c));
    parallel_for(int64_t(src.size()), a.threads, [&](int64_t p) {
      std::memcpy(y.f32() + size_t(p) * plane, src[size_t(p)], plane * sizeof(float));
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::concat(a.in, a.out, ctx.stream);
  }
#endif
};

}  // namespace

std::unique_ptr<Layer> make_concat(const NodeDesc& d) { return std::make_unique<Concat>(d); }

}  // namespace scenelab
