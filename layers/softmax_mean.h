// What the softmax_mean layer (layers/softmax_mean.cpp) and its GPU kernel share.
#pragma once

namespace scenelab {

// Inputs of one softmax_mean node, at most (a mirrored ensemble of four models at four scales).
constexpr int kSoftmaxMeanMaxInputs = 32;

}  // namespace scenelab
