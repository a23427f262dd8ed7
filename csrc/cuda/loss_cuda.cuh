// CUDA building blocks of the loss kernels: warp and block reductions, and the
// weight-gradient scatter of a list of pairs (see PairGroup in common/loss_math.h).
//
// Two scatters:
//  - atomic: one warp per pair, float atomics into an accumulation-dtype [V, D] buffer. Fast,
//    but the order of the additions into a row varies from run to run;
//  - sorted: pairs stably sorted by class id, summed in fixed-size chunks of sorted positions
//    and then per class in chunk order (a segmented reduction: frequent classes are summed
//    in parallel). Bit-identical run to run; used under torch.use_deterministic_algorithms
//    and for sparse gradients (which need the touched ids anyway). No host synchronisation,
//    dense or sparse: a sparse gradient has one row per pair (a static shape), see
//    scatter_pairs_sorted_cuda.
#pragma once

#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "../common/loss_host.h"
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

// ---- sorted scatter: fixed-size chunks, then a fixed-order combine ----------------------
// Pairs are sorted by class id (stably: a class keeps its pairs in pair order), and the
// sorted positions are cut into chunks of kChunk. A block sums each piece of its chunk (the
// part of one class's run inside the chunk) in position order, so a frequent class is summed
// by many blocks at once. A run inside one chunk goes straight to its row; a run that crosses
// chunks leaves one partial per chunk, in slot 2j (the piece continuing a run from chunk j-1)
// or 2j + 1 (the piece starting a run that goes on into chunk j+1), and the block of the
// chunk where the run starts adds those partials in chunk order. Every sum has one fixed
// order, so the result is bit-identical run to run.

constexpr int64_t kChunk = 64;

struct SortedPairs {
  int64_t P, D;
  const int64_t* ids;    // [P] sorted class ids
  const int64_t* order;  // [P] pair index of each sorted position
  // Sparse: the output has a row per sorted position, and a run's sum goes to the row of its
  // first position (both kernels write a row only at a run's start). Dense: row = class id.
  bool row_per_position;
  int64_t limit;  // runs of ids >= limit are not summed (their rows keep their zeros)
};

__device__ __forceinline__ int64_t out_row(const SortedPairs& s, int64_t q) {
  return s.row_per_position ? q : s.ids[q];
}

template <class scalar_t, class acc_t>
__global__ void scatter_chunks_kernel(PairGroups<scalar_t, acc_t> groups, SortedPairs s,
                                      acc_t* partial, scalar_t* out) {
  const int64_t chunks = (s.P + kChunk - 1) / kChunk;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int64_t begin = c * kChunk, end = min(s.P, begin + kChunk);
    for (int64_t q = begin; q < end;) {
      const int64_t id = s.ids[q];
      int64_t r = q + 1;
      while (r < end && s.ids[r] == id) ++r;
      if (id >= s.limit) {  // its combine skips it too: no partial is read
        q = r;
        continue;
      }
      const bool continues_run = q == begin && q > 0 && s.ids[q - 1] == id;
      const bool run_goes_on = r == end && end < s.P && s.ids[end] == id;
      acc_t* slot = continues_run ? partial + (2 * c) * s.D
                    : run_goes_on ? partial + (2 * c + 1) * s.D
                                  : nullptr;
      scalar_t* row = out + out_row(s, q) * s.D;
      for (int64_t d = threadIdx.x; d < s.D; d += blockDim.x) {
        acc_t acc = 0;
        for (int64_t k = q; k < r; ++k) {
          int which;
          int64_t n, j;
          groups.locate(s.order[k], which, n, j);
          const auto& g = groups.g[which];
          acc += g.weight(n, j) * static_cast<acc_t>(g.src[n * g.src_row_stride + d]);
        }
        if (slot) slot[d] = acc; else row[d] = static_cast<scalar_t>(acc);
      }
      q = r;
    }
  }
}

template <class scalar_t, class acc_t>
__global__ void combine_chunks_kernel(SortedPairs s, const acc_t* partial, scalar_t* out) {
  const int64_t chunks = (s.P + kChunk - 1) / kChunk;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int64_t end = min(s.P, (c + 1) * kChunk);
    if (end == s.P || s.ids[end] != s.ids[end - 1]) continue;  // no run goes on from here
    // The run of the chunk's last position goes on: this block owns it if it starts here.
    int64_t q = end - 1;
    const int64_t id = s.ids[q];
    if (id >= s.limit) continue;
    if (c > 0 && s.ids[c * kChunk - 1] == id && s.ids[c * kChunk] == id) continue;
    while (q > c * kChunk && s.ids[q - 1] == id) --q;
    scalar_t* row = out + out_row(s, q) * s.D;
    for (int64_t d = threadIdx.x; d < s.D; d += blockDim.x) {
      acc_t acc = partial[(2 * c + 1) * s.D + d];
      for (int64_t k = c + 1; k < chunks && s.ids[k * kChunk] == id; ++k)
        acc += partial[(2 * k) * s.D + d];
      row[d] = static_cast<scalar_t>(acc);
    }
  }
}

// keys: the class id of every pair, [P], in pair order (group 0 then group 1, row-major).
// dtype: scalar_t's. Nothing is read back to the host, dense or sparse.
// Dense: [V, D]. Sparse: (values [P, D], ids [P]), an uncoalesced row-sparse gradient as
// nn.Embedding(sparse=True) makes, of a size known without the data (sizing it by the
// touched classes would read their number back): ids are the sorted keys, duplicates kept;
// each run's sum sits in the row of its first position, its other rows are zero, so the
// coalesced gradient has the values of the CPU's. Pairs of ids >= V are left out (rows zero).
template <class scalar_t>
std::tuple<Tensor, Tensor> scatter_pairs_sorted_cuda(
    const PairGroups<scalar_t, opmath_t<scalar_t>>& groups, const Tensor& keys, int64_t V,
    int64_t D, bool sparse, ScalarType dtype) {
  using acc_t = opmath_t<scalar_t>;
  const Device device = keys.device();
  const int64_t P = keys.numel();
  const Tensor no_ids = empty({0}, kLong, device);
  if (P == 0)
    return {sparse ? empty({0, D}, dtype, device) : zeros({V, D}, dtype, device), no_ids};
  const auto sort = call_n<2>("aten::sort", "stable", keys, std::optional<bool>(true),
                              int64_t{0}, false);
  const Tensor &sorted = sort[0], &order = sort[1];
  const Tensor out = zeros({sparse ? P : V, D}, dtype, device);
  const Tensor ids = sparse ? sorted : no_ids;
  const int64_t chunks = (P + kChunk - 1) / kChunk;
  const Tensor partial = empty({2 * chunks, D}, to_opmath(dtype), device);
  const SortedPairs s{P, D, data<int64_t>(sorted), data<int64_t>(order), sparse,
                      sparse ? V : std::numeric_limits<int64_t>::max()};
  const int threads = D >= 256 ? 256 : (D >= 128 ? 128 : 64);
  FS_LAUNCH((scatter_chunks_kernel<scalar_t, acc_t>), blocks_for(chunks, 1), threads, 0, groups,
            s, data<acc_t>(partial), data<scalar_t>(out));
  FS_LAUNCH((combine_chunks_kernel<scalar_t, acc_t>), blocks_for(chunks, 1), threads, 0, s,
            data<acc_t>(partial), data<scalar_t>(out));
  return {out, ids};
}

template <class scalar_t>
Tensor scatter_pairs_atomic_cuda(const PairGroups<scalar_t, opmath_t<scalar_t>>& groups,
                                 int64_t V, int64_t D, ScalarType dtype, Device device) {
  using acc_t = opmath_t<scalar_t>;
  Tensor buf = zeros({V, D}, to_opmath(dtype), device);
  const int64_t P = groups.size();
  if (P > 0) {
    FS_LAUNCH((scatter_atomic_kernel<scalar_t, acc_t>), blocks_for(P, kThreads / kWarp),
              kThreads, 0, groups, D, data<acc_t>(buf));
  }
  return to(buf, dtype);
}

}  // namespace loss
}  // namespace fastsoftmax
