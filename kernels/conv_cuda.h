// GPU convolution (stride 1, odd square kernel, zero padding `pad`), NCHW, with bias and an
// optional fused ReLU. Two of the paper's algorithms (Cavigelli et al. 2015, sec. 4):
//   conv2d_gemm    explicit im2col of a band of output rows + cuBLAS SGEMM (the matrix X of the
//                  paper), band by band so the workspace stays bounded; 1x1 convolutions are a
//                  single GEMM on the input itself;
//   conv2d_gemm2s  the same with two alternating streams: the im2col of band i+1 runs on the side
//                  stream while the GEMM of band i runs on the main one, each half of the
//                  workspace holding one band (events order the reuse);
//   conv2d_direct  input tile and filters in shared memory, each thread computing several output
//                  pixels of several output channels, so a fetched coefficient feeds many FMAs.
#pragma once
#ifdef SCENELAB_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace scenelab::cuda {

struct ConvShape {
  int n, cin, h, w, cout, k, pad, ho, wo;
};

// Output rows per band so that one band's im2col fits `ws_floats`.
int conv_band_rows(const ConvShape& c, size_t ws_floats);
void conv2d_gemm(const ConvShape& c, const float* x, const float* w, const float* b, float* y,
                 bool relu, float* ws, size_t ws_floats, cublasHandle_t h, cudaStream_t s);
// ws must hold 2 * conv_band_rows(c, ws_floats / 2) rows of im2col (two buffers).
// streams/events: main, side; events[0] start, [1..2] im2col done, [3..4] GEMM done per half.
void conv2d_gemm2s(const ConvShape& c, const float* x, const float* w, const float* b, float* y,
                   bool relu, float* ws, size_t ws_floats, cublasHandle_t h, cudaStream_t main,
                   cudaStream_t side, const cudaEvent_t* events);
void conv2d_direct(const ConvShape& c, const float* x, const float* w, const float* b, float* y,
                   bool relu, cudaStream_t s);

}  // namespace scenelab::cuda
#endif
