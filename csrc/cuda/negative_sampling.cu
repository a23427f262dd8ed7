// Negative-sampling (word2vec) loss on CUDA: one warp per row, a fused
// gather-dot-sigmoid over the row's T true classes and K negatives, no [N, K, D] tensor.
// The maths is that of csrc/cpu/negative_sampling.cpp:
//   loss_n = sum_t softplus(-w_t.h) + sum_k softplus(w_k.h),
//   coef_nj = dloss_n/d(w_j.h) = sigmoid(w_j.h) - [j is true],
//   grad_h_n = g_n sum_j coef_nj w_j,   grad_w_j += g_n coef_nj h_n.
// The backward computes grad_h and, for negatives per row unless determinism or a sparse
// gradient is asked for, adds into grad_W with atomics in the same pass (each W row it reads
// is the row it updates). Shared negatives [K] would make every row add into the same K rows
// (N-way contention): their gradient is the GEMM (g * coef[:, T:])^T H [K, D] instead, scattered
// with the true pairs.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include "../common/loss_host.h"
#include "loss_cuda.cuh"
#include "runtime.cuh"

namespace fastsoftmax {
namespace {

using namespace loss;

template <class scalar_t, class acc_t>
struct NsParams {
  int64_t N, D, T, K, neg_stride, ignore_index;
  const scalar_t* input;    // [N, D]
  const scalar_t* weight;   // [V, D]
  const int64_t* target;    // [N, T]
  const int64_t* negatives;  // [N, K] or [K] (neg_stride 0)
  acc_t* loss;              // [N]
  acc_t* coef;              // [N, T + K]
  const acc_t* grad_loss;   // [N]
  scalar_t* grad_input;     // [N, D]
  acc_t* grad_weight_acc;   // [V, D] or nullptr: no atomic weight update

  __device__ int64_t id(int64_t n, int64_t j) const {
    return j < T ? target[n * T + j] : negatives[n * neg_stride + (j - T)];
  }
};

template <class scalar_t, class acc_t>
__global__ void ns_forward_kernel(NsParams<scalar_t, acc_t> p) {
  const int lane = threadIdx.x % kWarp;
  const int64_t J = p.T + p.K;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
       n < p.N; n += warps) {
    acc_t* cn = p.coef + n * J;
    if (p.target[n * p.T] == p.ignore_index) {
      for (int64_t j = lane; j < J; j += kWarp) cn[j] = acc_t(0);
      if (lane == 0) p.loss[n] = acc_t(0);
      continue;
    }
    const scalar_t* h = p.input + n * p.D;
    acc_t sum = 0;
    for (int64_t j = 0; j < J; ++j) {
      const scalar_t* w = p.weight + p.id(n, j) * p.D;
      acc_t s = 0;
      for (int64_t d = lane; d < p.D; d += kWarp)
        s += static_cast<acc_t>(h[d]) * static_cast<acc_t>(w[d]);
      s = warp_sum(s);  // every lane holds the score
      const bool is_true = j < p.T;
      sum += is_true ? softplus(-s) : softplus(s);
      if (lane == 0) cn[j] = sigmoid(s) - (is_true ? acc_t(1) : acc_t(0));
    }
    if (lane == 0) p.loss[n] = sum;
  }
}

template <class scalar_t, class acc_t>
__global__ void ns_backward_kernel(NsParams<scalar_t, acc_t> p) {
  const int lane = threadIdx.x % kWarp;
  const int64_t J = p.T + p.K;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
       n < p.N; n += warps) {
    const acc_t g = p.grad_loss[n];
    const acc_t* cn = p.coef + n * J;
    const scalar_t* h = p.input + n * p.D;
    for (int64_t d = lane; d < p.D; d += kWarp) {
      const acc_t hd = static_cast<acc_t>(h[d]);
      acc_t acc = 0;
      for (int64_t j = 0; j < J; ++j) {
        const acc_t c = g * cn[j];
        const int64_t id = p.id(n, j);
        acc += c * static_cast<acc_t>(p.weight[id * p.D + d]);
        if (p.grad_weight_acc != nullptr && c != acc_t(0))
          atomicAdd(p.grad_weight_acc + id * p.D + d, c * hd);
      }
      p.grad_input[n * p.D + d] = static_cast<scalar_t>(acc);
    }
  }
}

std::tuple<at::Tensor, at::Tensor> negative_sampling_forward_cuda(
    const at::Tensor& input_, const at::Tensor& weight_, const at::Tensor& target_,
    const at::Tensor& negatives_, int64_t ignore_index, bool /*sparse: read by the backward*/) {
  check_negative_sampling(input_, weight_, target_, negatives_, ignore_index);
  const cuda::DeviceGuard guard(input_.device());
  const at::Tensor input = input_.contiguous(), weight = weight_.contiguous();
  const at::Tensor target = target_.contiguous(), negatives = negatives_.contiguous();
  const int64_t N = input.size(0), T = target.size(1), K = negatives.size(-1);
  const auto acc_type = at::toOpMathType(input.scalar_type());
  at::Tensor loss = at::empty({N}, input.options().dtype(acc_type));
  at::Tensor coef = at::empty({N, T + K}, input.options().dtype(acc_type));
  if (N == 0) return {loss, coef};
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "negative_sampling_forward_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        NsParams<scalar_t, acc_t> p{N, input.size(1), T, K, negatives.dim() == 2 ? K : 0,
                                    ignore_index, input.data_ptr<scalar_t>(),
                                    weight.data_ptr<scalar_t>(), target.data_ptr<int64_t>(),
                                    negatives.data_ptr<int64_t>(), loss.data_ptr<acc_t>(),
                                    coef.data_ptr<acc_t>(), nullptr, nullptr, nullptr};
        FS_LAUNCH((ns_forward_kernel<scalar_t, acc_t>), blocks_for(N, kThreads / kWarp), kThreads,
                  0, p);
      });
  return {loss, coef};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> negative_sampling_backward_cuda(
    const at::Tensor& grad_loss_, const at::Tensor& input_, const at::Tensor& weight_,
    const at::Tensor& target_, const at::Tensor& negatives_, const at::Tensor& coef_,
    int64_t ignore_index, bool sparse) {
  const cuda::DeviceGuard guard(input_.device());
  const NegativeSamplingBackward b = negative_sampling_backward_prologue(
      grad_loss_, input_, weight_, target_, negatives_, coef_, ignore_index);
  const at::Tensor &input = b.input, &target = b.target, &negatives = b.negatives;
  const at::Tensor &coef = b.coef, &grad_loss = b.grad_loss;
  const int64_t N = b.N, D = b.D, V = b.V, T = b.T, K = b.K, J = b.J;
  const auto acc_type = at::toOpMathType(input.scalar_type());
  const bool sorted = sparse || at::globalContext().deterministicAlgorithms();
  const bool shared = negatives.dim() == 1;
  const bool fused = !sorted && !shared;
  at::Tensor grad_input = at::empty_like(input);
  at::Tensor grad_weight, ids = at::empty({0}, input.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "negative_sampling_backward_cuda", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        at::Tensor acc_buf;
        if (fused) acc_buf = at::zeros({V, D}, input.options().dtype(acc_type));
        NsParams<scalar_t, acc_t> p{N, D, T, K, b.neg_stride, ignore_index,
                                    input.data_ptr<scalar_t>(), b.weight.data_ptr<scalar_t>(),
                                    target.data_ptr<int64_t>(), negatives.data_ptr<int64_t>(),
                                    nullptr, coef.data_ptr<acc_t>(), grad_loss.data_ptr<acc_t>(),
                                    grad_input.data_ptr<scalar_t>(),
                                    fused ? acc_buf.data_ptr<acc_t>() : nullptr};
        if (N > 0) {
          FS_LAUNCH((ns_backward_kernel<scalar_t, acc_t>), blocks_for(N, kThreads / kWarp),
                    kThreads, 0, p);
        }
        if (fused) {
          grad_weight = acc_buf.to(input.scalar_type());
          return;
        }
        PairGroups<scalar_t, acc_t> pairs;
        pairs.num = 2;
        using Pairs = PairGroup<scalar_t, acc_t>;
        pairs.g[0] =
            Pairs::of(N, T, p.target, T).weighted_by(p.coef, J).scaled_by(p.grad_loss).rows_of(
                p.input, D);
        at::Tensor keys, grad_shared;
        if (shared) {
          grad_shared = (coef.slice(1, T) * grad_loss.unsqueeze(1))
                            .to(input.scalar_type())
                            .t()
                            .mm(input);  // [K, D]
          pairs.g[1] =
              Pairs::of(K, 1, p.negatives, 1).rows_of(grad_shared.data_ptr<scalar_t>(), D);
          keys = at::cat({target.reshape(-1), negatives});
        } else {
          pairs.g[1] = Pairs::of(N, K, p.negatives, b.neg_stride)
                           .weighted_by(p.coef + T, J)
                           .scaled_by(p.grad_loss)
                           .rows_of(p.input, D);
          keys = at::cat({target.reshape(-1), negatives.reshape(-1)});
        }
        if (sorted) {
          std::tie(grad_weight, ids) =
              scatter_pairs_sorted_cuda<scalar_t>(pairs, keys, V, D, sparse, b.weight.options());
        } else {
          grad_weight = scatter_pairs_atomic_cuda<scalar_t>(pairs, V, D, b.weight.options());
        }
      });
  return {grad_input, grad_weight, ids};
}

}  // namespace

FS_CUDA_IMPL(m) {
  m.impl("negative_sampling_forward", &negative_sampling_forward_cuda);
  m.impl("negative_sampling_backward", &negative_sampling_backward_cuda);
}

}  // namespace fastsoftmax
