// Margin (hinge) losses on the CPU: the multiclass hinge / margin-ranking sum and WARP's
// first-violator loss over a block of scores (csrc/common/margin_math.h has the maths). The
// scores themselves are matrix products done by torch (BLAS) in fastsoftmax/margin.py; this
// file is the fused per-row reduction and its gradient, so that no [N, C] temporary beyond
// the scores block (and its gradient) is made.
#include "../common/margin_host.h"
#include "loss_cpu.h"

namespace fastsoftmax {
namespace {

using namespace margin;

// Row n's WARP violator: (column j*, trials to reach it), or (-1, 0) when none violates.
template <class scalar_t, class acc_t>
std::pair<int64_t, int64_t> first_violator(const scalar_t* s, const int64_t* cand, int64_t y,
                                           acc_t base, int64_t C) {
  int64_t trials = 0;
  for (int64_t j = 0; j < C; ++j) {
    if (cand[j] == y) continue;
    ++trials;
    if (base + static_cast<acc_t>(s[j]) > acc_t(0)) return {j, trials};
  }
  return {-1, 0};
}

Tensor margin_rank_forward_cpu(const Tensor& scores_, const Tensor& target_score_,
                               const Tensor& target_, const Tensor& candidates_, double margin,
                               int64_t p, int64_t mode, int64_t num_classes,
                               int64_t ignore_index) {
  const MarginArgs a = margin_prologue(scores_, target_score_, target_, candidates_, margin, p,
                                       mode, num_classes, ignore_index);
  const int64_t N = a.N, C = a.C;
  Tensor loss = empty({N}, to_opmath(a.scores.scalar_type()), a.scores.device());
  FS_DISPATCH_FLOATING(a.scores.scalar_type(), "margin_rank_forward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* sc = data<scalar_t>(a.scores);
    const scalar_t* ts = data<scalar_t>(a.target_score);
    const int64_t* tg = data<int64_t>(a.target);
    const int64_t* cd = data<int64_t>(a.candidates);
    acc_t* ls = data<acc_t>(loss);
    torch::stable::parallel_for(0, N, 64, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const int64_t y = tg[n];
        if (y == ignore_index) {
          ls[n] = acc_t(0);
          continue;
        }
        const scalar_t* s = sc + n * C;
        const int64_t* cand = cd + n * a.cand_stride;
        const acc_t base = static_cast<acc_t>(margin) - static_cast<acc_t>(ts[n]);  // z - s_j
        if (mode == kModeWarp) {
          const auto [j, trials] = first_violator(s, cand, y, base, C);
          ls[n] = j < 0 ? acc_t(0)
                        : static_cast<acc_t>(warp_weight(num_classes, trials)) *
                              (base + static_cast<acc_t>(s[j]));
          continue;
        }
        acc_t sum = 0;
        for (int64_t j = 0; j < C; ++j)
          if (cand[j] != y) sum += hinge_term(base + static_cast<acc_t>(s[j]), p);
        ls[n] = sum;
      }
    });
  });
  return loss;
}

// The scores' gradient is recomputed from the scores (one pass, as cheap as reading a saved
// coefficient block) instead of being kept from the forward.
std::tuple<Tensor, Tensor> margin_rank_backward_cpu(
    const Tensor& grad_loss_, const Tensor& scores_, const Tensor& target_score_,
    const Tensor& target_, const Tensor& candidates_, double margin, int64_t p, int64_t mode,
    int64_t num_classes, int64_t ignore_index) {
  const MarginArgs a = margin_prologue(scores_, target_score_, target_, candidates_, margin, p,
                                       mode, num_classes, ignore_index);
  const Tensor grad_loss = margin_grad_loss(grad_loss_, a);
  const int64_t N = a.N, C = a.C;
  const ScalarType dtype = a.scores.scalar_type();
  Tensor grad_scores = empty({N, C}, dtype, a.scores.device());
  Tensor grad_target = empty({N}, dtype, a.scores.device());
  FS_DISPATCH_FLOATING(dtype, "margin_rank_backward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* sc = data<scalar_t>(a.scores);
    const scalar_t* ts = data<scalar_t>(a.target_score);
    const int64_t* tg = data<int64_t>(a.target);
    const int64_t* cd = data<int64_t>(a.candidates);
    const acc_t* g = data<acc_t>(grad_loss);
    scalar_t* gs = data<scalar_t>(grad_scores);
    scalar_t* gt = data<scalar_t>(grad_target);
    torch::stable::parallel_for(0, N, 64, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        scalar_t* gsn = gs + n * C;
        std::fill(gsn, gsn + C, scalar_t(0));
        gt[n] = scalar_t(0);
        const int64_t y = tg[n];
        if (y == ignore_index) continue;
        const scalar_t* s = sc + n * C;
        const int64_t* cand = cd + n * a.cand_stride;
        const acc_t base = static_cast<acc_t>(margin) - static_cast<acc_t>(ts[n]);
        if (mode == kModeWarp) {
          const auto [j, trials] = first_violator(s, cand, y, base, C);
          if (j < 0) continue;
          const acc_t c = g[n] * static_cast<acc_t>(warp_weight(num_classes, trials));
          gsn[j] = static_cast<scalar_t>(c);
          gt[n] = static_cast<scalar_t>(-c);
          continue;
        }
        acc_t total = 0;
        for (int64_t j = 0; j < C; ++j) {
          if (cand[j] == y) continue;
          const acc_t c = g[n] * hinge_slope(base + static_cast<acc_t>(s[j]), p);
          gsn[j] = static_cast<scalar_t>(c);
          total += c;
        }
        gt[n] = static_cast<scalar_t>(-total);
      }
    });
  });
  return {grad_scores, grad_target};
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("margin_rank_forward", TORCH_BOX(&margin_rank_forward_cpu));
  m.impl("margin_rank_backward", TORCH_BOX(&margin_rank_backward_cpu));
}

}  // namespace fastsoftmax
