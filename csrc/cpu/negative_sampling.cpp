// Negative-sampling (word2vec) loss on the CPU: a fused gather-dot-sigmoid per row, with no
// [N, K, D] tensor. For row n with hidden vector h (D), true classes t_1..t_T and negatives
// k_1..k_K:
//   loss_n = sum_t softplus(-w_t.h) + sum_k softplus(w_k.h)     (= -log s(w_t.h) - log s(-w_k.h))
//   dloss_n / d(w_t.h) = s(w_t.h) - 1,   dloss_n / d(w_k.h) = s(w_k.h)
// The forward saves these coefficients, coef [N, T + K]; the backward needs no recomputation:
//   grad_h_n = g_n * sum_j coef_nj w_j,   grad_w_j += g_n * coef_nj h_n     (g = grad of loss_n)
#include "../common/loss_host.h"
#include "loss_cpu.h"

namespace fastsoftmax {
namespace {

using namespace loss;

std::tuple<Tensor, Tensor> negative_sampling_forward_cpu(
    const Tensor& input_, const Tensor& weight_, const Tensor& target_, const Tensor& negatives_,
    int64_t ignore_index, bool /*sparse: read by the backward*/, bool need_grad) {
  check_negative_sampling(input_, weight_, target_, negatives_, ignore_index);
  const Tensor input = contiguous(input_), weight = contiguous(weight_);
  const Tensor target = contiguous(target_), negatives = contiguous(negatives_);
  const int64_t N = input.size(0), D = input.size(1), T = target.size(1);
  const int64_t K = negatives.size(-1), J = T + K;
  const int64_t neg_stride = negatives.dim() == 2 ? K : 0;
  const ScalarType acc_type = to_opmath(input.scalar_type());
  Tensor loss = empty({N}, acc_type, input.device());
  Tensor coef = empty({need_grad ? N : 0, J}, acc_type, input.device());
  FS_DISPATCH_FLOATING(input.scalar_type(), "negative_sampling_forward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* h = data<scalar_t>(input);
    const scalar_t* w = data<scalar_t>(weight);
    const int64_t* tg = data<int64_t>(target);
    const int64_t* ng = data<int64_t>(negatives);
    acc_t* l = data<acc_t>(loss);
    acc_t* c = need_grad ? data<acc_t>(coef) : nullptr;
    torch::stable::parallel_for(0, N, 64, [&](int64_t begin, int64_t end) {
      const int64_t row_bytes = D * static_cast<int64_t>(sizeof(scalar_t));
      for (int64_t n = begin; n < end; ++n) {
        if (n + 1 < end) {  // the next row's classes, while this row computes
          for (int64_t t = 0; t < T; ++t) prefetch_row(w + tg[(n + 1) * T + t] * D, row_bytes);
          for (int64_t k = 0; k < K; ++k)
            prefetch_row(w + ng[(n + 1) * neg_stride + k] * D, row_bytes);
        }
        acc_t* cn = need_grad ? c + n * J : nullptr;
        const int64_t* tn = tg + n * T;
        if (tn[0] == ignore_index) {
          l[n] = acc_t(0);
          if (need_grad) std::fill(cn, cn + J, acc_t(0));
          continue;
        }
        const scalar_t* hn = h + n * D;
        acc_t sum = 0;
        for (int64_t t = 0; t < T; ++t) {
          const acc_t s = dot<scalar_t, acc_t>(hn, w + tn[t] * D, D);
          sum += softplus(-s);
          if (need_grad) cn[t] = sigmoid(s) - acc_t(1);
        }
        for (int64_t k = 0; k < K; ++k) {
          const acc_t s = dot<scalar_t, acc_t>(hn, w + ng[n * neg_stride + k] * D, D);
          sum += softplus(s);
          if (need_grad) cn[T + k] = sigmoid(s);
        }
        l[n] = sum;
      }
    });
  });
  return {loss, coef};
}

// `deterministic` is not read: the CPU scatter is always deterministic.
std::tuple<Tensor, Tensor, Tensor> negative_sampling_backward_cpu(
    const Tensor& grad_loss_, const Tensor& input_, const Tensor& weight_, const Tensor& target_,
    const Tensor& negatives_, const Tensor& coef_, int64_t ignore_index, bool sparse,
    bool /*deterministic*/) {
  const NegativeSamplingBackward b = negative_sampling_backward_prologue(
      grad_loss_, input_, weight_, target_, negatives_, coef_, ignore_index);
  const Tensor &input = b.input, &weight = b.weight;
  const int64_t N = b.N, D = b.D, T = b.T, K = b.K, J = b.J, neg_stride = b.neg_stride;
  Tensor grad_input = torch::stable::empty_like(input);
  Tensor grad_weight, ids;
  FS_DISPATCH_FLOATING(input.scalar_type(), "negative_sampling_backward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* h = data<scalar_t>(input);
    const scalar_t* w = data<scalar_t>(weight);
    const int64_t* tg = data<int64_t>(b.target);
    const int64_t* ng = data<int64_t>(b.negatives);
    const acc_t* c = data<acc_t>(b.coef);
    const acc_t* g = data<acc_t>(b.grad_loss);
    scalar_t* gi = data<scalar_t>(grad_input);
    torch::stable::parallel_for(0, N, 64, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> acc(D);
      const int64_t row_bytes = D * static_cast<int64_t>(sizeof(scalar_t));
      for (int64_t n = begin; n < end; ++n) {
        if (n + 1 < end) {
          for (int64_t t = 0; t < T; ++t) prefetch_row(w + tg[(n + 1) * T + t] * D, row_bytes);
          for (int64_t k = 0; k < K; ++k)
            prefetch_row(w + ng[(n + 1) * neg_stride + k] * D, row_bytes);
        }
        std::fill(acc.begin(), acc.end(), acc_t(0));
        const acc_t* cn = c + n * J;
        for (int64_t t = 0; t < T; ++t) axpy(acc.data(), cn[t], w + tg[n * T + t] * D, D);
        for (int64_t k = 0; k < K; ++k)
          axpy(acc.data(), cn[T + k], w + ng[n * neg_stride + k] * D, D);
        for (int64_t d = 0; d < D; ++d) acc[d] *= g[n];
        store(gi + n * D, acc.data(), D);
      }
    });
    PairGroups<scalar_t, acc_t> pairs;
    pairs.num = 2;
    using Pairs = PairGroup<scalar_t, acc_t>;
    pairs.g[0] = Pairs::of(N, T, tg, T).weighted_by(c, J).scaled_by(g).rows_of(h, D);
    pairs.g[1] =
        Pairs::of(N, K, ng, neg_stride).weighted_by(c + T, J).scaled_by(g).rows_of(h, D);
    std::tie(grad_weight, ids) =
        scatter_pairs_cpu<scalar_t>(pairs, b.V, D, sparse, weight.scalar_type());
  });
  return {grad_input, grad_weight, ids};
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("negative_sampling_forward", TORCH_BOX(&negative_sampling_forward_cpu));
  m.impl("negative_sampling_backward", TORCH_BOX(&negative_sampling_backward_cpu));
}

}  // namespace fastsoftmax
