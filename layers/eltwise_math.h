// The element-wise layers' arithmetic, one definition for the CPU paths and the kernels
// (layers/activation.cpp, layers/channel_op.cpp, layers/binary.cpp; kernels/eltwise.cu).
#pragma once
#include <cmath>

#include "core/host_device.h"

namespace scenelab {

// activation fn=...: y = f(x; a, b)
enum class ActFn : int { Sigmoid, Tanh, LeakyRelu, Clip, HardSigmoid, HardSwish };
SL_HD inline float activate(ActFn f, float x, float a, float b) {
  switch (f) {
    case ActFn::Sigmoid: return 1.f / (1.f + expf(-x));
    case ActFn::Tanh: return tanhf(x);
    case ActFn::LeakyRelu: return x >= 0.f ? x : a * x;                     // a: the slope
    case ActFn::Clip: return fminf(fmaxf(x, a), b);                          // [a, b]; NaN stays NaN
    case ActFn::HardSigmoid: return fminf(fmaxf(a * x + b, 0.f), 1.f);      // ONNX: a 0.2, b 0.5
    case ActFn::HardSwish: return x * fminf(fmaxf(x / 6.f + 0.5f, 0.f), 1.f);
  }
  return x;
}

// channel_op op=...: y = x (op) v[c]; affine: x v[c] + u[c] (a batch normalisation's scale and shift)
enum class ChannelOp : int { Mul, Add, Prelu, Affine };
SL_HD inline float channel_apply(ChannelOp op, float x, float v, float u = 0.f) {
  switch (op) {
    case ChannelOp::Mul: return x * v;
    case ChannelOp::Add: return x + v;
    case ChannelOp::Prelu: return x >= 0.f ? x : v * x;
    case ChannelOp::Affine: return x * v + u;
  }
  return x;
}

// binary op=...: y = a (op) b
enum class BinaryOp : int { Add, Sub, Mul };
SL_HD inline float binary_apply(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
  }
  return a;
}

}  // namespace scenelab
