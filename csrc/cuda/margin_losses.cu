// Margin (hinge) losses on CUDA, the maths of csrc/cpu/margin_losses.cpp (see
// csrc/common/margin_math.h): one block per row of the scores block, the row's hinge terms
// summed by a fixed-order block reduction (deterministic), and WARP's first violator found
// as a block minimum over column indices. The scores are cuBLAS products made by torch.
#include "../common/margin_host.h"
#include "loss_cuda.cuh"
#include "runtime.cuh"

namespace fastsoftmax {
namespace {

using namespace margin;
using loss::block_reduce;
using loss::blocks_for;
using loss::kThreads;
using loss::kWarp;

template <class scalar_t, class acc_t>
struct MarginParams {
  int64_t N, C, cand_stride, p, mode, num_classes, ignore_index;
  double margin;
  const scalar_t* scores;        // [N, C]
  const scalar_t* target_score;  // [N]
  const int64_t* target;         // [N]
  const int64_t* candidates;     // [C] or [N, C]
  const acc_t* grad_loss;        // [N] (backward only)
  acc_t* loss;                   // [N] (forward only)
  scalar_t* grad_scores;         // [N, C] (backward only)
  scalar_t* grad_target;         // [N] (backward only)
};

// Row n's WARP violator, on every thread of the block: its column (C when none) and the
// trials it took (candidates equal to the target are no trials).
template <class scalar_t, class acc_t>
__device__ void first_violator(const MarginParams<scalar_t, acc_t>& p, int64_t n, acc_t base,
                               int64_t* red, int64_t& first, int64_t& trials) {
  const scalar_t* s = p.scores + n * p.C;
  const int64_t* cand = p.candidates + n * p.cand_stride;
  const int64_t y = p.target[n];
  int64_t mine = p.C;
  for (int64_t j = threadIdx.x; j < p.C; j += blockDim.x) {
    if (cand[j] != y && base + static_cast<acc_t>(s[j]) > acc_t(0)) {
      mine = j;  // a thread's columns rise: its first hit is its smallest
      break;
    }
  }
  first = -block_reduce<true>(-mine, -p.C, red);  // the smallest column over the block
  int64_t count = 0;
  for (int64_t j = threadIdx.x; j <= first && j < p.C; j += blockDim.x) count += cand[j] != y;
  trials = block_reduce<false>(count, int64_t{0}, red);
}

template <class scalar_t, class acc_t>
__global__ void margin_forward_kernel(MarginParams<scalar_t, acc_t> p) {
  __shared__ acc_t red[kWarp];
  __shared__ int64_t red_i[kWarp];
  for (int64_t n = blockIdx.x; n < p.N; n += gridDim.x) {
    const int64_t y = p.target[n];
    if (y == p.ignore_index) {  // the whole block takes this branch
      if (threadIdx.x == 0) p.loss[n] = acc_t(0);
      continue;
    }
    const acc_t base = static_cast<acc_t>(p.margin) - static_cast<acc_t>(p.target_score[n]);
    const scalar_t* s = p.scores + n * p.C;
    if (p.mode == kModeWarp) {
      int64_t first, trials;
      first_violator(p, n, base, red_i, first, trials);
      if (threadIdx.x == 0)
        p.loss[n] = first >= p.C ? acc_t(0)
                                 : static_cast<acc_t>(warp_weight(p.num_classes, trials)) *
                                       (base + static_cast<acc_t>(s[first]));
      continue;
    }
    const int64_t* cand = p.candidates + n * p.cand_stride;
    acc_t sum = 0;
    for (int64_t j = threadIdx.x; j < p.C; j += blockDim.x)
      if (cand[j] != y) sum += hinge_term(base + static_cast<acc_t>(s[j]), p.p);
    sum = block_reduce<false>(sum, acc_t(0), red);
    if (threadIdx.x == 0) p.loss[n] = sum;
  }
}

template <class scalar_t, class acc_t>
__global__ void margin_backward_kernel(MarginParams<scalar_t, acc_t> p) {
  __shared__ acc_t red[kWarp];
  __shared__ int64_t red_i[kWarp];
  for (int64_t n = blockIdx.x; n < p.N; n += gridDim.x) {
    scalar_t* gs = p.grad_scores + n * p.C;
    const int64_t y = p.target[n];
    const acc_t base = static_cast<acc_t>(p.margin) - static_cast<acc_t>(p.target_score[n]);
    const scalar_t* s = p.scores + n * p.C;
    const int64_t* cand = p.candidates + n * p.cand_stride;
    if (y == p.ignore_index) {
      for (int64_t j = threadIdx.x; j < p.C; j += blockDim.x) gs[j] = scalar_t(0);
      if (threadIdx.x == 0) p.grad_target[n] = scalar_t(0);
      continue;
    }
    if (p.mode == kModeWarp) {
      int64_t first, trials;
      first_violator(p, n, base, red_i, first, trials);
      const acc_t c = first >= p.C ? acc_t(0)
                                   : p.grad_loss[n] * static_cast<acc_t>(
                                                          warp_weight(p.num_classes, trials));
      for (int64_t j = threadIdx.x; j < p.C; j += blockDim.x)
        gs[j] = static_cast<scalar_t>(j == first ? c : acc_t(0));
      if (threadIdx.x == 0) p.grad_target[n] = static_cast<scalar_t>(-c);
      continue;
    }
    acc_t total = 0;
    for (int64_t j = threadIdx.x; j < p.C; j += blockDim.x) {
      const acc_t c = cand[j] == y ? acc_t(0)
                                   : p.grad_loss[n] *
                                         hinge_slope(base + static_cast<acc_t>(s[j]), p.p);
      gs[j] = static_cast<scalar_t>(c);
      total += c;
    }
    total = block_reduce<false>(total, acc_t(0), red);
    if (threadIdx.x == 0) p.grad_target[n] = static_cast<scalar_t>(-total);
  }
}

template <class scalar_t, class acc_t>
MarginParams<scalar_t, acc_t> params_of(const MarginArgs& a, double margin, int64_t p,
                                        int64_t mode, int64_t num_classes,
                                        int64_t ignore_index) {
  MarginParams<scalar_t, acc_t> q{};
  q.N = a.N, q.C = a.C, q.cand_stride = a.cand_stride, q.p = p, q.mode = mode;
  q.num_classes = num_classes, q.ignore_index = ignore_index, q.margin = margin;
  q.scores = data<scalar_t>(a.scores), q.target_score = data<scalar_t>(a.target_score);
  q.target = data<int64_t>(a.target), q.candidates = data<int64_t>(a.candidates);
  return q;
}

Tensor margin_rank_forward_cuda(const Tensor& scores_, const Tensor& target_score_,
                                const Tensor& target_, const Tensor& candidates_, double margin,
                                int64_t p, int64_t mode, int64_t num_classes,
                                int64_t ignore_index) {
  const cuda::DeviceGuard guard(scores_.device());
  const MarginArgs a = margin_prologue(scores_, target_score_, target_, candidates_, margin, p,
                                       mode, num_classes, ignore_index);
  Tensor loss = empty({a.N}, to_opmath(a.scores.scalar_type()), a.scores.device());
  if (a.N == 0) return loss;
  FS_DISPATCH_FLOATING(a.scores.scalar_type(), "margin_rank_forward_cuda", [&] {
    using acc_t = opmath_t<scalar_t>;
    auto q = params_of<scalar_t, acc_t>(a, margin, p, mode, num_classes, ignore_index);
    q.loss = data<acc_t>(loss);
    FS_LAUNCH((margin_forward_kernel<scalar_t, acc_t>), blocks_for(a.N, 1), kThreads, 0, q);
  });
  return loss;
}

std::tuple<Tensor, Tensor> margin_rank_backward_cuda(
    const Tensor& grad_loss_, const Tensor& scores_, const Tensor& target_score_,
    const Tensor& target_, const Tensor& candidates_, double margin, int64_t p, int64_t mode,
    int64_t num_classes, int64_t ignore_index) {
  const cuda::DeviceGuard guard(scores_.device());
  const MarginArgs a = margin_prologue(scores_, target_score_, target_, candidates_, margin, p,
                                       mode, num_classes, ignore_index);
  const Tensor grad_loss = margin_grad_loss(grad_loss_, a);
  const ScalarType dtype = a.scores.scalar_type();
  Tensor grad_scores = empty({a.N, a.C}, dtype, a.scores.device());
  Tensor grad_target = empty({a.N}, dtype, a.scores.device());
  if (a.N == 0) return {grad_scores, grad_target};
  FS_DISPATCH_FLOATING(dtype, "margin_rank_backward_cuda", [&] {
    using acc_t = opmath_t<scalar_t>;
    auto q = params_of<scalar_t, acc_t>(a, margin, p, mode, num_classes, ignore_index);
    q.grad_loss = data<acc_t>(grad_loss);
    q.grad_scores = data<scalar_t>(grad_scores), q.grad_target = data<scalar_t>(grad_target);
    FS_LAUNCH((margin_backward_kernel<scalar_t, acc_t>), blocks_for(a.N, 1), kThreads, 0, q);
  });
  return {grad_scores, grad_target};
}

}  // namespace

FS_CUDA_IMPL(m) {
  m.impl("margin_rank_forward", TORCH_BOX(&margin_rank_forward_cuda));
  m.impl("margin_rank_backward", TORCH_BOX(&margin_rank_backward_cuda));
}

}  // namespace fastsoftmax
