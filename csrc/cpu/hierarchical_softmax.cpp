// Hierarchical softmax on the CPU: per row, a fused walk-dot-sigmoid along the class's path
// from its leaf up to the root, with no [N, L, D] tensor. For row n with hidden vector h (D)
// and the inner nodes i_1..i_L on its path (branch bits b_1..b_L):
//   loss_n = sum_j softplus(b_j ? s_j : -s_j),   s_j = w_{i_j}.h
//   coef_nj = dloss_n/ds_j = sigmoid(s_j) - (1 - b_j)
// The backward reuses the forward's coefficients and path ids, no recomputation:
//   grad_h_n = g_n sum_j coef_nj w_{i_j},   grad_w_i += g_n coef_nj h_n
// and the weight gradient the deterministic pair scatter of loss_cpu.h.
#include <atomic>

#include "../common/hsoftmax_host.h"
#include "loss_cpu.h"
#include "vec_math.h"

namespace fastsoftmax {
namespace {

using namespace loss;

// The row loops' inputs and the flags a bad tree raises.
template <class scalar_t>
struct Paths {
  using acc_t = opmath_t<scalar_t>;
  const scalar_t* h;
  const scalar_t* w;
  const int64_t* tg;
  const int32_t* up;
  int64_t V, D, L, ignore_index;
  std::atomic<int64_t>* unterminated;
  std::atomic<bool>* bad_link;
  std::atomic<bool>* class_is_root;
};

// Forward of rows [begin, end): loss l [N], coef c [N, L], path ids [N, L].
template <class scalar_t>
FS_ALWAYS_INLINE void forward_rows_body(const Paths<scalar_t>& a, opmath_t<scalar_t>* l,
                                        opmath_t<scalar_t>* c, int64_t* ids, int64_t begin,
                                        int64_t end) {
  using acc_t = opmath_t<scalar_t>;
  const int64_t V = a.V, D = a.D, L = a.L;
  const int64_t row_bytes = D * static_cast<int64_t>(sizeof(scalar_t));
  std::vector<acc_t> x(L), sp(L), sg(L);
  for (int64_t n = begin; n < end; ++n) {
    acc_t* cn = c + n * L;
    int64_t* in = ids + n * L;
    int64_t len = 0;
    if (a.tg[n] != a.ignore_index) {
      // Walk up first (the links are a short chain of dependent loads), asking for every
      // weight row of the path as soon as its id is known; the bit waits in cn.
      for (int64_t node = a.tg[n];;) {
        const int32_t e = a.up[node];
        if (e < -1 || e >= 2 * (V - 1)) {
          *a.bad_link = true;
          break;
        }
        if (e < 0) {
          if (node < V) *a.class_is_root = true;
          break;
        }
        if (len == L) {
          *a.unterminated = a.tg[n];
          break;
        }
        in[len] = e >> 1;
        cn[len] = acc_t(e & 1);
        prefetch_row(a.w + in[len] * D, row_bytes);
        node = V + (e >> 1);
        ++len;
      }
    }
    // Step j's loss is softplus(x_j), x_j = bit ? s_j : -s_j, and its coefficient
    // sigmoid(s_j) - (1 - bit) = bit ? sigmoid(x_j) : -sigmoid(x_j): one vectorised pass.
    const scalar_t* hn = a.h + n * D;
    for (int64_t j = 0; j < len; ++j) {
      const acc_t s = dot<scalar_t, acc_t>(hn, a.w + in[j] * D, D);
      x[j] = cn[j] != acc_t(0) ? s : -s;
    }
    vec::softplus_sigmoid(x.data(), len, sp.data(), sg.data());
    acc_t sum = 0;
    for (int64_t j = 0; j < len; ++j) {
      sum += sp[j];
      cn[j] = cn[j] != acc_t(0) ? sg[j] : -sg[j];
    }
    for (int64_t j = len; j < L; ++j) {
      cn[j] = acc_t(0);
      in[j] = V - 1;  // the sentinel: one past the last inner node
    }
    l[n] = sum;
  }
}

// grad_h of rows [begin, end): sum_j g_n coef_nj w_{i_j}.
template <class scalar_t>
FS_ALWAYS_INLINE void grad_input_rows_body(const scalar_t* w, const int64_t* nodes,
                                           const opmath_t<scalar_t>* c,
                                           const opmath_t<scalar_t>* g, scalar_t* gi, int64_t D,
                                           int64_t L, int64_t num_inner, int64_t begin,
                                           int64_t end) {
  using acc_t = opmath_t<scalar_t>;
  constexpr bool in_place = std::is_same<scalar_t, acc_t>::value;
  std::vector<acc_t> wide(in_place ? 0 : D);  // half, bfloat16: the sum in float
  const int64_t row_bytes = D * static_cast<int64_t>(sizeof(scalar_t));
  for (int64_t n = begin; n < end; ++n) {
    const int64_t* pn = nodes + n * L;
    for (int64_t j = 0; j < L && pn[j] < num_inner; ++j) prefetch_row(w + pn[j] * D, row_bytes);
    // sum_j (g_n coef_nj) w_{i_j}, its first term stored: float and double sum in the output.
    acc_t* y = in_place ? reinterpret_cast<acc_t*>(gi + n * D) : wide.data();
    const acc_t gn = g[n];
    if (L == 0 || pn[0] >= num_inner) std::fill(y, y + D, acc_t(0));
    for (int64_t j = 0; j < L && pn[j] < num_inner; ++j) {
      if (j == 0) vec::scale(y, gn * c[n * L], w + pn[0] * D, D);
      else axpy(y, gn * c[n * L + j], w + pn[j] * D, D);
    }
    if (!in_place) store(gi + n * D, y, D);
  }
}

std::tuple<Tensor, Tensor, Tensor> hierarchical_softmax_forward_cpu(
    const Tensor& input_, const Tensor& weight_, const Tensor& target_, const Tensor& links_,
    int64_t max_depth, int64_t ignore_index,
    bool /*sparse: read by the backward*/) {
  hsoftmax::check_forward(input_, weight_, target_, links_, max_depth, ignore_index,
                          /*check_link_values=*/false);
  const Tensor input = contiguous(input_), weight = contiguous(weight_);
  const Tensor target = contiguous(target_), links = contiguous(links_);
  const int64_t N = input.size(0), D = input.size(1), V = weight.size(0) + 1;
  const int64_t L = max_depth;
  const ScalarType acc_type = to_opmath(input.scalar_type());
  const Device cpu = input.device();
  Tensor loss = empty({N}, acc_type, cpu);
  Tensor coef = empty({N, L}, acc_type, cpu);
  Tensor nodes = empty({N, L}, kLong, cpu);
  std::atomic<int64_t> unterminated{-1};
  std::atomic<bool> bad_link{false}, class_is_root{false};
  FS_DISPATCH_FLOATING(input.scalar_type(), "hierarchical_softmax_forward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const Paths<scalar_t> a{data<scalar_t>(input), data<scalar_t>(weight),
                            data<int64_t>(target), data<int32_t>(links), V, D, L, ignore_index,
                            &unterminated, &bad_link, &class_is_root};
    acc_t* l = data<acc_t>(loss);
    acc_t* c = data<acc_t>(coef);
    int64_t* ids = data<int64_t>(nodes);
    torch::stable::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
      vec::with_best_isa([&]() FS_INLINE_LAMBDA { forward_rows_body(a, l, c, ids, begin, end); });
    });
  });
  hsoftmax::check_link_flags(bad_link.load(), class_is_root.load(), V);
  FS_CHECK_VALUE(unterminated.load() < 0, "the path of class ", unterminated.load(),
                 " does not reach the root within max_depth = ", max_depth,
                 " steps: links and max_depth must describe one tree (build it with "
                 "fastsoftmax.ClassTree)");
  return {loss, coef, nodes};
}

// deterministic: unused, the CPU backward always is (the CUDA one reads it).
std::tuple<Tensor, Tensor, Tensor> hierarchical_softmax_backward_cpu(
    const Tensor& grad_loss_, const Tensor& input_, const Tensor& weight_, const Tensor& nodes_,
    const Tensor& coef_, bool sparse, bool /*deterministic*/) {
  const hsoftmax::BackwardInputs b =
      hsoftmax::prepare_backward(grad_loss_, input_, weight_, nodes_, coef_);
  const Tensor &input = b.input, &weight = b.weight, &nodes = b.nodes, &coef = b.coef;
  const Tensor& grad_loss = b.grad_loss;
  const int64_t N = b.N, D = b.D, num_inner = b.num_inner, L = b.L;
  Tensor grad_input = torch::stable::empty_like(input);
  Tensor grad_weight, ids;
  FS_DISPATCH_FLOATING(input.scalar_type(), "hierarchical_softmax_backward_cpu", [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* h = data<scalar_t>(input);
    const scalar_t* w = data<scalar_t>(weight);
    const int64_t* in = data<int64_t>(nodes);
    const acc_t* c = data<acc_t>(coef);
    const acc_t* g = data<acc_t>(grad_loss);
    scalar_t* gi = data<scalar_t>(grad_input);
    torch::stable::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
      vec::with_best_isa([&]() FS_INLINE_LAMBDA {
        grad_input_rows_body(w, in, c, g, gi, D, L, num_inner, begin, end);
      });
    });
    // grad_W[i] = sum over the (row n, step j) pairs with nodes[n, j] = i of g_n coef_nj h_n;
    // the padding steps' sentinel id num_inner lies outside the classes and is left out.
    PairGroups<scalar_t, acc_t> pairs;
    pairs.num = 1;
    pairs.g[0] =
        PairGroup<scalar_t, acc_t>::of(N, L, in, L).weighted_by(c, L).scaled_by(g).rows_of(h, D);
    std::tie(grad_weight, ids) =
        scatter_pairs_cpu<scalar_t>(pairs, num_inner, D, sparse, weight.scalar_type());
  });
  return {grad_input, grad_weight, ids};
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("hierarchical_softmax_forward", TORCH_BOX(&hierarchical_softmax_forward_cpu));
  m.impl("hierarchical_softmax_backward", TORCH_BOX(&hierarchical_softmax_backward_cpu));
}

}  // namespace fastsoftmax
