// Accuracy modes built as graphs: test-time mirroring and ensembles of labelling models. The
// result is an ordinary Model (one graph, its parameters), so every backend, the planner, the
// pipeline and the model file take it as they take one network, and make_model --combine writes
// it to a file.
//
// Each member runs on the image (and, mirrored, on its left-right mirror: `flip`, the net, and
// `flip` back); the class scores of all those passes are averaged as probabilities
// (`softmax_mean`: log of the mean softmax), at the input resolution (node `full`, whose argmax
// is `labels_full`) and at the feature resolution (node `scores`, which the detection head reads).
// The labels are the argmax of the summed probabilities of the passes' full-resolution scores:
// what tools/mirror_gain.py measured in PyTorch. A mirrored pass's `scores` map lies on the
// image exactly where the input width is a multiple of the net's stride (4 for the paper's nets;
// 480 for CamVid); otherwise it lies (width mod stride) pixels to the right of the plain pass's
// map, which the mean at feature resolution does not correct (the labels are unaffected). The
// other members' score maps are resampled onto the first member's grid (bilinear, by where their
// pixels lie on the image; an identity where the grids are the same) before they are averaged.
// A pass costs what the member costs alone: mirroring doubles the work, an ensemble of K models
// multiplies it by K.
#pragma once
#include <vector>

#include "engine/model.h"

namespace scenelab {

// Members: labelling models (nodes `scores`, `full` and `labels_full` = argmax(full)) with the
// same input and the same classes; the first one's name, palette and detection settings carry
// over. One member and no mirroring gives that member back as it is (unchecked). Parameter
// groups are kept for one member, prefixed `netK_` for several. Errors name the model and what
// is missing or different.
Model combine_models(const std::vector<Model>& members, bool mirror);

}  // namespace scenelab
