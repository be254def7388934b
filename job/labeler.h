// Runs a scene-labelling model on images: plans the graph per input size (cached), runs it and
// returns the class-index map at the input resolution. Used by label_image and the evaluators.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/graph.h"
#include "engine/image_io.h"
#include "engine/model.h"
#include "engine/plans.h"

namespace scenelab {

struct LabelMap {
  int width = 0, height = 0;
  std::vector<uint8_t> labels;  // class index per pixel, row-major
};

class Labeler {
 public:
  // The graph must output `labels_full` (class index per input pixel) as the networks do.
  // keep: sizes and batches kept planned (Plans::Options::keep).
  Labeler(const Model& model, std::unique_ptr<Backend> backend, int keep = 1);
  LabelMap label(const Image8& rgb);
  double last_ms() const { return last_ms_; }      // forward pass, ms
  const Backend& backend() const { return plans_.backend(); }
  // The graph last run (after label(): its scores and other nodes), and the plans (the API runs
  // its batches through them).
  const Graph& graph() const { return plans_.latest().graph; }
  Plans& plans() { return plans_; }
  // How the Labeler plans: 8-bit pixels in, the class indices (labels_full) out as bytes.
  static const PlanIO& plan_io();
  // After label(): softmax probabilities of the classes `cls` over the node `scores` (feature
  // resolution, one row-major H x W plane each, in the order given) and where that map lies on
  // the input image. The scores are fetched and normalised once for all of them.
  std::vector<std::vector<float>> class_probabilities(const std::vector<int>& cls, int* h, int* w,
                                                      Geometry* geometry) const;

 private:
  Plans plans_;
  double last_ms_ = 0;
};

// Softmax probabilities of the classes `cls` from a score map (batch 1, classes x H x W), one
// row-major H x W plane each, in the order given.
std::vector<std::vector<float>> class_probabilities(const TensorView& scores,
                                                    const std::vector<int>& cls);

Image8 colorize(const LabelMap& m, const std::vector<std::array<uint8_t, 3>>& palette);
// Colours over the image: each byte (1 - alpha) a + alpha b, alpha (0..1) in 256ths
// (overlay_weight), rounded to nearest; alpha 0.5 is exactly (a + b + 1) / 2.
int overlay_weight(float alpha);
// A colour for every byte value, 3 bytes each (labels past the palette take its last colour):
// the overlay's table, on the host and on the GPU (OverlayRows). The palette must not be empty.
using ColourTable = std::array<uint8_t, 256 * 3>;
ColourTable colour_table(const std::vector<std::array<uint8_t, 3>>& palette);
Image8 overlay(const Image8& rgb, const Image8& color, float alpha = 0.5f);
// The same from the class map, without making the colour image first.
Image8 overlay_labels(const Image8& rgb, const LabelMap& m,
                      const std::vector<std::array<uint8_t, 3>>& palette, float alpha = 0.5f);
std::vector<size_t> histogram(const LabelMap& m, int classes);

}  // namespace scenelab
