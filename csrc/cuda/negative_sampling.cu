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
#include <vector>

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
    acc_t* cn = p.coef == nullptr ? nullptr : p.coef + n * J;  // null: no backward follows
    if (p.target[n * p.T] == p.ignore_index) {
      for (int64_t j = lane; cn != nullptr && j < J; j += kWarp) cn[j] = acc_t(0);
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
      if (lane == 0 && cn != nullptr) cn[j] = sigmoid(s) - (is_true ? acc_t(1) : acc_t(0));
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

std::tuple<Tensor, Tensor> negative_sampling_forward_cuda(
    const Tensor& input_, const Tensor& weight_, const Tensor& target_, const Tensor& negatives_,
    int64_t ignore_index, bool /*sparse: read by the backward*/, bool need_grad) {
  check_negative_sampling(input_, weight_, target_, negatives_, ignore_index);
  const cuda::DeviceGuard guard(input_.device());
  const Tensor input = contiguous(input_);
  const Tensor weight = contiguous(weight_);
  const Tensor target = contiguous(target_);
  const Tensor negatives = contiguous(negatives_);
  const int64_t N = input.size(0), T = target.size(1), K = negatives.size(-1);
  const ScalarType acc_type = to_opmath(input.scalar_type());
  Tensor loss = empty({N}, acc_type, input.device());
  Tensor coef = empty({need_grad ? N : 0, T + K}, acc_type, input.device());
  if (N == 0) return {loss, coef};
  FS_DISPATCH_FLOATING(input.scalar_type(), "negative_sampling_forward_cuda", [&] {
    using acc_t = opmath_t<scalar_t>;
    NsParams<scalar_t, acc_t> p{N, input.size(1), T, K, negatives.dim() == 2 ? K : 0,
                                ignore_index, data<scalar_t>(input),
                                data<scalar_t>(weight), data<int64_t>(target),
                                data<int64_t>(negatives), data<acc_t>(loss),
                                need_grad ? data<acc_t>(coef) : nullptr, nullptr, nullptr,
                                nullptr};
    FS_LAUNCH((ns_forward_kernel<scalar_t, acc_t>), blocks_for(N, kThreads / kWarp), kThreads,
              0, p);
  });
  return {loss, coef};
}

// deterministic: torch.are_deterministic_algorithms_enabled(), passed by fastsoftmax/ops/losses.py.
std::tuple<Tensor, Tensor, Tensor> negative_sampling_backward_cuda(
    const Tensor& grad_loss_, const Tensor& input_, const Tensor& weight_, const Tensor& target_,
    const Tensor& negatives_, const Tensor& coef_, int64_t ignore_index, bool sparse,
    bool deterministic) {
  const cuda::DeviceGuard guard(input_.device());
  const NegativeSamplingBackward b = negative_sampling_backward_prologue(
      grad_loss_, input_, weight_, target_, negatives_, coef_, ignore_index);
  const Tensor &input = b.input, &target = b.target, &negatives = b.negatives;
  const Tensor &coef = b.coef, &grad_loss = b.grad_loss;
  const int64_t N = b.N, D = b.D, V = b.V, T = b.T, K = b.K, J = b.J;
  const ScalarType dtype = input.scalar_type(), acc_type = to_opmath(dtype);
  const Device device = input.device();
  const bool sorted = sparse || deterministic;
  const bool shared = negatives.dim() == 1;
  const bool fused = !sorted && !shared;
  Tensor grad_input = torch::stable::empty_like(input);
  Tensor grad_weight, ids = empty({0}, kLong, device);
  FS_DISPATCH_FLOATING(dtype, "negative_sampling_backward_cuda", [&] {
    using acc_t = opmath_t<scalar_t>;
    Tensor acc_buf;
    if (fused) acc_buf = zeros({V, D}, acc_type, device);
    NsParams<scalar_t, acc_t> p{N, D, T, K, b.neg_stride, ignore_index,
                                data<scalar_t>(input), data<scalar_t>(b.weight),
                                data<int64_t>(target), data<int64_t>(negatives),
                                nullptr, data<acc_t>(coef), data<acc_t>(grad_loss),
                                data<scalar_t>(grad_input),
                                fused ? data<acc_t>(acc_buf) : nullptr};
    if (N > 0) {
      FS_LAUNCH((ns_backward_kernel<scalar_t, acc_t>), blocks_for(N, kThreads / kWarp),
                kThreads, 0, p);
    }
    if (fused) {
      grad_weight = to(acc_buf, dtype);
      return;
    }
    PairGroups<scalar_t, acc_t> pairs;
    pairs.num = 2;
    using Pairs = PairGroup<scalar_t, acc_t>;
    pairs.g[0] =
        Pairs::of(N, T, p.target, T).weighted_by(p.coef, J).scaled_by(p.grad_loss).rows_of(
            p.input, D);
    Tensor keys, grad_shared;
    const Tensor target_ids = flat(target);
    if (shared) {
      const Tensor gc = mul(narrow(coef, 1, T, K), torch::stable::unsqueeze(grad_loss, 1));
      grad_shared = mm(transposed(to(gc, dtype)), input);  // [K, D]
      pairs.g[1] = Pairs::of(K, 1, p.negatives, 1).rows_of(data<scalar_t>(grad_shared), D);
      keys = call("aten::cat", "", std::vector<Tensor>{target_ids, negatives}, int64_t{0});
    } else {
      pairs.g[1] = Pairs::of(N, K, p.negatives, b.neg_stride)
                       .weighted_by(p.coef + T, J)
                       .scaled_by(p.grad_loss)
                       .rows_of(p.input, D);
      keys = call("aten::cat", "",
                  std::vector<Tensor>{target_ids, flat(negatives)},
                  int64_t{0});
    }
    if (sorted) {
      std::tie(grad_weight, ids) =
          scatter_pairs_sorted_cuda<scalar_t>(pairs, keys, V, D, sparse, dtype);
    } else {
      grad_weight = scatter_pairs_atomic_cuda<scalar_t>(pairs, V, D, dtype, device);
    }
  });
  return {grad_input, grad_weight, ids};
}

}  // namespace

FS_CUDA_IMPL(m) {
  m.impl("negative_sampling_forward", TORCH_BOX(&negative_sampling_forward_cuda));
  m.impl("negative_sampling_backward", TORCH_BOX(&negative_sampling_backward_cuda));
}

}  // namespace fastsoftmax
