// Negative-sampling (word2vec) loss on the CPU: a fused gather-dot-sigmoid per row, with no
// [N, K, D] tensor. For row n with hidden vector h (D), true classes t_1..t_T and negatives
// k_1..k_K:
//   loss_n = sum_t softplus(-w_t.h) + sum_k softplus(w_k.h)     (= -log s(w_t.h) - log s(-w_k.h))
//   dloss_n / d(w_t.h) = s(w_t.h) - 1,   dloss_n / d(w_k.h) = s(w_k.h)
// The forward saves these coefficients, coef [N, T + K]; the backward needs no recomputation:
//   grad_h_n = g_n * sum_j coef_nj w_j,   grad_w_j += g_n * coef_nj h_n     (g = grad of loss_n)
#include "../common/loss_host.h"
#include "loss_cpu.h"
#include "vec_math.h"

namespace fastsoftmax {
namespace {

using namespace loss;

// The row loops' inputs: h [N, D], w [V, D], target [N, T], negatives [N, K] or [K] (shared:
// neg_stride 0), coef [N, J = T + K].
template <class scalar_t>
struct Rows {
  using acc_t = opmath_t<scalar_t>;
  const scalar_t* h;
  const scalar_t* w;
  const int64_t* tg;
  const int64_t* ng;
  int64_t D, T, K, J, neg_stride, ignore_index;

  FS_ALWAYS_INLINE const scalar_t* row_of_class(int64_t n, int64_t j) const {
    return w + (j < T ? tg[n * T + j] : ng[n * neg_stride + j - T]) * D;
  }
  FS_ALWAYS_INLINE void prefetch_classes(int64_t n) const {
    for (int64_t j = 0; j < J; ++j)
      prefetch_row(row_of_class(n, j), D * static_cast<int64_t>(sizeof(scalar_t)));
  }
};

// Forward of rows [begin, end): loss l [N]; coef when need_grad (c != nullptr).
template <class scalar_t>
FS_ALWAYS_INLINE void forward_rows_body(const Rows<scalar_t>& a, typename Rows<scalar_t>::acc_t* l,
                                        typename Rows<scalar_t>::acc_t* c, int64_t begin,
                                        int64_t end) {
  using acc_t = typename Rows<scalar_t>::acc_t;
  const int64_t D = a.D, T = a.T, J = a.J;
  // Scores of a block of rows, signed so that each pair's loss is softplus(x): then one
  // vectorised pass takes softplus and sigmoid of the whole block (vec_math.h).
  constexpr int64_t kBlock = 16;
  std::vector<acc_t> x(kBlock * J), sp(kBlock * J), sg(kBlock * J);
  acc_t *px = x.data(), *psp = sp.data(), *psg = sg.data();
  for (int64_t n0 = begin; n0 < end; n0 += kBlock) {
    const int64_t rows = std::min(kBlock, end - n0);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = n0 + r;
      if (n + 1 < end) a.prefetch_classes(n + 1);  // the next row's classes, while this computes
      const scalar_t* hn = a.h + n * D;
      acc_t* xn = px + r * J;
      if (a.tg[n * T] == a.ignore_index) {
        std::fill(xn, xn + J, acc_t(0));
        continue;
      }
      for (int64_t j = 0; j < J; ++j) {
        const acc_t s = dot<scalar_t, acc_t>(hn, a.row_of_class(n, j), D);
        xn[j] = j < T ? -s : s;
      }
    }
    vec::softplus_sigmoid(px, rows * J, psp, c ? psg : nullptr);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = n0 + r;
      const bool ignored = a.tg[n * T] == a.ignore_index;
      acc_t sum = 0;
      for (int64_t j = 0; j < J; ++j) sum += psp[r * J + j];
      l[n] = ignored ? acc_t(0) : sum;
      if (!c) continue;
      // dloss/ds: -sigmoid(-s) = sigmoid(s) - 1 for a true class, sigmoid(s) for a negative.
      acc_t* cn = c + n * J;
      for (int64_t j = 0; j < J; ++j)
        cn[j] = ignored ? acc_t(0) : (j < T ? -psg[r * J + j] : psg[r * J + j]);
    }
  }
}

// grad_h of rows [begin, end): sum_j g_n coef_nj w_j.
template <class scalar_t>
FS_ALWAYS_INLINE void grad_input_rows_body(const Rows<scalar_t>& a,
                                           const typename Rows<scalar_t>::acc_t* c,
                                           const typename Rows<scalar_t>::acc_t* g, scalar_t* gi,
                                           int64_t begin, int64_t end) {
  using acc_t = typename Rows<scalar_t>::acc_t;
  constexpr bool in_place = std::is_same<scalar_t, acc_t>::value;
  const int64_t D = a.D, J = a.J;
  std::vector<acc_t> wide(in_place ? 0 : D);  // half, bfloat16: the sum in float
  for (int64_t n = begin; n < end; ++n) {
    if (n + 1 < end) a.prefetch_classes(n + 1);
    // sum_j (g_n coef_nj) w_j, its first term stored: float and double sum in the output row.
    acc_t* y = in_place ? reinterpret_cast<acc_t*>(gi + n * D) : wide.data();
    const acc_t gn = g[n];
    if (J == 0) std::fill(y, y + D, acc_t(0));
    for (int64_t j = 0; j < J; ++j) {
      if (j == 0) vec::scale(y, gn * c[n * J], a.row_of_class(n, 0), D);
      else axpy(y, gn * c[n * J + j], a.row_of_class(n, j), D);
    }
    if (!in_place) store(gi + n * D, y, D);
  }
}

template <class scalar_t>
Rows<scalar_t> rows_of(const Tensor& input, const Tensor& weight, const Tensor& target,
                       const Tensor& negatives, int64_t ignore_index) {
  const int64_t K = negatives.size(-1), T = target.size(1);
  return {data<scalar_t>(input), data<scalar_t>(weight), data<int64_t>(target),
          data<int64_t>(negatives), input.size(1), T, K, T + K,
          negatives.dim() == 2 ? K : 0, ignore_index};
}

std::tuple<Tensor, Tensor> negative_sampling_forward_cpu(
    const Tensor& input_, const Tensor& weight_, const Tensor& target_, const Tensor& negatives_,
    int64_t ignore_index, bool /*sparse: read by the backward*/, bool need_grad) {
  check_negative_sampling(input_, weight_, target_, negatives_, ignore_index);
  const Tensor input = contiguous(input_), weight = contiguous(weight_);
  const Tensor target = contiguous(target_), negatives = contiguous(negatives_);
  const int64_t N = input.size(0), J = target.size(1) + negatives.size(-1);
  const ScalarType acc_type = to_opmath(input.scalar_type());
  Tensor loss = empty({N}, acc_type, input.device());
  Tensor coef = empty_for_writing({need_grad ? N : 0, J}, acc_type);
  FS_DISPATCH_FLOATING(input.scalar_type(), "negative_sampling_forward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const Rows<scalar_t> a = rows_of<scalar_t>(input, weight, target, negatives, ignore_index);
    acc_t* l = data<acc_t>(loss);
    acc_t* c = need_grad ? data<acc_t>(coef) : nullptr;
    torch::stable::parallel_for(0, N, 64, [&](int64_t begin, int64_t end) {
      vec::with_best_isa([&]() FS_INLINE_LAMBDA { forward_rows_body(a, l, c, begin, end); });
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
  Tensor grad_input = empty_for_writing({N, D}, input.scalar_type());
  Tensor grad_weight, ids;
  FS_DISPATCH_FLOATING(input.scalar_type(), "negative_sampling_backward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const Rows<scalar_t> a =
        rows_of<scalar_t>(input, weight, b.target, b.negatives, ignore_index);
    const scalar_t* h = a.h;
    const int64_t *tg = a.tg, *ng = a.ng;
    const acc_t* c = data<acc_t>(b.coef);
    const acc_t* g = data<acc_t>(b.grad_loss);
    scalar_t* gi = data<scalar_t>(grad_input);
    torch::stable::parallel_for(0, N, 64, [&](int64_t begin, int64_t end) {
      vec::with_best_isa([&]() FS_INLINE_LAMBDA { grad_input_rows_body(a, c, g, gi, begin, end); });
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
