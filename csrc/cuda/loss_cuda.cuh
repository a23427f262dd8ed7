// CUDA building blocks of the loss kernels: warp and block reductions, and the
// weight-gradient scatter of a list of pairs (see PairGroup in common/loss_math.h).
//
// Two scatters:
//  - atomic: one warp per pair, float atomics into an accumulation-dtype [V, D] buffer. Fast,
//    but the order of the additions into a row varies from run to run;
//  - sorted: pairs stably sorted by class id, then one block per touched class sums its pairs
//    in pair order. Bit-identical run to run; used under torch.use_deterministic_algorithms
//    and for sparse gradients (which need the touched ids anyway).
#pragma once

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include <tuple>
#include <vector>

#include "../common/loss_math.h"

namespace fastsoftmax {
namespace loss {

constexpr int kWarp = 32;
constexpr int kThreads = 256;

inline int64_t blocks_for(int64_t work_items, int64_t per_block) {
  const int64_t b = (work_items + per_block - 1) / per_block;
  return b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b);
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    const T u = __shfl_xor_sync(0xffffffffu, v, o);
    v = u > v ? u : v;
  }
  return v;
}

// Sum or max over the block, returned to every thread, in a fixed order (deterministic).
// smem holds at least 32 values; blockDim.x is a multiple of 32.
template <bool Max, class T>
__device__ T block_reduce(T v, T identity, T* smem) {
  v = Max ? warp_max(v) : warp_sum(v);
  const int lane = threadIdx.x % kWarp, wid = threadIdx.x / kWarp;
  __syncthreads();  // smem may still be read by a previous call
  if (lane == 0) smem[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = threadIdx.x < blockDim.x / kWarp ? smem[lane] : identity;
    v = Max ? warp_max(v) : warp_sum(v);
    if (lane == 0) smem[0] = v;
  }
  __syncthreads();
  return smem[0];
}

// ---- atomic scatter: warp per pair ------------------------------------------------------

template <class scalar_t, class acc_t>
__global__ void scatter_atomic_kernel(PairGroups<scalar_t, acc_t> groups, int64_t D,
                                      acc_t* out) {
  const int lane = threadIdx.x % kWarp;
  const int64_t P = groups.size();
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  for (int64_t p = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; p < P;
       p += warps) {
    int which;
    int64_t n, j;
    groups.locate(p, which, n, j);
    const auto& g = groups.g[which];
    const acc_t c = g.weight(n, j);
    if (c == acc_t(0)) continue;
    const scalar_t* src = g.src + n * g.src_row_stride;
    acc_t* row = out + g.id(n, j) * D;
    for (int64_t d = lane; d < D; d += kWarp) atomicAdd(row + d, c * static_cast<acc_t>(src[d]));
  }
}

// ---- sorted scatter: block per touched class --------------------------------------------

template <class scalar_t, class acc_t>
__global__ void scatter_sorted_kernel(PairGroups<scalar_t, acc_t> groups, int64_t D,
                                      int64_t U, const int64_t* unique_ids,
                                      const int64_t* offsets, const int64_t* order, bool compact,
                                      scalar_t* out) {
  for (int64_t u = blockIdx.x; u < U; u += gridDim.x) {
    scalar_t* row = out + (compact ? u : unique_ids[u]) * D;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      acc_t acc = 0;
      for (int64_t q = offsets[u]; q < offsets[u + 1]; ++q) {
        int which;
        int64_t n, j;
        groups.locate(order[q], which, n, j);
        const auto& g = groups.g[which];
        acc += g.weight(n, j) * static_cast<acc_t>(g.src[n * g.src_row_stride + d]);
      }
      row[d] = static_cast<scalar_t>(acc);
    }
  }
}

// keys: the class id of every pair, [P], in pair order (group 0 then group 1, row-major).
template <class scalar_t>
std::tuple<at::Tensor, at::Tensor> scatter_pairs_sorted_cuda(
    const PairGroups<scalar_t, at::opmath_type<scalar_t>>& groups, const at::Tensor& keys,
    int64_t V, int64_t D, bool sparse, const at::TensorOptions& options) {
  using acc_t = at::opmath_type<scalar_t>;
  if (keys.numel() == 0) {
    return {sparse ? at::empty({0, D}, options) : at::zeros({V, D}, options),
            at::empty({0}, options.dtype(at::kLong))};
  }
  // Stable: pairs of one class keep their pair order, which fixes the summation order.
  at::Tensor sorted, order;
  std::tie(sorted, order) = at::sort(keys, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  at::Tensor unique_ids, inverse, counts;
  std::tie(unique_ids, inverse, counts) =
      at::unique_consecutive(sorted, /*return_inverse=*/false, /*return_counts=*/true);
  const int64_t U = unique_ids.numel();
  const at::Tensor offsets = at::cat({at::zeros({1}, counts.options()), counts.cumsum(0)});
  at::Tensor out = sparse ? at::empty({U, D}, options) : at::zeros({V, D}, options);
  const int threads = D >= 256 ? 256 : (D >= 128 ? 128 : 64);
  scatter_sorted_kernel<scalar_t, acc_t>
      <<<blocks_for(U, 1), threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
          groups, D, U, unique_ids.data_ptr<int64_t>(), offsets.data_ptr<int64_t>(),
          order.data_ptr<int64_t>(), sparse, out.data_ptr<scalar_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, sparse ? unique_ids : at::empty({0}, options.dtype(at::kLong))};
}

template <class scalar_t>
at::Tensor scatter_pairs_atomic_cuda(const PairGroups<scalar_t, at::opmath_type<scalar_t>>& groups,
                                     int64_t V, int64_t D, const at::TensorOptions& options) {
  using acc_t = at::opmath_type<scalar_t>;
  at::Tensor buf = at::zeros({V, D}, options.dtype(c10::CppTypeToScalarType<acc_t>::value));
  const int64_t P = groups.size();
  if (P > 0) {
    scatter_atomic_kernel<scalar_t, acc_t>
        <<<blocks_for(P, kThreads / kWarp), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
            groups, D, buf.data_ptr<acc_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return buf.to(options.dtype());
}

}  // namespace loss
}  // namespace fastsoftmax
