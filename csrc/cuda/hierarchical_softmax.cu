// Hierarchical softmax on CUDA: one warp per row walks the class's path from its leaf up to
// the root, a fused dot-log-sigmoid per inner node, no [N, L, D] tensor. The maths is that of
// csrc/cpu/hierarchical_softmax.cpp:
//   loss_n = sum_j softplus(b_j ? s_j : -s_j),   s_j = w_{i_j}.h,
//   coef_nj = sigmoid(s_j) - (1 - b_j),
//   grad_h_n = g_n sum_j coef_nj w_{i_j},   grad_w_i += g_n coef_nj h_n.
// The backward computes grad_h and, unless determinism or a sparse gradient is asked for,
// adds into grad_W with atomics in the same pass. Otherwise the (row, step) pairs go through
// loss_cuda.cuh's sorted scatter, bit-identical run to run. Padding steps carry the sentinel id V - 1 and are never scattered.
#include <limits>

#include "../common/hsoftmax_host.h"
#include "loss_cuda.cuh"
#include "runtime.cuh"

namespace fastsoftmax {
namespace {

using namespace loss;
using hsoftmax::step_coef;
using hsoftmax::step_loss;

template <class scalar_t, class acc_t>
struct HsParams {
  int64_t N, D, V, L, ignore_index;
  const scalar_t* input;   // [N, D]
  const scalar_t* weight;  // [V - 1, D]
  const int64_t* target;   // [N]
  const int32_t* links;    // [2V - 1]
  acc_t* loss;             // [N]
  acc_t* coef;             // [N, L]
  int64_t* nodes;          // [N, L]
  const acc_t* grad_loss;  // [N]
  scalar_t* grad_input;    // [N, D]
  acc_t* grad_weight_acc;  // [V - 1, D] or nullptr: no atomic weight update
};

template <class scalar_t, class acc_t>
__global__ void hs_forward_kernel(HsParams<scalar_t, acc_t> p) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
       n < p.N; n += warps) {
    acc_t* cn = p.coef + n * p.L;
    int64_t* in = p.nodes + n * p.L;
    const scalar_t* h = p.input + n * p.D;
    const int64_t t = p.target[n];
    int64_t len = 0;
    acc_t sum = 0;
    bool reached_root = true;
    if (t != p.ignore_index) {
      for (int64_t x = t;;) {
        const int32_t e = p.links[x];  // the same address in every lane: one broadcast read
        if (e < 0) break;
        if (len == p.L) {
          reached_root = false;
          break;
        }
        const int64_t i = e >> 1;
        const scalar_t* w = p.weight + i * p.D;
        acc_t s = 0;
        for (int64_t d = lane; d < p.D; d += kWarp)
          s += static_cast<acc_t>(h[d]) * static_cast<acc_t>(w[d]);
        s = warp_sum(s);  // every lane holds the score
        sum += step_loss(s, e & 1);
        if (lane == 0) {
          cn[len] = step_coef(s, e & 1);
          in[len] = i;
        }
        x = p.V + i;
        ++len;
      }
    }
    for (int64_t j = len + lane; j < p.L; j += kWarp) {
      cn[j] = acc_t(0);
      in[j] = p.V - 1;
    }
    // A path longer than max_depth (links not from one tree: the host checks only ranges)
    // cannot raise from here; its loss is NaN rather than a silently truncated sum.
    if (lane == 0) p.loss[n] = reached_root ? sum : std::numeric_limits<acc_t>::quiet_NaN();
  }
}

template <class scalar_t, class acc_t>
__global__ void hs_backward_kernel(HsParams<scalar_t, acc_t> p) {
  const int lane = threadIdx.x % kWarp;
  const int64_t num_inner = p.V - 1;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
       n < p.N; n += warps) {
    const acc_t g = p.grad_loss[n];
    const acc_t* cn = p.coef + n * p.L;
    const int64_t* in = p.nodes + n * p.L;
    const scalar_t* h = p.input + n * p.D;
    for (int64_t d = lane; d < p.D; d += kWarp) {
      const acc_t hd = static_cast<acc_t>(h[d]);
      acc_t acc = 0;
      for (int64_t j = 0; j < p.L; ++j) {
        const int64_t i = in[j];
        if (i >= num_inner) break;  // padding from here on
        const acc_t c = g * cn[j];
        acc += c * static_cast<acc_t>(p.weight[i * p.D + d]);
        if (p.grad_weight_acc != nullptr && c != acc_t(0))
          atomicAdd(p.grad_weight_acc + i * p.D + d, c * hd);
      }
      p.grad_input[n * p.D + d] = static_cast<scalar_t>(acc);
    }
  }
}

// The deterministic weight gradient: loss_cuda.cuh's sorted scatter over every (row, step)
// pair. Padding pairs carry the sentinel id num_inner, one past the last inner node. Dense:
// num_inner + 1 rows, the padding's last one cut off by a view. Sparse: one row per pair, the
// padding's left zero (the scatter skips ids >= num_inner) and, as their number is not known
// on the host, relabelled in place with the largest touched inner id (0 if none): ids stay
// ascending and in range, and the coalesced gradient has only the CPU's rows, nothing read back.
template <class scalar_t, class acc_t>
std::tuple<Tensor, Tensor> scatter_paths_sorted(const HsParams<scalar_t, acc_t>& p,
                                                const Tensor& nodes, bool sparse,
                                                ScalarType dtype) {
  const int64_t num_inner = p.V - 1;
  const Device device = nodes.device();
  if (sparse && num_inner == 0) return {empty({0, p.D}, dtype, device), empty({0}, kLong, device)};
  PairGroups<scalar_t, acc_t> pairs;
  pairs.num = 1;
  pairs.g[0] = PairGroup<scalar_t, acc_t>::of(p.N, p.L, p.nodes, p.L)
                   .weighted_by(p.coef, p.L)
                   .scaled_by(p.grad_loss)
                   .rows_of(p.input, p.D);
  Tensor grad, ids;
  std::tie(grad, ids) = scatter_pairs_sorted_cuda<scalar_t>(
      pairs, torch::stable::reshape(nodes, {-1}), sparse ? num_inner : num_inner + 1, p.D,
      sparse, dtype);
  if (!sparse) return {torch::stable::narrow(grad, 0, 0, num_inner), ids};
  if (ids.numel() == 0) return {grad, ids};
  const Tensor padding = call("aten::ge", "Tensor", ids, cpu_scalar(num_inner, kLong));
  const Tensor last = call("aten::amax", "", call("aten::masked_fill", "Tensor", ids, padding,
                                                  cpu_scalar(0, kLong)),
                           std::vector<int64_t>{}, false);
  return {grad, call("aten::minimum", "", ids, last)};
}

std::tuple<Tensor, Tensor, Tensor> hierarchical_softmax_forward_cuda(
    const Tensor& input_, const Tensor& weight_, const Tensor& target_, const Tensor& links_,
    int64_t max_depth, int64_t ignore_index,
    bool /*sparse: read by the backward*/) {
  hsoftmax::check_forward(input_, weight_, target_, links_, max_depth, ignore_index,
                          /*check_link_values=*/true);
  const cuda::DeviceGuard guard(input_.device());
  const Tensor input = contiguous(input_), weight = contiguous(weight_);
  const Tensor target = contiguous(target_), links = contiguous(links_);
  const int64_t N = input.size(0), L = max_depth;
  const ScalarType acc_type = to_opmath(input.scalar_type());
  const Device device = input.device();
  Tensor loss = empty({N}, acc_type, device);
  Tensor coef = empty({N, L}, acc_type, device);
  Tensor nodes = empty({N, L}, kLong, device);
  if (N == 0) return {loss, coef, nodes};
  FS_DISPATCH_FLOATING(input.scalar_type(), "hierarchical_softmax_forward_cuda", [&] {
    using acc_t = opmath_t<scalar_t>;
    HsParams<scalar_t, acc_t> p{N, input.size(1), weight.size(0) + 1, L, ignore_index,
                                data<scalar_t>(input), data<scalar_t>(weight),
                                data<int64_t>(target), data<int32_t>(links), data<acc_t>(loss),
                                data<acc_t>(coef), data<int64_t>(nodes), nullptr, nullptr,
                                nullptr};
    FS_LAUNCH((hs_forward_kernel<scalar_t, acc_t>), blocks_for(N, kThreads / kWarp), kThreads,
              0, p);
  });
  return {loss, coef, nodes};
}

// deterministic: torch.are_deterministic_algorithms_enabled(), passed by
// fastsoftmax/ops/hierarchical.py.
std::tuple<Tensor, Tensor, Tensor> hierarchical_softmax_backward_cuda(
    const Tensor& grad_loss_, const Tensor& input_, const Tensor& weight_, const Tensor& nodes_,
    const Tensor& coef_, bool sparse, bool deterministic) {
  const cuda::DeviceGuard guard(input_.device());
  const hsoftmax::BackwardInputs b =
      hsoftmax::prepare_backward(grad_loss_, input_, weight_, nodes_, coef_);
  const Tensor &input = b.input, &weight = b.weight, &nodes = b.nodes, &coef = b.coef;
  const Tensor& grad_loss = b.grad_loss;
  const int64_t N = b.N, D = b.D, num_inner = b.num_inner, L = b.L;
  const ScalarType dtype = input.scalar_type(), acc_type = to_opmath(dtype);
  const Device device = input.device();
  const bool sorted = sparse || deterministic;
  Tensor grad_input = torch::stable::empty_like(input);
  Tensor grad_weight, ids = empty({0}, kLong, device);
  FS_DISPATCH_FLOATING(dtype, "hierarchical_softmax_backward_cuda", [&] {
    using acc_t = opmath_t<scalar_t>;
    Tensor acc_buf;
    if (!sorted) acc_buf = zeros({num_inner, D}, acc_type, device);
    HsParams<scalar_t, acc_t> p{N, D, num_inner + 1, L, 0,
                                data<scalar_t>(input), data<scalar_t>(weight),
                                nullptr, nullptr, nullptr, data<acc_t>(coef),
                                data<int64_t>(nodes), data<acc_t>(grad_loss),
                                data<scalar_t>(grad_input),
                                sorted ? nullptr : data<acc_t>(acc_buf)};
    if (N > 0) {
      FS_LAUNCH((hs_backward_kernel<scalar_t, acc_t>), blocks_for(N, kThreads / kWarp),
                kThreads, 0, p);
    }
    if (!sorted) {
      grad_weight = to(acc_buf, dtype);
      return;
    }
    std::tie(grad_weight, ids) = scatter_paths_sorted(p, nodes, sparse, dtype);
  });
  return {grad_input, grad_weight, ids};
}

}  // namespace

FS_CUDA_IMPL(m) {
  m.impl("hierarchical_softmax_forward", TORCH_BOX(&hierarchical_softmax_forward_cuda));
  m.impl("hierarchical_softmax_backward", TORCH_BOX(&hierarchical_softmax_backward_cuda));
}

}  // namespace fastsoftmax
