// Scores of per-row candidates on CUDA, the maths of csrc/cpu/row_scores.cpp:
//   s[n, k] = h_n . w_{ids[n, k]} + b_{ids[n, k]}, one warp per (n, k) pair (lanes split D,
//   a fixed-order warp sum); backward grad_h one warp per row, grad_w by the pair scatter of
//   loss_cuda.cuh (sorted and deterministic under torch.use_deterministic_algorithms, else
//   atomic).
#include "../common/margin_host.h"
#include "loss_cuda.cuh"
#include "runtime.cuh"

namespace fastsoftmax {
namespace {

using namespace loss;
using margin::RowScores;

template <class scalar_t, class acc_t>
__global__ void row_scores_kernel(int64_t N, int64_t D, int64_t K, const scalar_t* input,
                                  const scalar_t* weight, const acc_t* bias, const int64_t* ids,
                                  acc_t* scores) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t q = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
       q < N * K; q += warps) {
    const int64_t n = q / K, c = ids[q];
    const scalar_t* h = input + n * D;
    const scalar_t* w = weight + c * D;
    acc_t s = 0;
    for (int64_t d = lane; d < D; d += kWarp)
      s += static_cast<acc_t>(h[d]) * static_cast<acc_t>(w[d]);
    s = warp_sum(s);
    if (lane == 0) scores[q] = s + (bias ? bias[c] : acc_t(0));
  }
}

template <class scalar_t, class acc_t>
__global__ void row_scores_input_grad_kernel(int64_t N, int64_t D, int64_t K,
                                             const scalar_t* weight, const int64_t* ids,
                                             const acc_t* grad, scalar_t* grad_input) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; n < N;
       n += warps) {
    for (int64_t d = lane; d < D; d += kWarp) {
      acc_t acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += grad[n * K + k] * static_cast<acc_t>(weight[ids[n * K + k] * D + d]);
      grad_input[n * D + d] = static_cast<scalar_t>(acc);
    }
  }
}

Tensor row_scores_forward_cuda(const Tensor& input_, const Tensor& weight_,
                               const std::optional<Tensor>& bias, const Tensor& ids_) {
  const cuda::DeviceGuard guard(input_.device());
  const RowScores r = margin::row_scores_prologue(input_, weight_, bias, ids_);
  const ScalarType acc_type = to_opmath(r.input.scalar_type());
  Tensor scores = empty({r.N, r.K}, acc_type, r.input.device());
  if (r.N * r.K == 0) return scores;
  const Tensor b = bias.has_value() ? contiguous(to(*bias, acc_type)) : Tensor();
  FS_DISPATCH_FLOATING(r.input.scalar_type(), "row_scores_forward_cuda", [&] {
    using acc_t = opmath_t<scalar_t>;
    FS_LAUNCH((row_scores_kernel<scalar_t, acc_t>), blocks_for(r.N * r.K, kThreads / kWarp),
              kThreads, 0, r.N, r.D, r.K, data<scalar_t>(r.input), data<scalar_t>(r.weight),
              bias.has_value() ? data<acc_t>(b) : nullptr, data<int64_t>(r.ids),
              data<acc_t>(scores));
  });
  return scores;
}

// deterministic: torch.are_deterministic_algorithms_enabled(), passed by fastsoftmax/ops/margin.py.
std::tuple<Tensor, Tensor, Tensor> row_scores_backward_cuda(
    const Tensor& grad_scores_, const Tensor& input_, const Tensor& weight_, const Tensor& ids_,
    bool has_bias, bool deterministic) {
  const cuda::DeviceGuard guard(input_.device());
  const RowScores r = margin::row_scores_prologue(input_, weight_, std::nullopt, ids_);
  const Tensor grad = margin::row_scores_grad(grad_scores_, r);
  const ScalarType dtype = r.input.scalar_type();
  const Device device = r.input.device();
  Tensor grad_input = empty({r.N, r.D}, dtype, device);
  Tensor grad_weight, unused_ids;
  FS_DISPATCH_FLOATING(dtype, "row_scores_backward_cuda", [&] {
    using acc_t = opmath_t<scalar_t>;
    if (r.N > 0) {
      FS_LAUNCH((row_scores_input_grad_kernel<scalar_t, acc_t>),
                blocks_for(r.N, kThreads / kWarp), kThreads, 0, r.N, r.D, r.K,
                data<scalar_t>(r.weight), data<int64_t>(r.ids), data<acc_t>(grad),
                data<scalar_t>(grad_input));
    }
    PairGroups<scalar_t, acc_t> pairs;
    pairs.num = 1;
    pairs.g[0] = PairGroup<scalar_t, acc_t>::of(r.N, r.K, data<int64_t>(r.ids), r.K)
                     .weighted_by(data<acc_t>(grad), r.K)
                     .rows_of(data<scalar_t>(r.input), r.D);
    if (deterministic) {
      std::tie(grad_weight, unused_ids) =
          scatter_pairs_sorted_cuda<scalar_t>(pairs, flat(r.ids), r.V, r.D, false, dtype);
    } else {
      grad_weight = scatter_pairs_atomic_cuda<scalar_t>(pairs, r.V, r.D, dtype, device);
    }
  });
  return {grad_input, grad_weight, margin::row_scores_bias_grad(grad, r, has_bias)};
}

}  // namespace

FS_CUDA_IMPL(m) {
  m.impl("row_scores_forward", TORCH_BOX(&row_scores_forward_cuda));
  m.impl("row_scores_backward", TORCH_BOX(&row_scores_backward_cuda));
}

}  // namespace fastsoftmax
