// The refine layer's blending weights (layers/refine.cpp), shared by its CPU and GPU paths.
#pragma once
#include <cmath>
#include <cstddef>

#include "core/host_device.h"

namespace scenelab {

// Attribute ranges of refine: sigma_s in pixels, sigma_r in the image's units, iterations.
constexpr double kRefineMaxSigmaS = 4096, kRefineMaxSigmaR = 1e3;
constexpr int kRefineMaxIterations = 8;

// The first iteration's weight of two neighbours is exp(-scale * (1 + ratio * distance)).
struct RefineCoefficients {
  float scale;  // sqrt(2) / sigma_0
  float ratio;  // sigma_s / sigma_r
};

inline RefineCoefficients refine_coefficients(double sigma_s, double sigma_r, int iterations) {
  const double sigma0 = sigma_s * std::sqrt(3.0) * std::pow(2.0, iterations - 1) /
                        std::sqrt(std::pow(4.0, iterations) - 1);
  return {float(std::sqrt(2.0) / sigma0), float(sigma_s / sigma_r)};
}

// The L1 distance of pixels i and j of a frame of the image (`channels` planes of `plane` values
// each, starting at g) across its channels.
SL_HD inline float refine_distance(const float* g, int channels, size_t plane, size_t i, size_t j) {
  float d = 0;
  for (int ch = 0; ch < channels; ++ch) d += fabsf(g[ch * plane + i] - g[ch * plane + j]);
  return d;
}

// The first iteration's weight of two pixels at that distance is exp of this: a float, or on the
// CPU an Eigen array of a span's distances (layers/refine.cpp).
template <class T>
SL_HD inline auto refine_exponent(const T& distance, RefineCoefficients k) {
  return -k.scale * (1.f + k.ratio * distance);
}

// The first iteration's weight of two pixels at that distance.
SL_HD inline float refine_weight(float distance, RefineCoefficients k) { return expf(refine_exponent(distance, k)); }

}  // namespace scenelab
