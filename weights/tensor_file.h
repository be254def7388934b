// Tensors in HDF5 files (float32 NCHW datasets), for tools and peer comparisons.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace scenelab {

// Reads dataset `name` (rank 1..4 float32, padded to NCHW at the front: [H,W] -> 1x1xHxW).
Tensor read_tensor_h5(const std::string& path, const std::string& name);
void write_tensors_h5(const std::string& path,
                      const std::vector<std::pair<std::string, TensorView>>& tensors);

}  // namespace scenelab
