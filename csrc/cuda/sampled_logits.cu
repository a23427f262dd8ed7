// Sampled softmax and NCE on CUDA (TensorFlow's _compute_sampled_logits), the maths of
// csrc/cpu/sampled_logits.cpp:
//   L = H Ws^T [N, S] by aten::mm (cuBLAS), then a fused epilogue, one block per row: true
//   logits (T gather-dots), bias - log Q - log_z, accidental-hit masking, max / logsumexp or
//   sigmoid, the loss and dloss/dlogit G written over L. The backward is two more cuBLAS
//   products plus a per-row kernel for the true classes and the weight-gradient scatter.
#include <cfloat>
#include <vector>

#include "../common/loss_host.h"
#include "loss_cuda.cuh"
#include "runtime.cuh"

namespace fastsoftmax {
namespace {

using namespace loss;

template <class scalar_t, class acc_t>
struct EpilogueParams {
  int64_t N, D, T, S, ignore_index, mode;
  bool remove_hits;
  bool need_grad;           // false: G and the true-logit gradients are not written
  const scalar_t* input;    // [N, D]
  const scalar_t* weight;   // [V, D]
  const int64_t* target;    // [N, T]
  const int64_t* sampled;   // [S]
  const acc_t* col;         // [S]: bias - log Q - log_z of each candidate
  const acc_t* row_true;    // [N, T]: bias - log Q - log_z of each true class
  scalar_t* logits;         // [N, S]: in L, out G
  acc_t* loss;              // [N]
  acc_t* grad_true;         // [N, T] (the true logits while a row computes)
};

template <class acc_t>
__device__ __forceinline__ acc_t neg_inf() {
  return -static_cast<acc_t>(INFINITY);
}

template <class scalar_t, class acc_t>
__device__ __forceinline__ bool is_hit(const EpilogueParams<scalar_t, acc_t>& p, const int64_t* tn,
                                       int64_t j) {
  if (!p.remove_hits) return false;
  bool hit = false;
  for (int64_t t = 0; t < p.T; ++t) hit |= (p.sampled[j] == tn[t]);
  return hit;
}

// One block per row. The row's T true logits are kept in its grad_true row (global memory,
// so num_true has no limit), which the end of the row overwrites with their gradients.
template <class scalar_t, class acc_t>
__global__ void epilogue_kernel(EpilogueParams<scalar_t, acc_t> p) {
  __shared__ acc_t red[kWarp];
  const acc_t label = acc_t(1) / static_cast<acc_t>(p.T);
  for (int64_t n = blockIdx.x; n < p.N; n += gridDim.x) {
    const int64_t* tn = p.target + n * p.T;
    scalar_t* ln = p.logits + n * p.S;
    acc_t* gtn = p.grad_true + n * p.T;
    acc_t* xt = gtn;
    if (tn[0] == p.ignore_index) {
      for (int64_t j = threadIdx.x; p.need_grad && j < p.S; j += blockDim.x) ln[j] = scalar_t(0);
      for (int64_t t = threadIdx.x; t < p.T; t += blockDim.x) gtn[t] = acc_t(0);
      if (threadIdx.x == 0) p.loss[n] = acc_t(0);
      continue;
    }
    // True logits: gather-dot over D, block-reduced in a fixed order.
    const scalar_t* h = p.input + n * p.D;
    for (int64_t t = 0; t < p.T; ++t) {
      const scalar_t* w = p.weight + tn[t] * p.D;
      acc_t s = 0;
      for (int64_t d = threadIdx.x; d < p.D; d += blockDim.x)
        s += static_cast<acc_t>(h[d]) * static_cast<acc_t>(w[d]);
      s = block_reduce<false>(s, acc_t(0), red);
      if (threadIdx.x == 0) xt[t] = s + p.row_true[n * p.T + t];
    }
    __syncthreads();
    if (p.mode == kSoftmax) {
      acc_t m = neg_inf<acc_t>();
      for (int64_t t = threadIdx.x; t < p.T; t += blockDim.x) m = xt[t] > m ? xt[t] : m;
      for (int64_t j = threadIdx.x; j < p.S; j += blockDim.x) {
        if (is_hit(p, tn, j)) continue;
        const acc_t x = static_cast<acc_t>(ln[j]) + p.col[j];
        m = x > m ? x : m;
      }
      m = block_reduce<true>(m, neg_inf<acc_t>(), red);
      acc_t z = 0;
      for (int64_t t = threadIdx.x; t < p.T; t += blockDim.x) z += fs_exp(xt[t] - m);
      for (int64_t j = threadIdx.x; j < p.S; j += blockDim.x)
        if (!is_hit(p, tn, j)) z += fs_exp(static_cast<acc_t>(ln[j]) + p.col[j] - m);
      z = block_reduce<false>(z, acc_t(0), red);
      const acc_t lse = m + fs_log(z);
      for (int64_t j = threadIdx.x; p.need_grad && j < p.S; j += blockDim.x) {
        const acc_t x = static_cast<acc_t>(ln[j]) + p.col[j];
        ln[j] = static_cast<scalar_t>(is_hit(p, tn, j) ? acc_t(0) : fs_exp(x - lse));
      }
      if (threadIdx.x == 0) {
        acc_t mean_true = 0;
        for (int64_t t = 0; t < p.T; ++t) {
          mean_true += xt[t];
          gtn[t] = fs_exp(xt[t] - lse) - label;
        }
        p.loss[n] = lse - mean_true * label;
      }
    } else {
      // Sigmoid cross entropy: softplus(x) - y x, gradient sigmoid(x) - y.
      acc_t sum = 0;
      for (int64_t j = threadIdx.x; j < p.S; j += blockDim.x) {
        if (is_hit(p, tn, j)) {
          if (p.need_grad) ln[j] = scalar_t(0);
          continue;
        }
        const acc_t x = static_cast<acc_t>(ln[j]) + p.col[j];
        sum += softplus(x);
        if (p.need_grad) ln[j] = static_cast<scalar_t>(sigmoid(x));
      }
      sum = block_reduce<false>(sum, acc_t(0), red);
      if (threadIdx.x == 0) {
        for (int64_t t = 0; t < p.T; ++t) {
          sum += softplus(xt[t]) - label * xt[t];
          gtn[t] = sigmoid(xt[t]) - label;
        }
        p.loss[n] = sum;
      }
    }
    __syncthreads();  // xt is rewritten by the next row
  }
}

// grad_input[n] = g_n * (GWs[n] + sum_t gt[n, t] w_{t}), one warp per row, in place.
template <class scalar_t, class acc_t>
__global__ void true_rows_kernel(int64_t N, int64_t D, int64_t T, const scalar_t* weight,
                                 const int64_t* target, const acc_t* grad_true,
                                 const acc_t* grad_loss, scalar_t* grad_input) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; n < N;
       n += warps) {
    for (int64_t d = lane; d < D; d += kWarp) {
      acc_t acc = static_cast<acc_t>(grad_input[n * D + d]);
      for (int64_t t = 0; t < T; ++t)
        acc += grad_true[n * T + t] * static_cast<acc_t>(weight[target[n * T + t] * D + d]);
      grad_input[n * D + d] = static_cast<scalar_t>(acc * grad_loss[n]);
    }
  }
}

std::tuple<Tensor, Tensor, Tensor> sampled_logits_forward_cuda(
    const Tensor& input_, const Tensor& weight_, const std::optional<Tensor>& bias,
    const Tensor& target_, const Tensor& sampled_, const Tensor& true_expected,
    const Tensor& sampled_expected, const Tensor& log_z, int64_t mode,
    bool remove_accidental_hits, int64_t ignore_index, bool /*sparse: read by the backward*/,
    bool need_grad) {
  const cuda::DeviceGuard guard(input_.device());
  SampledForward f = sampled_forward_prologue(input_, weight_, bias, target_, sampled_,
                                               true_expected, sampled_expected, log_z, mode,
                                               ignore_index);
  if (f.N == 0) return without_grad_unless(need_grad, f);
  FS_DISPATCH_FLOATING(f.input.scalar_type(), "sampled_logits_forward_cuda", [&] {
    using acc_t = opmath_t<scalar_t>;
    const EpilogueParams<scalar_t, acc_t> p{
        f.N, f.D, f.T, f.S, ignore_index, mode, remove_accidental_hits, need_grad,
        data<scalar_t>(f.input), data<scalar_t>(f.weight),
        data<int64_t>(f.target), data<int64_t>(f.sampled), data<acc_t>(f.col),
        data<acc_t>(f.row_true), data<scalar_t>(f.logits),
        data<acc_t>(f.loss), data<acc_t>(f.grad_true)};
    FS_LAUNCH((epilogue_kernel<scalar_t, acc_t>), blocks_for(f.N, 1), kThreads, 0, p);
  });
  return without_grad_unless(need_grad, f);
}

// deterministic: torch.are_deterministic_algorithms_enabled(), passed by fastsoftmax/ops/losses.py.
std::tuple<Tensor, Tensor, Tensor, Tensor> sampled_logits_backward_cuda(
    const Tensor& grad_loss_, const Tensor& input_, const Tensor& weight_, const Tensor& target_,
    const Tensor& sampled_, const Tensor& grad_logits_, const Tensor& grad_true_, bool has_bias,
    int64_t ignore_index, bool sparse, bool deterministic) {
  const cuda::DeviceGuard guard(input_.device());
  SampledBackward b = sampled_backward_prologue(grad_loss_, input_, weight_, target_, sampled_,
                                                grad_logits_, grad_true_, ignore_index);
  const bool sorted = sparse || deterministic;
  const ScalarType dtype = b.input.scalar_type();
  const Device device = b.input.device();
  Tensor grad_weight, ids = empty({0}, kLong, device);
  FS_DISPATCH_FLOATING(dtype, "sampled_logits_backward_cuda", [&] {
    using acc_t = opmath_t<scalar_t>;
    if (b.N > 0) {
      FS_LAUNCH((true_rows_kernel<scalar_t, acc_t>), blocks_for(b.N, kThreads / kWarp),
                kThreads, 0, b.N, b.D, b.T, data<scalar_t>(b.weight),
                data<int64_t>(b.target), data<acc_t>(b.grad_true),
                data<acc_t>(b.grad_loss), data<scalar_t>(b.grad_input));
    }
    const auto pairs = sampled_weight_pairs<scalar_t, acc_t>(b);
    if (sorted) {
      const Tensor keys = call(
          "aten::cat", "",
          std::vector<Tensor>{b.sampled, flat(b.target)}, int64_t{0});
      std::tie(grad_weight, ids) =
          scatter_pairs_sorted_cuda<scalar_t>(pairs, keys, b.V, b.D, sparse, dtype);
    } else {
      grad_weight = scatter_pairs_atomic_cuda<scalar_t>(pairs, b.V, b.D, dtype, device);
    }
  });
  return {b.grad_input, grad_weight, sampled_bias_grad(b, has_bias), ids};
}

}  // namespace

FS_CUDA_IMPL(m) {
  m.impl("sampled_logits_forward", TORCH_BOX(&sampled_logits_forward_cuda));
  m.impl("sampled_logits_backward", TORCH_BOX(&sampled_logits_backward_cuda));
}

}  // namespace fastsoftmax
