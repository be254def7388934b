// Concatenation along channels; all inputs share batch and spatial size.
#include <cstring>

#include "engine/error.h"
#include "engine/layer.h"
#include "engine/parallel.h"
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
      std::memcpy(y.data + size_t(p) * plane, src[size_t(p)], plane * sizeof(float));
    });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    const Shape& y = a.out.shape;
    float* dst = a.out.data;
    for (int n = 0; n < y.n; ++n)
      for (const auto& x : a.in) {
        const size_t bytes = size_t(x.shape.c) * x.shape.plane() * sizeof(float);
        SL_CUDA_CHECK(cudaMemcpyAsync(dst, x.channel(n, 0), bytes, cudaMemcpyDeviceToDevice,
                                      ctx.stream),
                      str_cat("concat '", name_, "'"));
        dst += bytes / sizeof(float);
      }
  }
#endif
};

}  // namespace

std::unique_ptr<Layer> make_concat(const NodeDesc& d) { return std::make_unique<Concat>(d); }

}  // namespace scenelab
