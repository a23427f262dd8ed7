// Hierarchical softmax on the CPU: per row, a fused walk-dot-sigmoid along the class's path
// from its leaf up to the root, with no [N, L, D] tensor. For row n with hidden vector h (D)
// and the inner nodes i_1..i_L on its path (branch bits b_1..b_L):
//   loss_n = sum_j softplus(b_j ? s_j : -s_j),   s_j = w_{i_j}.h
//   coef_nj = dloss_n/ds_j = sigmoid(s_j) - (1 - b_j)
// The backward reuses the forward's coefficients and path ids, no recomputation:
//   grad_h_n = g_n sum_j coef_nj w_{i_j},   grad_w_i += g_n coef_nj h_n
// and the weight gradient a deterministic counting-sort scatter (scatter_paths).
#include <atomic>

#include "../common/hsoftmax_host.h"
#include "loss_cpu.h"

namespace fastsoftmax {
namespace {

using namespace loss;
using hsoftmax::step_coef;
using hsoftmax::step_loss;

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
    const scalar_t* h = data<scalar_t>(input);
    const scalar_t* w = data<scalar_t>(weight);
    const int64_t* tg = data<int64_t>(target);
    const int32_t* up = data<int32_t>(links);
    acc_t* l = data<acc_t>(loss);
    acc_t* c = data<acc_t>(coef);
    int64_t* ids = data<int64_t>(nodes);
    torch::stable::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
      const int64_t row_bytes = D * static_cast<int64_t>(sizeof(scalar_t));
      for (int64_t n = begin; n < end; ++n) {
        acc_t* cn = c + n * L;
        int64_t* in = ids + n * L;
        int64_t len = 0;
        if (tg[n] != ignore_index) {
          // Walk up first (the links are a short chain of dependent loads), asking for
          // every weight row of the path as soon as its id is known; the bit waits in cn.
          for (int64_t x = tg[n];;) {
            const int32_t e = up[x];
            if (e < -1 || e >= 2 * (V - 1)) {
              bad_link = true;
              break;
            }
            if (e < 0) {
              if (x < V) class_is_root = true;
              break;
            }
            if (len == L) {
              unterminated = tg[n];
              break;
            }
            in[len] = e >> 1;
            cn[len] = acc_t(e & 1);
            prefetch_row(w + in[len] * D, row_bytes);
            x = V + (e >> 1);
            ++len;
          }
        }
        const scalar_t* hn = h + n * D;
        acc_t sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          const int bit = cn[j] != acc_t(0);
          const acc_t s = dot<scalar_t, acc_t>(hn, w + in[j] * D, D);
          sum += step_loss(s, bit);
          cn[j] = step_coef(s, bit);
        }
        for (int64_t j = len; j < L; ++j) {
          cn[j] = acc_t(0);
          in[j] = V - 1;  // the sentinel: one past the last inner node
        }
        l[n] = sum;
      }
    });
  });
  hsoftmax::check_link_flags(bad_link.load(), class_is_root.load(), V);
  FS_CHECK_VALUE(unterminated.load() < 0, "the path of class ", unterminated.load(),
                 " does not reach the root within max_depth = ", max_depth,
                 " steps: links and max_depth must describe one tree (build it with "
                 "fastsoftmax.ClassTree)");
  return {loss, coef, nodes};
}

// grad_W[i] = sum over the (row n, step j) pairs with nodes[n, j] = i of
// g_n coef_nj h_n, padding (the sentinel id num_inner) left out. Deterministic for any
// thread count: a stable counting sort by inner id, then each touched row sums its pairs in
// (row, step) order, one row per task. Dense: [num_inner, D], untouched rows zero (never
// written: lazy_zeros). Sparse: the touched rows [U, D] and their ids [U], ascending.
template <class scalar_t, class acc_t>
std::tuple<Tensor, Tensor> scatter_paths(const int64_t* nodes, const acc_t* coef,
                                         const acc_t* grad_loss, const scalar_t* h, int64_t N,
                                         int64_t L, int64_t D, int64_t num_inner, bool sparse,
                                         ScalarType dtype) {
  const int64_t P = N * L;
  std::vector<int64_t> start(num_inner + 1, 0);
  for (int64_t p = 0; p < P; ++p)
    if (nodes[p] < num_inner) ++start[nodes[p] + 1];
  std::vector<int64_t> touched;
  for (int64_t i = 0; i < num_inner; ++i) {
    if (start[i + 1] > 0) touched.push_back(i);
    start[i + 1] += start[i];
  }
  std::vector<int64_t> order(start[num_inner]), fill(start.begin(), start.end() - 1);
  for (int64_t p = 0; p < P; ++p)
    if (nodes[p] < num_inner) order[fill[nodes[p]]++] = p;
  const int64_t U = static_cast<int64_t>(touched.size());
  const Device cpu(torch::headeronly::DeviceType::CPU);
  Tensor out = sparse ? empty({U, D}, dtype, cpu) : lazy_zeros<scalar_t>(num_inner, D, dtype);
  Tensor ids = empty({sparse ? U : 0}, kLong, cpu);
  if (sparse) std::copy(touched.begin(), touched.end(), data<int64_t>(ids));
  scalar_t* o = data<scalar_t>(out);
  const int64_t row_bytes = D * static_cast<int64_t>(sizeof(scalar_t));
  torch::stable::parallel_for(0, U, 16, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(D);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t i = touched[u];
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t q = start[i]; q < start[i + 1]; ++q) {
        if (q + 2 < start[i + 1]) prefetch_row(h + (order[q + 2] / L) * D, row_bytes);
        const int64_t p = order[q], n = p / L;
        axpy(acc.data(), coef[p] * grad_loss[n], h + n * D, D);
      }
      store(o + (sparse ? u : i) * D, acc.data(), D);
    }
  });
  return {out, ids};
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
      std::vector<acc_t> acc(D);
      const int64_t row_bytes = D * static_cast<int64_t>(sizeof(scalar_t));
      for (int64_t n = begin; n < end; ++n) {
        const int64_t* pn = in + n * L;
        for (int64_t j = 0; j < L && pn[j] < num_inner; ++j) prefetch_row(w + pn[j] * D, row_bytes);
        std::fill(acc.begin(), acc.end(), acc_t(0));
        for (int64_t j = 0; j < L && pn[j] < num_inner; ++j)
          axpy(acc.data(), c[n * L + j], w + pn[j] * D, D);
        for (int64_t d = 0; d < D; ++d) acc[d] *= g[n];
        store(gi + n * D, acc.data(), D);
      }
    });
    std::tie(grad_weight, ids) =
        scatter_paths(in, c, g, h, N, L, D, num_inner, sparse, weight.scalar_type());
  });
  return {grad_input, grad_weight, ids};
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("hierarchical_softmax_forward", TORCH_BOX(&hierarchical_softmax_forward_cpu));
  m.impl("hierarchical_softmax_backward", TORCH_BOX(&hierarchical_softmax_backward_cpu));
}

}  // namespace fastsoftmax
