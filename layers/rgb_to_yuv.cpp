// RGB (0..1) to YUV with the coefficients of Torch's image.rgb2yuv (BT.601 analogue YUV):
//   Y =  0.299 R + 0.587 G + 0.114 B
//   U = -0.14713 R - 0.28886 G + 0.436 B
//   V =  0.615 R - 0.51499 G - 0.10001 B
#include "core/error.h"
#include "engine/layer.h"
#include "core/parallel.h"
#ifdef SCENELAB_WITH_CUDA
#include "engine/cuda_backend.h"
#include "kernels/layers_cuda.h"
#include "layers/contrast_norm.h"
#endif

namespace scenelab {
namespace {

constexpr float kRgbToYuv[3][3] = {{0.299f, 0.587f, 0.114f},
                                   {-0.14713f, -0.28886f, 0.436f},
                                   {0.615f, -0.51499f, -0.10001f}};

class RgbToYuv : public Layer {
 public:
  explicit RgbToYuv(const NodeDesc& d) : Layer(d) { d.attrs.check_known({}); }
  const char* type() const override { return "rgb_to_yuv"; }
  Shape infer_shape(const std::vector<Shape>& in) const override {
    SL_REQUIRE(in[0].c == 3, "rgb_to_yuv '", name_, "' needs 3 channels, got ", in[0].c);
    return in[0];
  }
  void forward_cpu(const ForwardArgs& a) const override {
    const TensorView &x = a.in[0], &y = a.out;
    for (int n = 0; n < x.shape.n; ++n) {
      const float *r = x.channel(n, 0), *g = x.channel(n, 1), *b = x.channel(n, 2);
      parallel_for(int64_t(x.shape.h), a.threads, [&](int64_t row) {
        for (size_t i = size_t(row) * x.shape.w; i < size_t(row + 1) * x.shape.w; ++i)
          for (int c = 0; c < 3; ++c)
            y.channel(n, c)[i] =
                kRgbToYuv[c][0] * r[i] + kRgbToYuv[c][1] * g[i] + kRgbToYuv[c][2] * b[i];
      });
    }
  }
  // On the GPU a contrast normalisation after it (and a standardisation after that) runs as one
  // two-pass kernel that converts to YUV as it loads the image (layers/contrast_norm.h).
  bool can_fuse(const std::vector<Epilogue>& chain, const std::vector<Shape>& in,
                const std::vector<Format>& /*in_formats*/, const Backend& backend) const override {
#ifdef SCENELAB_WITH_CUDA
    using K = Epilogue::Kind;
    return backend.cuda() && (chain.size() == 1 || chain.size() == 2) && chain[0].kind == K::ContrastNorm &&
           cuda::contrast_norm_fused_supported(chain[0].k, in[0].c) &&
           (chain.size() == 1 || (chain[1].kind == K::Standardize && chain[1].params));
#else
    (void)chain, (void)in, (void)backend;
    return false;
#endif
  }
  size_t fused_workspace_floats(const std::vector<Epilogue>& /*chain*/, const std::vector<Shape>& in,
                                const Shape& /*out*/, const Backend& /*backend*/) const override {
#ifdef SCENELAB_WITH_CUDA
    const Shape& s = in[0];
    return cuda::contrast_norm_fused_workspace_floats(s.n, s.c, s.h, s.w);
#else
    (void)in;
    return 0;
#endif
  }
#ifdef SCENELAB_WITH_CUDA
  void forward_cuda(const ForwardArgs& a, const CudaContext& ctx) const override {
    if (a.epilogue) {  // can_fuse said so
      const auto& chain = *a.epilogue;
      contrast_norm_fused_cuda(a, ctx, chain[0], chain.size() > 1 ? &chain[1] : nullptr, true);
      return;
    }
    cuda::rgb_to_yuv(a.in[0].f32(), a.out.f32(), a.in[0].shape.n, a.in[0].shape.plane(), ctx.stream);
  }
#endif
};

}  // namespace

std::unique_ptr<Layer> make_rgb_to_yuv(const NodeDesc& d) { return std::make_unique<RgbToYuv>(d); }

}  // namespace scenelab
