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
// what tools/mirror_gain.py measured in PyTorch. Before the mean at feature resolution every score
// map but the first member's plain one is resampled onto that one's grid where its pixels lie on
// the image (flip mirrors a map's geometry about the image's middle; upsample align=geometry):
// an exact copy where the grids agree (members of one architecture, and a mirrored pass's map
// where the map is symmetric about the image's middle: the multiscale net's at widths that are
// multiples of 4, CamVid's 480 among them, the reference net's at few), bilinear elsewhere.
// A pass costs what the member costs alone: mirroring doubles the work, an ensemble of K models
// multiplies it by K.
#pragma once
#include <string>
#include <vector>

#include "engine/model.h"

namespace scenelab {

// Members: labelling models (nodes `scores`, `full` and `labels_full` = argmax(full)) with the
// same input and the same classes; the first one's name, palette and detection settings carry
// over. One member and no mirroring gives that member back as it is (unchecked). Parameter
// groups are kept for one member, prefixed `netK_` for several. Errors name the model and what
// is missing or different.
Model combine_models(const std::vector<Model>& members, bool mirror);

// The model files `paths` read and combined (one file, not mirrored: that model as it is). An
// empty list or an empty name is an error; so is any file read_model refuses.
Model read_combined(const std::vector<std::string>& paths, bool mirror);

}  // namespace scenelab
