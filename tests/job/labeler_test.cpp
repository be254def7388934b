// The overlay label_image writes: each pixel the photo blended with its class colour, checked
// against a plain double-precision blend on random pixels and labels (some past the palette,
// which take its last colour), odd sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "job/labeler.h"

using namespace scenelab;

TEST(Labeler, OverlayBlendsEachPixelWithItsClassColour) {
  std::mt19937 rng(5);
  const std::vector<std::array<uint8_t, 3>> palette = {{{0, 0, 0}}, {{255, 255, 255}}, {{200, 17, 90}},
                                                       {{3, 250, 128}}};
  for (auto [w, h] : {std::pair<int, int>{1, 1}, {37, 23}}) {
    Image8 rgb{w, h, 3, std::vector<uint8_t>(size_t(w) * h * 3)};
    for (auto& v : rgb.pixels) v = uint8_t(rng());
    LabelMap m{w, h, std::vector<uint8_t>(size_t(w) * h)};
    for (auto& l : m.labels) l = uint8_t(rng() % 7);  // 4..6: past the palette
    for (float alpha : {0.5f, 0.3f}) {
      const Image8 out = overlay_labels(rgb, m, palette, alpha);
      ASSERT_EQ(out.pixels.size(), rgb.pixels.size());
      for (size_t i = 0; i < m.labels.size(); ++i)
        for (size_t k = 0; k < 3; ++k) {
          const double c = palette[std::min<size_t>(m.labels[i], palette.size() - 1)][k];
          const double want = (1.0 - alpha) * rgb.pixels[3 * i + k] + alpha * c;
          // alpha 0.5: exactly round half up; other alphas within one step of the float blend
          const double tol = alpha == 0.5f ? 0.0 : 1.0;
          ASSERT_LE(std::fabs(out.pixels[3 * i + k] - std::floor(want + 0.5)), tol)
              << "pixel " << i << " channel " << k << " alpha " << alpha;
        }
    }
  }
}
