// CUDA building blocks of the loss kernels: warp and block reductions, and the
// weight-gradient scatter of a list of pairs (see PairGroup in common/loss_math.h).
//
// Two scatters:
//  - atomic: one warp per pair, float atomics into an accumulation-dtype [V, D] buffer. Fast,
//    but the order of the additions into a row varies from run to run;
//  - sorted: pairs stably sorted by class id, then one block per touched class sums its pairs
//    in pair order. Bit-identical run to run; used under torch.use_deterministic_algorithms
//    and for sparse gradients (which need the touched ids anyway). No host synchronisation
//    for a dense gradient; one (the count of touched classes) for a sparse one.
#pragma once

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>

#include <tuple>
#include <vector>

#include "../common/loss_math.h"
#include "cuda_utils.cuh"

namespace fastsoftmax {
namespace loss {

using cuda::block_reduce;
using cuda::blocks_for;
using cuda::kThreads;
using cuda::kWarp;
using cuda::warp_max;
using cuda::warp_sum;

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
// Pairs sorted by class id (stably, so a class keeps its pairs in pair order). A block takes
// sorted positions q; the first position of each run of equal ids sums that run's pairs in
// order into the class's row: out row = the id (dense) or run_row[q] (sparse, compact).

template <class scalar_t, class acc_t>
__global__ void scatter_sorted_kernel(PairGroups<scalar_t, acc_t> groups, int64_t D, int64_t P,
                                      const int64_t* sorted_ids, const int64_t* order,
                                      const int64_t* run_row, scalar_t* out) {
  for (int64_t q = blockIdx.x; q < P; q += gridDim.x) {
    const int64_t id = sorted_ids[q];
    if (q > 0 && sorted_ids[q - 1] == id) continue;  // not the start of a run
    scalar_t* row = out + (run_row ? run_row[q] : id) * D;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      acc_t acc = 0;
      for (int64_t r = q; r < P && sorted_ids[r] == id; ++r) {
        int which;
        int64_t n, j;
        groups.locate(order[r], which, n, j);
        const auto& g = groups.g[which];
        acc += g.weight(n, j) * static_cast<acc_t>(g.src[n * g.src_row_stride + d]);
      }
      row[d] = static_cast<scalar_t>(acc);
    }
  }
}

// keys: the class id of every pair, [P], in pair order (group 0 then group 1, row-major).
// The dense gradient needs nothing on the host; the sparse one needs the number of touched
// classes to size its output, which costs one device-to-host copy.
template <class scalar_t>
std::tuple<at::Tensor, at::Tensor> scatter_pairs_sorted_cuda(
    const PairGroups<scalar_t, at::opmath_type<scalar_t>>& groups, const at::Tensor& keys,
    int64_t V, int64_t D, bool sparse, const at::TensorOptions& options) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t P = keys.numel();
  const at::Tensor no_ids = at::empty({0}, options.dtype(at::kLong));
  if (P == 0) return {sparse ? at::empty({0, D}, options) : at::zeros({V, D}, options), no_ids};
  at::Tensor sorted, order;
  std::tie(sorted, order) = at::sort(keys, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  at::Tensor out, ids = no_ids, run_row;
  if (sparse) {
    const at::Tensor starts = at::ones({P}, keys.options().dtype(at::kBool));
    starts.slice(0, 1).copy_(sorted.slice(0, 1) != sorted.slice(0, 0, P - 1));
    run_row = at::cumsum(starts, 0) - 1;
    ids = sorted.masked_select(starts);  // the one host synchronisation: U = ids.numel()
    out = at::empty({ids.numel(), D}, options);
  } else {
    out = at::zeros({V, D}, options);
  }
  const int threads = D >= 256 ? 256 : (D >= 128 ? 128 : 64);
  FS_LAUNCH((scatter_sorted_kernel<scalar_t, acc_t>), blocks_for(P, 1), threads, 0, groups, D,
            P, sorted.data_ptr<int64_t>(), order.data_ptr<int64_t>(),
            sparse ? run_row.data_ptr<int64_t>() : nullptr, out.data_ptr<scalar_t>());
  return {out, ids};
}

template <class scalar_t>
at::Tensor scatter_pairs_atomic_cuda(const PairGroups<scalar_t, at::opmath_type<scalar_t>>& groups,
                                     int64_t V, int64_t D, const at::TensorOptions& options) {
  using acc_t = at::opmath_type<scalar_t>;
  at::Tensor buf = at::zeros({V, D}, options.dtype(c10::CppTypeToScalarType<acc_t>::value));
  const int64_t P = groups.size();
  if (P > 0) {
    FS_LAUNCH((scatter_atomic_kernel<scalar_t, acc_t>), blocks_for(P, kThreads / kWarp),
              kThreads, 0, groups, D, buf.data_ptr<acc_t>());
  }
  return buf.to(options.dtype());
}

}  // namespace loss
}  // namespace fastsoftmax
