// The two networks of Cavigelli et al. (DAC 2015), as graph descriptions:
//   reference   valid 7x7 convs 3->16->64->256 with ReLU, 2x2 max-pool after stages 1 and 2,
//               pixel-wise classifier 256->64->classes (1x1 convs).
//   multiscale  the same extractor with same padding and shared weights on the image at scales
//               1, 1/2, 1/4; coarse maps upsampled to the finest and concatenated (768 channels);
//               classifier 768->64->classes.
// Both start with the preprocessing (RGB->YUV, 13x13 contrast normalisation, standardisation)
// and end with `scores` (classifier output at feature resolution), `labels_full` (scores brought
// bilinearly back onto every input pixel, then argmax).
#pragma once
#include <string>
#include <vector>

#include "engine/graph_desc.h"

namespace scenelab {

std::string network_text(const std::string& name, int num_classes);  // throws on unknown name
std::vector<std::string> network_names();

}  // namespace scenelab
