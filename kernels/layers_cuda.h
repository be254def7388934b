// Launchers of the GPU kernels of the simple layers (one entry point each; see the layer files
// for what they compute). All take device pointers and run on `s` without synchronising.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "engine/layer.h"
#include "layers/conv_window.h"
#include "layers/pool_window.h"
#include "layers/refine_weights.h"

namespace scenelab::cuda {

// The formats the simple layers' kernels take (input and output alike): f32 NCHW, and f32,
// f16 or bf16 NHWC.
inline bool supports(Format f) {
  return f == Format{} || (f.layout == Layout::NHWC && f.dtype != DType::U8);
}

void relu(const TensorView& x, const TensorView& y, cudaStream_t s);
// The element-wise layers (kernels/eltwise.cu; layers/eltwise_math.h): fn an ActFn, op a
// ChannelOp (v: c floats on the device) or a BinaryOp (b: y's shape, or n x c x 1 x 1).
void activation(const TensorView& x, const TensorView& y, int fn, float a, float b, cudaStream_t s);
// u: the shift of op=affine (else null); relu: a fused ReLU.
void channel_op(const TensorView& x, const TensorView& y, int op, const float* v, const float* u, bool relu,
                cudaStream_t s);
void binary(const TensorView& a, const TensorView& b, const TensorView& y, int op, bool relu, cudaStream_t s);
void global_avgpool(const TensorView& x, const TensorView& y, cudaStream_t s);
// The conv layer's direct convolution (kernels/conv_general.cu), f32 NCHW; w: [cout, cin / groups,
// kh, kw], b: [cout] or null.
struct ConvGeneral {
  int kh, kw, sh, sw, dh, dw, pt, pl, groups;
};
void conv_general(const TensorView& x, const TensorView& y, const float* w, const float* b, const ConvGeneral& c,
                  bool relu, cudaStream_t s);
// The depthwise case (groups = input channels, any channel multiplier) on NHWC of any type (x, y
// alike); weights and bias as above.
void conv_depthwise_nhwc(const TensorView& x, const TensorView& y, const float* w, const float* b,
                         const ConvGeneral& c, bool relu, cudaStream_t s);
// The pool layer (kernels/pool.cu): f32 NCHW, or NHWC (f32, f16, bf16).
void pool(const TensorView& x, const TensorView& y, const PoolWindow& p, cudaStream_t s);
// The conv_transpose layer (kernels/conv_transpose.cu), f32 NCHW; w: [cin, cout / groups, kh, kw].
void conv_transpose(const TensorView& x, const TensorView& y, const float* w, const float* b, const ConvTWindow& c,
                    bool relu, cudaStream_t s);
void maxpool2d(const TensorView& x, const TensorView& y, int k, int stride, cudaStream_t s);
// y = maxpool(act(x + b)) computed as act(maxpool(x) + b), bit for bit the same: a convolution's
// raw output pooled with its bias and ReLU (b may be null). For 2-byte NHWC tensors whose
// channels are a multiple of 8, 16-byte aligned.
void bias_relu_maxpool(const TensorView& x, const float* b, bool relu, const TensorView& y, int k, int stride,
                       cudaStream_t s);
void downscale(const TensorView& x, const TensorView& y, int f, cudaStream_t s);
void upsample(const TensorView& x, const TensorView& y, bool geometry, bool bilinear,
              const Geometry& gin, const Geometry& gout, cudaStream_t s);
void argmax(const TensorView& x, const TensorView& y, cudaStream_t s);
// upsample then argmax in one pass (the argmax fused into the upsample): y (n x 1 x h x w, the
// format of x) holds the index of the largest resampled channel at each output pixel, computed
// from the resampled values in float (not rounded to x's type between the two).
void upsample_argmax(const TensorView& x, const TensorView& y, bool geometry, bool bilinear,
                     const Geometry& gin, const Geometry& gout, cudaStream_t s);
void softmax(const TensorView& x, const TensorView& y, cudaStream_t s);
// The softmax probability of class `cls` at each pixel of frame `frame` of x (f32 NCHW or an
// NHWC type), computed as job/labeler.h's class_probabilities does, into out (h x w floats).
void class_probability(const TensorView& x, int frame, int cls, float* out, cudaStream_t s);
void concat(const std::vector<TensorView>& xs, const TensorView& y, cudaStream_t s);
// Mirror of each plane (f32 NCHW): each row reversed, or the rows (rows = true).
void flip(const TensorView& x, const TensorView& y, bool rows, cudaStream_t s);
// y = log(mean_k softmax(x_k)) over channels (f32 NCHW, 1-kSoftmaxMeanMaxInputs inputs alike).
void softmax_mean(const std::vector<TensorView>& xs, const TensorView& y, cudaStream_t s);
// y = log of softmax(x) filtered by the domain transform guided by g (layers/refine.cpp), all f32
// NCHW; workspace: 2 x n x h x w floats (the first iteration's weights along rows and columns).
void refine(const TensorView& x, const TensorView& g, const TensorView& y, float* workspace, RefineCoefficients k,
            int iterations, cudaStream_t s);
// y = act(y + b[c]) in place on an NHWC tensor of any dtype (the cuDNN convolutions' epilogue).
void bias_act_nhwc(const TensorView& y, const float* b, bool relu, cudaStream_t s);
void rgb_to_yuv(const float* x, float* y, int n, size_t plane, cudaStream_t s);
// x: f32 NCHW; y: f32 NCHW or any NHWC (the network's activation format).
void standardize(const float* x, const TensorView& y, const float* mean, const float* sd,
                 cudaStream_t s);
// kernel: the normalised 1-D Gaussian (size taps, size <= 63); workspace:
// contrast_norm_workspace_floats(planes, plane) floats.
inline size_t contrast_norm_workspace_floats(size_t planes, size_t plane) {
  // three planes of floats, then per plane its sum and up to 256 block partials (doubles)
  return 3 * planes * plane + 2 * planes * 257 + 2;
}
void contrast_norm(const float* x, float* y, int planes, int h, int w, const float* kernel,
                   int size, float eps, float* workspace, cudaStream_t s);
// The same in two passes over the image (kernels/layers_cuda.cu), then standardised with the
// per-channel mean and sd (both null: not standardised) and written in y's format (f32 NCHW or
// any NHWC): x f32 NCHW (n x c x h x w as y). For windows of 13 and up to 4 channels.
bool contrast_norm_fused_supported(int size, int channels);
size_t contrast_norm_fused_workspace_floats(int n, int c, int h, int w);
// rgb_to_yuv: x is RGB, each channel converted to YUV as it is loaded (rgb_to_yuv fused before).
void contrast_norm_fused(const float* x, const TensorView& y, const float* kernel, int size, float eps,
                         const float* mean, const float* sd, float* workspace, cudaStream_t s,
                         bool rgb_to_yuv = false);
// dst[c][i] = max(src[c][i] + b[c], 0) (relu) or src + b, over `channels` rows of `cols` values,
// rows ld_src / ld_dst apart; in place when src == dst (then nothing to do without b and relu).
// The convolutions' bias/ReLU epilogue (also copying a GEMM's aligned band into the output).
void bias_act(const float* src, size_t ld_src, float* dst, size_t ld_dst, const float* b,
              int channels, size_t cols, bool relu, cudaStream_t s);

}  // namespace scenelab::cuda
#endif
