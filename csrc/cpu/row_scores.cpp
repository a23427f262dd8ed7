// Scores of per-row candidates on the CPU, the sampled margin-ranking loss's first step:
//   s[n, k] = h_n . w_{ids[n, k]} + b_{ids[n, k]}      (h = input [N, D], w = weight [V, D])
// as fused gather-dots (no [N, K, D] tensor of gathered rows). Backward, with G = dL/ds:
//   grad_h_n = sum_k G[n, k] w_{ids[n, k]},   grad_w_c = sum_{(n, k): ids[n, k] = c} G[n, k] h_n
// the latter by the deterministic pair scatter of loss_cpu.h.
#include "../common/margin_host.h"
#include "loss_cpu.h"

namespace fastsoftmax {
namespace {

using namespace loss;
using margin::RowScores;

Tensor row_scores_forward_cpu(const Tensor& input_, const Tensor& weight_,
                              const std::optional<Tensor>& bias, const Tensor& ids_) {
  const RowScores r = margin::row_scores_prologue(input_, weight_, bias, ids_);
  const int64_t N = r.N, D = r.D, K = r.K;
  const ScalarType acc_type = to_opmath(r.input.scalar_type());
  Tensor scores = empty({N, K}, acc_type, r.input.device());
  const Tensor b = bias.has_value() ? contiguous(to(*bias, acc_type)) : Tensor();
  FS_DISPATCH_FLOATING(r.input.scalar_type(), "row_scores_forward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* h = data<scalar_t>(r.input);
    const scalar_t* w = data<scalar_t>(r.weight);
    const int64_t* id = data<int64_t>(r.ids);
    const acc_t* bb = bias.has_value() ? data<acc_t>(b) : nullptr;
    acc_t* s = data<acc_t>(scores);
    torch::stable::parallel_for(0, N, 64, [&](int64_t begin, int64_t end) {
      const int64_t row_bytes = D * static_cast<int64_t>(sizeof(scalar_t));
      for (int64_t n = begin; n < end; ++n) {
        if (n + 1 < end)  // the next row's candidates, while this row computes
          for (int64_t k = 0; k < K; ++k) prefetch_row(w + id[(n + 1) * K + k] * D, row_bytes);
        for (int64_t k = 0; k < K; ++k) {
          const int64_t c = id[n * K + k];
          s[n * K + k] = dot<scalar_t, acc_t>(h + n * D, w + c * D, D) + (bb ? bb[c] : acc_t(0));
        }
      }
    });
  });
  return scores;
}

// `deterministic` is not read: the CPU scatter is always deterministic.
std::tuple<Tensor, Tensor, Tensor> row_scores_backward_cpu(
    const Tensor& grad_scores_, const Tensor& input_, const Tensor& weight_, const Tensor& ids_,
    bool has_bias, bool /*deterministic*/) {
  const RowScores r = margin::row_scores_prologue(input_, weight_, std::nullopt, ids_);
  const Tensor grad = margin::row_scores_grad(grad_scores_, r);
  const int64_t N = r.N, D = r.D, K = r.K;
  Tensor grad_input = empty({N, D}, r.input.scalar_type(), r.input.device());
  Tensor grad_weight, unused_ids;
  FS_DISPATCH_FLOATING(r.input.scalar_type(), "row_scores_backward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* h = data<scalar_t>(r.input);
    const scalar_t* w = data<scalar_t>(r.weight);
    const int64_t* id = data<int64_t>(r.ids);
    const acc_t* g = data<acc_t>(grad);
    scalar_t* gi = data<scalar_t>(grad_input);
    torch::stable::parallel_for(0, N, 64, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> acc(D);
      for (int64_t n = begin; n < end; ++n) {
        std::fill(acc.begin(), acc.end(), acc_t(0));
        for (int64_t k = 0; k < K; ++k) axpy(acc.data(), g[n * K + k], w + id[n * K + k] * D, D);
        store(gi + n * D, acc.data(), D);
      }
    });
    PairGroups<scalar_t, acc_t> pairs;
    pairs.num = 1;
    pairs.g[0] = PairGroup<scalar_t, acc_t>::of(N, K, id, K).weighted_by(g, K).rows_of(h, D);
    std::tie(grad_weight, unused_ids) =
        scatter_pairs_cpu<scalar_t>(pairs, r.V, D, false, r.weight.scalar_type());
  });
  return {grad_input, grad_weight, margin::row_scores_bias_grad(grad, r, has_bias)};
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("row_scores_forward", TORCH_BOX(&row_scores_forward_cpu));
  m.impl("row_scores_backward", TORCH_BOX(&row_scores_backward_cpu));
}

}  // namespace fastsoftmax
