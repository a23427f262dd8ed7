// Sampled softmax and NCE on the CPU (TensorFlow's _compute_sampled_logits). One candidate
// set sampled [S] is shared by the N rows, so the sampled logits are one matrix product
//   L = H Ws^T   [N, S]      (H = input [N, D], Ws = weight[sampled] [S, D], CPU BLAS)
// followed by a fused per-row epilogue that adds bias, subtracts log Q (expected counts) and
// log_z, masks accidental hits, and computes the loss and dloss/dlogit. That gradient G
// overwrites L (no second [N, S] buffer), so the backward is two more products:
//   grad_H = g * (G Ws + sum_t gt_t w_t),   grad_Ws = G^T (g * H)
// with gt [N, T] the gradient of the true logits and g the incoming per-row gradient.
#include <limits>

#include "../common/loss_host.h"
#include "loss_cpu.h"

namespace fastsoftmax {
namespace {

using namespace loss;

std::tuple<Tensor, Tensor, Tensor> sampled_logits_forward_cpu(
    const Tensor& input_, const Tensor& weight_, const std::optional<Tensor>& bias_,
    const Tensor& target_, const Tensor& sampled_, const Tensor& true_expected,
    const Tensor& sampled_expected, const Tensor& log_z, int64_t mode,
    bool remove_accidental_hits, int64_t ignore_index, bool /*sparse: read by the backward*/,
    bool need_grad) {
  SampledForward f = sampled_forward_prologue(input_, weight_, bias_, target_, sampled_,
                                               true_expected, sampled_expected, log_z, mode,
                                               ignore_index);
  const Tensor &input = f.input, &weight = f.weight, &target = f.target, &sampled = f.sampled;
  const Tensor &col = f.col, &row_true = f.row_true;
  Tensor &logits = f.logits, &loss = f.loss, &grad_true = f.grad_true;
  const int64_t N = f.N, D = f.D, T = f.T, S = f.S;
  FS_DISPATCH_FLOATING(input.scalar_type(), "sampled_logits_forward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* h = data<scalar_t>(input);
    const scalar_t* w = data<scalar_t>(weight);
    const int64_t* tg = data<int64_t>(target);
    const int64_t* sm = data<int64_t>(sampled);
    const acc_t* cc = data<acc_t>(col);
    const acc_t* rt = data<acc_t>(row_true);
    scalar_t* lg = data<scalar_t>(logits);
    acc_t* ls = data<acc_t>(loss);
    acc_t* gt = data<acc_t>(grad_true);
    const acc_t label = acc_t(1) / static_cast<acc_t>(T);  // label mass per true class
    torch::stable::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> xs(S), xt(T);
      std::vector<char> hit(S);
      for (int64_t n = begin; n < end; ++n) {
        const int64_t* tn = tg + n * T;
        scalar_t* ln = lg + n * S;
        acc_t* gtn = gt + n * T;
        if (tn[0] == ignore_index) {
          ls[n] = acc_t(0);
          if (need_grad) {
            std::fill(gtn, gtn + T, acc_t(0));
            std::fill(ln, ln + S, scalar_t(0));
          }
          continue;
        }
        const scalar_t* hn = h + n * D;
        for (int64_t t = 0; t < T; ++t)
          xt[t] = dot<scalar_t, acc_t>(hn, w + tn[t] * D, D) + rt[n * T + t];
        for (int64_t j = 0; j < S; ++j) {
          xs[j] = static_cast<acc_t>(ln[j]) + cc[j];
          char is_hit = 0;
          if (remove_accidental_hits)
            for (int64_t t = 0; t < T; ++t) is_hit |= (sm[j] == tn[t]);
          hit[j] = is_hit;
        }
        if (mode == kSoftmax) {
          // Cross entropy against labels 1/T on the true logits: logsumexp over the
          // unmasked logits (max subtracted first) minus the mean true logit.
          acc_t m = -std::numeric_limits<acc_t>::infinity();
          for (int64_t t = 0; t < T; ++t) m = std::max(m, xt[t]);
          for (int64_t j = 0; j < S; ++j)
            if (!hit[j]) m = std::max(m, xs[j]);
          // Each exp(x - m) is kept: the softmax is exp(x - m) / z, one exp per logit
          // instead of two (the exps were the epilogue's largest cost).
          acc_t z = 0, mean_true = 0;
          for (int64_t t = 0; t < T; ++t) {
            mean_true += xt[t];
            xt[t] = fs_exp(xt[t] - m);
            z += xt[t];
          }
          for (int64_t j = 0; j < S; ++j) {
            xs[j] = hit[j] ? acc_t(0) : fs_exp(xs[j] - m);
            z += xs[j];
          }
          ls[n] = m + fs_log(z) - mean_true * label;
          if (!need_grad) continue;
          const acc_t inv_z = acc_t(1) / z;
          for (int64_t t = 0; t < T; ++t) gtn[t] = xt[t] * inv_z - label;
          for (int64_t j = 0; j < S; ++j) ln[j] = static_cast<scalar_t>(xs[j] * inv_z);
        } else {
          // Sigmoid cross entropy with labels 1/T (true) and 0 (sampled):
          //   softplus(x) - y x,   d/dx = sigmoid(x) - y.
          acc_t sum = 0;
          for (int64_t t = 0; t < T; ++t) {
            sum += softplus(xt[t]) - label * xt[t];
            if (need_grad) gtn[t] = sigmoid(xt[t]) - label;
          }
          for (int64_t j = 0; j < S; ++j) {
            if (hit[j]) {
              if (need_grad) ln[j] = scalar_t(0);
              continue;
            }
            sum += softplus(xs[j]);
            if (need_grad) ln[j] = static_cast<scalar_t>(sigmoid(xs[j]));
          }
          ls[n] = sum;
        }
      }
    });
  });
  return without_grad_unless(need_grad, f);
}

// `deterministic` is not read: the CPU scatter is always deterministic.
std::tuple<Tensor, Tensor, Tensor, Tensor> sampled_logits_backward_cpu(
    const Tensor& grad_loss_, const Tensor& input_, const Tensor& weight_, const Tensor& target_,
    const Tensor& sampled_, const Tensor& grad_logits_, const Tensor& grad_true_, bool has_bias,
    int64_t ignore_index, bool sparse, bool /*deterministic*/) {
  SampledBackward b = sampled_backward_prologue(grad_loss_, input_, weight_, target_, sampled_,
                                                grad_logits_, grad_true_, ignore_index);
  const int64_t N = b.N, D = b.D, T = b.T;
  Tensor grad_weight, ids;
  FS_DISPATCH_FLOATING(b.input.scalar_type(), "sampled_logits_backward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* w = data<scalar_t>(b.weight);
    const int64_t* tg = data<int64_t>(b.target);
    const acc_t* gt = data<acc_t>(b.grad_true);
    const acc_t* g = data<acc_t>(b.grad_loss);
    scalar_t* gi = data<scalar_t>(b.grad_input);
    torch::stable::parallel_for(0, N, 64, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> acc(D);
      for (int64_t n = begin; n < end; ++n) {
        scalar_t* gin = gi + n * D;
        for (int64_t d = 0; d < D; ++d) acc[d] = static_cast<acc_t>(gin[d]);
        for (int64_t t = 0; t < T; ++t) axpy(acc.data(), gt[n * T + t], w + tg[n * T + t] * D, D);
        for (int64_t d = 0; d < D; ++d) acc[d] *= g[n];
        store(gin, acc.data(), D);
      }
    });
    std::tie(grad_weight, ids) = scatter_pairs_cpu<scalar_t>(
        sampled_weight_pairs<scalar_t, acc_t>(b), b.V, D, sparse, b.weight.scalar_type());
  });
  return {b.grad_input, grad_weight, sampled_bias_grad(b, has_bias), ids};
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("sampled_logits_forward", TORCH_BOX(&sampled_logits_forward_cpu));
  m.impl("sampled_logits_backward", TORCH_BOX(&sampled_logits_backward_cpu));
}

}  // namespace fastsoftmax
