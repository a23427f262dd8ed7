// Warp and block helpers shared by every CUDA kernel file, and the grid-sizing rule.
#pragma once

#include "runtime.cuh"

namespace fastsoftmax {
namespace cuda {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

// Blocks for `work_items` at `per_block` items a block: at least 1, at most 2^20 (kernels
// stride over the rest).
inline int64_t blocks_for(int64_t work_items, int64_t per_block) {
  const int64_t b = (work_items + per_block - 1) / per_block;
  return b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b);
}

// Butterfly sum / max over the 32 lanes, returned to every lane. The order of the additions
// is fixed, so the result is deterministic.
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    const T u = __shfl_xor_sync(kFullMask, v, o);
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

// Exclusive prefix sum of `value` over the block in thread order; *total receives the sum.
// warp_sums holds 32 ints; blockDim.x is a multiple of 32.
__device__ __forceinline__ int block_exclusive_scan(int value, int* total, int* warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int inclusive = value;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int other = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const int num_warps = blockDim.x >> 5;
    int w = lane < num_warps ? warp_sums[lane] : 0;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int other = __shfl_up_sync(kFullMask, w, offset);
      if (lane >= offset) w += other;
    }
    if (lane < num_warps) warp_sums[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  *total = warp_sums[(blockDim.x >> 5) - 1];
  const int before = warp == 0 ? 0 : warp_sums[warp - 1];
  return before + inclusive - value;
}

}  // namespace cuda
}  // namespace fastsoftmax
