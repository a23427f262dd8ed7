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
#include "vec_math.h"

namespace fastsoftmax {
namespace {

using namespace loss;

// The epilogue's inputs: logits [N, S] (the product, overwritten by dloss/dlogit), the
// true classes' rows of the weight, the column and row-true offsets, and the outputs.
template <class scalar_t>
struct Epilogue {
  using acc_t = opmath_t<scalar_t>;
  const scalar_t* h;
  const scalar_t* w;
  const int64_t* tg;
  const int64_t* sm;
  const acc_t* cc;  // per sampled column: bias - log Q - log_z
  const acc_t* rt;  // per true logit: the same for the true classes
  scalar_t* lg;
  acc_t* ls;
  acc_t* gt;
  int64_t D, T, S, mode, ignore_index;
  bool remove_accidental_hits, need_grad;
};

template <class scalar_t>
FS_ALWAYS_INLINE void epilogue_rows_body(const Epilogue<scalar_t>& a, int64_t begin,
                                         int64_t end) {
  using acc_t = opmath_t<scalar_t>;
  const int64_t D = a.D, T = a.T, S = a.S;
  const bool need_grad = a.need_grad;
  const acc_t label = acc_t(1) / static_cast<acc_t>(T);  // label mass per true class
  const acc_t minus_inf = -std::numeric_limits<acc_t>::infinity();
  std::vector<acc_t> xs(S), xt(T), sp(a.mode == kSoftmax ? 0 : S), sg(sp.size());
  std::vector<char> hit(S, 0);  // stays all zero without remove_accidental_hits
  for (int64_t n = begin; n < end; ++n) {
    const int64_t* tn = a.tg + n * T;
    scalar_t* ln = a.lg + n * S;
    acc_t* gtn = a.gt + n * T;
    if (tn[0] == a.ignore_index) {
      a.ls[n] = acc_t(0);
      if (need_grad) {
        std::fill(gtn, gtn + T, acc_t(0));
        std::fill(ln, ln + S, scalar_t(0));
      }
      continue;
    }
    const scalar_t* hn = a.h + n * D;
    for (int64_t t = 0; t < T; ++t)
      xt[t] = dot<scalar_t, acc_t>(hn, a.w + tn[t] * D, D) + a.rt[n * T + t];
    for (int64_t j = 0; j < S; ++j) xs[j] = static_cast<acc_t>(ln[j]) + a.cc[j];
    // Accidental hits: candidates equal to one of the row's true classes (one compare per
    // candidate in the usual num_true = 1, a loop the compiler vectorises).
    if (a.remove_accidental_hits && T == 1) {
      const int64_t t0 = tn[0];
      for (int64_t j = 0; j < S; ++j) hit[j] = a.sm[j] == t0;
    } else if (a.remove_accidental_hits) {
      for (int64_t j = 0; j < S; ++j) {
        char is_hit = 0;
        for (int64_t t = 0; t < T; ++t) is_hit |= (a.sm[j] == tn[t]);
        hit[j] = is_hit;
      }
    }
    if (a.mode == kSoftmax) {
      // Cross entropy against labels 1/T on the true logits: logsumexp over the unmasked
      // logits (max subtracted first) minus the mean true logit. A masked logit is -inf,
      // whose exp is 0. Each exp(x - m) is kept: the softmax is exp(x - m) / z.
      acc_t m = minus_inf, mean_true = 0;
      for (int64_t t = 0; t < T; ++t) m = std::max(m, xt[t]), mean_true += xt[t];
      for (int64_t j = 0; j < S; ++j) xs[j] = hit[j] ? minus_inf : xs[j];
      m = vec::max_of(xs.data(), S, m);
      const acc_t z = vec::exp_shifted(xt.data(), T, m) + vec::exp_shifted(xs.data(), S, m);
      a.ls[n] = m + fs_log(z) - mean_true * label;
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
      vec::softplus_sigmoid(xs.data(), S, sp.data(), need_grad ? sg.data() : nullptr);
      for (int64_t j = 0; j < S; ++j) {
        if (!hit[j]) sum += sp[j];
        if (need_grad) ln[j] = hit[j] ? scalar_t(0) : static_cast<scalar_t>(sg[j]);
      }
      a.ls[n] = sum;
    }
  }
}

std::tuple<Tensor, Tensor, Tensor> sampled_logits_forward_cpu(
    const Tensor& input_, const Tensor& weight_, const std::optional<Tensor>& bias_,
    const Tensor& target_, const Tensor& sampled_, const Tensor& true_expected,
    const Tensor& sampled_expected, const Tensor& log_z, int64_t mode,
    bool remove_accidental_hits, int64_t ignore_index, bool /*sparse: read by the backward*/,
    bool need_grad) {
  SampledForward f = sampled_forward_prologue(input_, weight_, bias_, target_, sampled_,
                                               true_expected, sampled_expected, log_z, mode,
                                               ignore_index);
  FS_DISPATCH_FLOATING(f.input.scalar_type(), "sampled_logits_forward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const Epilogue<scalar_t> e{data<scalar_t>(f.input), data<scalar_t>(f.weight),
                               data<int64_t>(f.target), data<int64_t>(f.sampled),
                               data<acc_t>(f.col), data<acc_t>(f.row_true),
                               data<scalar_t>(f.logits), data<acc_t>(f.loss),
                               data<acc_t>(f.grad_true), f.D, f.T, f.S, mode, ignore_index,
                               remove_accidental_hits, need_grad};
    torch::stable::parallel_for(0, f.N, 16, [&](int64_t begin, int64_t end) {
      vec::with_best_isa([&]() FS_INLINE_LAMBDA { epilogue_rows_body(e, begin, end); });
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
