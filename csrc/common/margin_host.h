// Host side of the margin (hinge) loss ops, shared by the CPU and CUDA files: argument checks
// (before any kernel runs, so a bad id is a Python ValueError on every device) and the
// contiguous operands. See margin_math.h for the maths and csrc/ops.cpp for the schemas.
//
// Shapes: scores [N, C] (any floating dtype), target_score [N] (scores' dtype), target int64
// [N] (ignore_index allowed), candidates int64 [C] (shared by the rows) or [N, C] (per row).
#pragma once

#include <cmath>

#include "loss_host.h"
#include "margin_math.h"

namespace fastsoftmax {
namespace margin {

struct FS_HIDDEN MarginArgs {
  Tensor scores, target_score, target, candidates;
  int64_t N, C, cand_stride;  // cand_stride: C for per-row candidates, 0 for shared ones
};

inline MarginArgs margin_prologue(const Tensor& scores, const Tensor& target_score,
                                  const Tensor& target, const Tensor& candidates, double margin,
                                  int64_t p, int64_t mode, int64_t num_classes,
                                  int64_t ignore_index) {
  FS_CHECK_TYPE(is_floating(scores.scalar_type()),
                "scores must be a floating-point tensor, got ", scores.scalar_type());
  FS_CHECK_TYPE(target_score.scalar_type() == scores.scalar_type(),
                "target_score and scores must have the same dtype, got ",
                target_score.scalar_type(), " and ", scores.scalar_type());
  FS_CHECK_VALUE(scores.dim() == 2, "scores must be 2-D [N, C], got shape ", scores.sizes());
  const int64_t N = scores.size(0), C = scores.size(1);
  FS_CHECK_VALUE(target_score.dim() == 1 && target_score.size(0) == N,
                 "target_score must be 1-D [N] with N = ", N, ", got shape ",
                 target_score.sizes());
  FS_CHECK_VALUE(target_score.device() == scores.device(), "target_score is on ",
                 target_score.device(), " but scores are on ", scores.device());
  loss::check_ids_tensor(target, "target", scores);
  loss::check_ids_tensor(candidates, "candidates", scores);
  FS_CHECK_VALUE(target.dim() == 1 && target.size(0) == N, "target must be 1-D [N] with N = ",
                 N, ", got shape ", target.sizes());
  FS_CHECK_VALUE((candidates.dim() == 1 && candidates.size(0) == C) ||
                     (candidates.dim() == 2 && candidates.size(0) == N &&
                      candidates.size(1) == C),
                 "candidates must be [C] (shared) or [N, C] (per row) with N = ", N,
                 " and C = ", C, ", got shape ", candidates.sizes());
  FS_CHECK_VALUE(mode == kModeHinge || mode == kModeWarp, "unknown margin-loss mode ", mode);
  FS_CHECK_VALUE(mode == kModeWarp || (p >= 0 && p <= 2), "p must be 1 or 2, got ", p);
  FS_CHECK_VALUE(std::isfinite(margin), "margin must be a finite number, got ", margin);
  FS_CHECK_VALUE(num_classes > 0, "num_classes must be positive, got ", num_classes);
  loss::IdChecks checks{num_classes, ignore_index};
  checks.target(torch::stable::reshape(target, {N, 1}));
  checks.ids(candidates, "candidates");
  checks.run();
  MarginArgs a;
  a.scores = contiguous(scores), a.target_score = contiguous(target_score);
  a.target = contiguous(target), a.candidates = contiguous(candidates);
  a.N = N, a.C = C, a.cand_stride = candidates.dim() == 2 ? C : 0;
  return a;
}

// The backward's incoming gradient [N], as the accumulation dtype.
inline Tensor margin_grad_loss(const Tensor& grad_loss, const MarginArgs& a) {
  FS_CHECK_VALUE(grad_loss.numel() == a.N && grad_loss.device() == a.scores.device(),
                 "grad_loss must have one entry per row, on the scores' device");
  return contiguous(to(torch::stable::reshape(grad_loss, {a.N}),
                       to_opmath(a.scores.scalar_type())));
}

// row_scores_*: s[n, k] = input[n].weight[ids[n, k]] + bias[ids[n, k]], the scores of per-row
// candidates without an [N, K, D] gather. input [N, D], weight [V, D], bias [V], ids [N, K].
struct FS_HIDDEN RowScores {
  Tensor input, weight, ids;
  int64_t N, D, V, K;
};

inline RowScores row_scores_prologue(const Tensor& input, const Tensor& weight,
                                     const std::optional<Tensor>& bias, const Tensor& ids) {
  loss::check_dense(input, weight, bias);
  loss::check_ids_tensor(ids, "ids", input);
  FS_CHECK_VALUE(ids.dim() == 2 && ids.size(0) == input.size(0),
                 "ids must be [N, K] with N = ", input.size(0), ", got shape ", ids.sizes());
  loss::IdChecks checks{weight.size(0), -1};
  checks.ids(ids, "ids");
  checks.run();
  RowScores r;
  r.input = contiguous(input), r.weight = contiguous(weight), r.ids = contiguous(ids);
  r.N = input.size(0), r.D = input.size(1), r.V = weight.size(0), r.K = ids.size(1);
  return r;
}

// The incoming gradient of the scores [N, K], as the accumulation dtype.
inline Tensor row_scores_grad(const Tensor& grad_scores, const RowScores& r) {
  const int64_t shape[] = {r.N, r.K};
  FS_CHECK_VALUE(grad_scores.sizes() == IntArrayRef(shape) &&
                     grad_scores.device() == r.input.device(),
                 "grad_scores must be [N, K] = ", IntArrayRef(shape), " on the input's device");
  return contiguous(to(grad_scores, to_opmath(r.input.scalar_type())));
}

// dL/dbias: the gradients of every score of class c, summed (index_put_ with accumulate adds
// in a fixed order on the CPU and sorts on CUDA: deterministic on both).
inline Tensor row_scores_bias_grad(const Tensor& grad, const RowScores& r, bool has_bias) {
  const ScalarType dtype = r.input.scalar_type();
  if (!has_bias) return empty({0}, dtype, r.input.device());
  Tensor gb = zeros({r.V}, grad.scalar_type(), r.input.device());
  call("aten::index_put_", "", gb, std::vector<std::optional<Tensor>>{loss::flat(r.ids)},
       loss::flat(grad), true);
  return to(gb, dtype);
}

}  // namespace margin
}  // namespace fastsoftmax
