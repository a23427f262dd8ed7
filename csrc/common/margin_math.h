// Scalar maths of the margin (hinge) losses, shared by the CPU and CUDA kernels
// (csrc/cpu/margin_losses.cpp, csrc/cuda/margin_losses.cu). Torch-free on purpose: nvcc
// compiles it on a machine without a GPU.
//
// A row n has a target score s_y, and scores s_j of C candidate classes c_j (a block of the
// vocabulary, or sampled negatives); a candidate equal to the target is left out (it would
// compare s_y with itself). With z_j = margin - s_y + s_j:
//   mode kModeHinge: loss_n = sum_j max(0, z_j)^p, p = 1 or 2 (p = 0 counts the z_j > 0);
//   mode kModeWarp:  the first candidate j* (in column order, which is draw order) with
//                   z_j > 0, reached after N trials (candidates equal to the target are not
//                   trials); rank estimate r = floor((V - 1) / N); loss_n = L(r) z_{j*}
//                   with L(r) = 1 + 1/2 + ... + 1/r; 0 if no candidate violates.
// Gradients: dloss/ds_j = slope(z_j), dloss/ds_y = -sum_j slope(z_j), L(r) held constant.
#pragma once

#include <cstdint>

#include "loss_math.h"

namespace fastsoftmax {
namespace margin {

constexpr int64_t kModeHinge = 0;
constexpr int64_t kModeWarp = 1;

// max(0, z)^p; p = 0 gives the indicator z > 0.
template <class T>
FS_LOSS_HD T hinge_term(T z, int64_t p) {
  if (!(z > T(0))) return T(0);
  return p == 0 ? T(1) : (p == 1 ? z : z * z);
}

// d/dz of hinge_term (0 for p = 0: a count has no gradient).
template <class T>
FS_LOSS_HD T hinge_slope(T z, int64_t p) {
  if (!(z > T(0))) return T(0);
  return p == 1 ? T(1) : (p == 2 ? T(2) * z : T(0));
}

// The harmonic number L(r) = sum_{i=1..r} 1/i. Summed exactly (from the small terms up) for
// r <= 64; beyond that the asymptotic series ln r + gamma + 1/(2r) - 1/(12r^2) + 1/(120r^4)
// - 1/(252r^6), whose first omitted term is below 1e-14 there: O(1) for any vocabulary.
FS_LOSS_HD double harmonic(int64_t r) {
  if (r <= 0) return 0.0;
  if (r <= 64) {
    double s = 0.0;
    for (int64_t i = r; i >= 1; --i) s += 1.0 / static_cast<double>(i);
    return s;
  }
  const double x = static_cast<double>(r), x2 = 1.0 / (x * x);
  return log(x) + 0.57721566490153286061 + 0.5 / x -
         x2 * (1.0 / 12 - x2 * (1.0 / 120 - x2 * (1.0 / 252)));
}

// WARP's weight of a violator found at 1-based trial `trials` among V classes.
FS_LOSS_HD double warp_weight(int64_t num_classes, int64_t trials) {
  return trials > 0 ? harmonic((num_classes - 1) / trials) : 0.0;
}

}  // namespace margin
}  // namespace fastsoftmax
