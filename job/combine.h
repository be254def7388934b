// Accuracy modes built as graphs: test-time mirroring, test-time scaling and ensembles of
// labelling models. The result is an ordinary Model (one graph, its parameters), so every backend,
// the planner, the pipeline and the model file take it as they take one network, and make_model
// --combine writes it to a file.
//
// Each member runs on the image at each scale (`upsample(image) scale=S`, bilinear, the image
// itself at 1) and, mirrored, on that image's left-right mirror (`flip`, the net, and `flip`
// back); the class scores of all those passes are averaged as probabilities (`softmax_mean`: log
// of the mean softmax), at the input resolution (node `full`, whose argmax is `labels_full`) and
// at the feature resolution (node `scores`, which the detection head reads). The labels are the
// argmax of the summed probabilities of the passes' full-resolution scores, a scaled pass's
// resampled onto the image where its pixels lie: what tools/mirror_gain.py measures in PyTorch.
// Before the mean at feature resolution every score map but the first member's plain one (at
// scale 1, or the first scale without 1) is resampled onto that one's grid where its pixels lie on
// the image (flip mirrors a map's geometry about the image's middle; upsample align=geometry):
// an exact copy where the grids agree (members of one architecture at one scale, and a mirrored
// pass's map where the map is symmetric about the image's middle: the multiscale net's at widths
// that are multiples of 4, CamVid's 480 among them, the reference net's at few), bilinear
// elsewhere. A pass costs what the member costs alone at its scale (about S^2): mirroring doubles
// the work, an ensemble of K models multiplies it by K.
#pragma once
#include <string>
#include <vector>

#include "engine/model.h"

namespace scenelab {

// The range of a pass's scale (combine_models).
constexpr double kMinPassScale = 0.125, kMaxPassScale = 4;

// Members: labelling models (nodes `scores`, `full` and `labels_full` = argmax(full)) with the
// same input and the same classes; the first one's name, palette and detection settings carry
// over. `scales`: the sizes each member runs at, as factors of the input's (each in
// [kMinPassScale, kMaxPassScale], none twice; {1}: the image alone). At most
// kSoftmaxMeanMaxInputs passes (members x views x scales). One member, no mirroring and scales {1}
// gives that member back as it is (unchecked). Parameter groups are kept for one member, prefixed
// `netK_` for several. Errors name the model and what is missing or different.
Model combine_models(const std::vector<Model>& members, bool mirror, const std::vector<double>& scales = {1.0});

// Scales as --scales writes them: "0.5,0.75,1".
std::string scales_text(const std::vector<double>& scales);

// Edge-aware refinement of a labelling model's class probabilities by the refine layer (the domain
// transform's recursive filter guided by the image, layers/refine.cpp): sigma_s pixels of spread
// where the image is flat, sigma_r the step of the image's values (RGB in [0, 1], summed over the
// channels) as far as sigma_s pixels; sigma_s = 0: none.
struct Refinement {
  double sigma_s = 0, sigma_r = 0;
  int iterations = 3;
  bool on() const { return sigma_s > 0; }
};

// The settings chosen across CamVid's held-out sequences (weights/MODELS.md at fb0dc9a, "Edge-aware
// refinement"): what --refine applies.
constexpr Refinement kDefaultRefinement{40, 0.2, 3};

// `m` with its full-resolution scores refined: `full` becomes `refine(full_unrefined, image)` (the
// model's own `full` renamed) and `labels_full` its argmax; `scores`, which the detection head
// reads, is unchanged. Refinement off gives `m` back. Errors: not a labelling model, already
// refined, settings out of the layer's ranges.
Model refine_model(const Model& m, const Refinement& r);

// "40,0.2" (and ",K" when the iterations are not 3), as --refine writes them.
std::string refinement_text(const Refinement& r);

// The model files `paths` read and combined (one file, not mirrored, scale 1: that model as it is),
// then refined (`refine`, off by default). An empty list or an empty name is an error; so is any
// file read_model refuses.
Model read_combined(const std::vector<std::string>& paths, bool mirror, const std::vector<double>& scales = {1.0},
                    const Refinement& refine = {});

}  // namespace scenelab
