// The mean of several class-score maps' softmax probabilities, as class scores: at each pixel
// y_c = log(mean_k softmax(x_k)_c), so that softmax(y) is the mean probability and argmax(y) the
// class it favours. Computed in log space (log softmax, then a log-sum-exp over the inputs), so
// every output is finite for finite inputs however large the scores. Inputs: one or more maps of
// one shape. Used by test-time mirroring and ensembles (job/combine.h). f32 NCHW.
#include <cmath>

#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#include "layers/channel_math.h"
#include "layers/softmax_mean.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#endif

namespace scenelab {
namespace {

class SoftmaxMean : public Layer {
 public:
  explicit SoftmaxMean(const NodeDesc& d) : Layer(d) {
    d.attrs.check_known({});
    SL_REQUIRE(d.inputs.size() <= size_t(kSoftmaxMeanMaxInputs), "softmax_mean '", d.name, "': at most ",
               kSoftmaxMeanMaxInputs, " inputs, got ", d.inputs.size());
  }
  const char* type() const override { return "softmax_mean"; }
  int num_inputs() const override { return -1; }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    for (size_t k = 1; k < in.size(); ++k)
      SL_REQUIRE(in[k] == in[0], "softmax_mean '", name(), "': input ", k + 1, " has shape ", in[k].str(),
                 ", input 1 ", in[0].str(), " (the inputs must be alike)");
    return in[0];
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const Shape& s = a.out.shape;
    const int K = int(a.in.size()), C = s.c;
    const float log_k = std::log(float(K));
    const size_t w = size_t(s.w);
    for (int n = 0; n < s.n; ++n)
      parallel_for(int64_t(s.h), a.threads, [&](int64_t row) {
        for_each_span(w, [&](size_t j, size_t count) {
          const size_t i = size_t(row) * w + j;
          SpanScratch lse[kSoftmaxMeanMaxInputs], m_buf, sum_buf;
          for (int k = 0; k < K; ++k) log_sum_exp_span(a.in[size_t(k)], n, i, count, lse[k]);
          auto m = m_buf(count), sum = sum_buf(count);
          for (int c = 0; c < C; ++c) {  // log-sum-exp over the inputs of their log softmax
            const auto term = [&](int k) { return channel_span(a.in[size_t(k)], n, c, i, count) - lse[k](count); };
            m = term(0);
            for (int k = 1; k < K; ++k) m = m.max(term(k));
            sum.setZero();
            for (int k = 0; k < K; ++k) sum += (term(k) - m).exp();
            sum = sum.log();
            SpanArray(a.out.channel(n, c) + i, int64_t(count)) = m + sum - log_k;
          }
        });
      });
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    cuda::softmax_mean(a.in, a.out, ctx.stream);
  }
#endif

};

}  // namespace

std::unique_ptr<Layer> make_softmax_mean(const NodeDesc& d) { return std::make_unique<SoftmaxMean>(d); }

}  // namespace scenelab
