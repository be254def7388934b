// The CPU convolution by Winograd's minimal filtering (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", CVPR 2016): F(m x m, k x k) on 8 x 8 input tiles, m = 9 - k
// (k = 7: 2 x 2 outputs a tile, 64 products where direct convolution takes 196; k = 5: 4 x 4,
// 64 for 400; k = 3: 6 x 6, 64 for 324). Per 8 x 8 tile: V = B^T d B (input), U = G g G^T (weights,
// once), M = sum over input channels of U . V (64 GEMMs, one per tile position), Y = A^T M A.
// The matrices come from the Toom-Cook construction on the points 0, +-1, +-2, +-1/2 and infinity,
// computed in double (winograd_matrices). Work is cut into bands of tiles whose size follows the
// layer's shape, never the thread count, so results do not depend on how many threads ran them.
#pragma once
#include <cstddef>
#include <vector>

namespace scenelab {

// Toom-Cook matrices for F(m, r) on the 8 points: a = m + r - 1 = 8. y = AT [(G g) . (BT d)]
// computes y_i = sum_j g_j d_(i+j), i < m (a correlation, as convolution layers compute).
struct WinogradMatrices {
  static constexpr int kAlpha = 8;
  int m = 0, r = 0;
  std::vector<double> AT, G, BT;  // m x 8, 8 x r, 8 x 8, row-major
};
WinogradMatrices winograd_matrices(int r);  // r = 3, 5 or 7

// One stride-1 convolution layer's shape, its tiles and bands.
class WinogradConv {
 public:
  static bool supported(int k) { return k == 3 || k == 5 || k == 7; }
  // weight: cout x cin x k x k (the layer's OIHW tensor), transformed here once.
  WinogradConv(const float* weight, int cout, int cin, int k);

  struct Plan {
    int cin = 0, cout = 0, m = 0, h = 0, w = 0, pad = 0, ho = 0, wo = 0;
    int tiles_y = 0, tiles_x = 0;   // m x m output tiles covering ho x wo
    int band_rows = 0, band_cols = 0, bands_x = 0, bands = 0;  // tiles a band, bands
  };
  // Tiles and bands for an h x w input (any layer of this shape: weights not needed).
  static Plan plan(int cin, int cout, int k, int h, int w, int pad);
  // Scratch floats for one thread running one band at a time.
  static size_t workspace_floats(const Plan& p);
  // One band of one image: x cin planes of h x w, y cout planes of ho x wo; bias may be null.
  void run_band(const Plan& p, int band, const float* x, float* y, const float* bias, bool relu,
                float* ws) const;

  int cin() const { return cin_; }
  int cout() const { return cout_; }

 private:
  int cin_, cout_, m_;
  std::vector<float> at_, bt_;  // float copies of A^T (m x 8) and B^T (8 x 8)
  std::vector<float> u_;        // 64 matrices cin x cout, column-major: u_[(e * cout + o) * cin + c]
};

}  // namespace scenelab
