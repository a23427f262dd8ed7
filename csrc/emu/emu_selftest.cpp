// Kernels that exercise the emulator itself (tests/test_cuda_emulator.py): each honours or
// breaks one rule of CUDA's execution model on purpose. Only in the emulated build.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>

#include "../cuda/cuda_utils.cuh"

namespace fastsoftmax {
namespace {

// Inclusive Hillis-Steele scan of one block through shared memory; without the barrier a
// thread reads its neighbour's slot before (or after) the neighbour rewrote it.
__global__ void scan_kernel(const int* x, int* out, bool barrier) {
  __shared__ int buf[2][1024];
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  int cur = 0;
  buf[0][t] = x[t];
  __syncthreads();
  for (int offset = 1; offset < n; offset <<= 1) {
    int v = buf[cur][t];
    // Without the barrier v may be another launch's leftover: add as the hardware does,
    // wrapping (a signed overflow would be undefined behaviour in the host build).
    if (t >= offset) v = static_cast<int>(static_cast<unsigned>(v) + buf[cur][t - offset]);
    buf[cur ^ 1][t] = v;
    if (barrier) __syncthreads();
    cur ^= 1;
  }
  out[t] = buf[cur][t];
}

// The product's warp and block helpers (cuda_utils.cuh) on every thread's id.
__global__ void helpers_kernel(int* out) {
  __shared__ int warp_sums[32];
  const int t = static_cast<int>(threadIdx.x);
  int total = 0;
  const int before = cuda::block_exclusive_scan(t, &total, warp_sums);
  const int lane_sum = cuda::warp_sum(t);
  out[3 * t] = before;
  out[3 * t + 1] = total;
  out[3 * t + 2] = lane_sum;
}

// One shuffle per lane: kind 0 __shfl_xor_sync(mask, lane, 1), 1 __shfl_sync(mask, lane,
// src), 2 __shfl_up_sync(mask, lane, 1), 3 __ballot_sync(mask, lane odd), 4 lane 3 exits
// first, 5 half a warp waits at __syncthreads while the other half shuffles.
__global__ void shuffle_kernel(int* out, unsigned mask, int kind, int src) {
  const int t = static_cast<int>(threadIdx.x), lane = t & 31;
  int v = -1;
  if (kind == 0) v = __shfl_xor_sync(mask, lane, 1);
  if (kind == 1) v = __shfl_sync(mask, lane, src);
  if (kind == 2) v = __shfl_up_sync(mask, lane, 1);
  if (kind == 3) v = static_cast<int>(__ballot_sync(mask, lane & 1));
  if (kind == 4) {
    if (lane == 3) return;
    v = __shfl_sync(mask, lane, 0);
  }
  if (kind == 5) {
    if (lane < 16) {
      __syncthreads();
    } else {
      v = __shfl_sync(0xffffffffu, lane, 0);
    }
  }
  out[t] = v;
}

// Atomics from every thread of every block; static shared memory is one copy per block;
// dynamic shared memory reads 0xCD before it is written.
__global__ void memory_kernel(int* counter, int* per_block, int* dynamic_first) {
  __shared__ int block_id;
  FS_DYNAMIC_SHARED(int, scratch);
  if (threadIdx.x == 0) {
    // Never written: the poison pattern. One block reports it (several would race).
    if (blockIdx.x == 0) *dynamic_first = scratch[0];
    block_id = static_cast<int>(blockIdx.x);
  }
  __syncthreads();
  atomicAdd(counter, 1);
  atomicMax(per_block + blockIdx.x, block_id == static_cast<int>(blockIdx.x) ? 1 : -1);
}

at::Tensor selftest(c10::string_view which, const at::Tensor& x, int64_t threads, int64_t mask,
                    int64_t kind, int64_t src) {
  const std::string name(which);
  const auto ints = at::TensorOptions().dtype(at::kInt);
  if (name == "scan" || name == "scan_without_barrier") {
    TORCH_CHECK(x.scalar_type() == at::kInt && x.is_contiguous(), "x must be contiguous int32");
    at::Tensor out = at::empty_like(x);
    FS_LAUNCH(scan_kernel, 1, static_cast<unsigned>(x.numel()), 0, x.data_ptr<int>(),
              out.data_ptr<int>(), name == "scan");
    return out;
  }
  if (name == "helpers") {
    at::Tensor out = at::empty({threads, 3}, ints);
    FS_LAUNCH(helpers_kernel, 1, static_cast<unsigned>(threads), 0, out.data_ptr<int>());
    return out;
  }
  if (name == "shuffle") {
    at::Tensor out = at::full({threads}, -2, ints);
    FS_LAUNCH(shuffle_kernel, 1, static_cast<unsigned>(threads), 0, out.data_ptr<int>(),
              static_cast<unsigned>(mask), static_cast<int>(kind), static_cast<int>(src));
    return out;
  }
  TORCH_CHECK(name == "memory", "unknown self-test ", name);
  at::Tensor out = at::zeros({2 + kind}, ints);  // counter, dynamic_first, per-block flags
  int* o = out.data_ptr<int>();
  FS_LAUNCH(memory_kernel, static_cast<unsigned>(kind), static_cast<unsigned>(threads),
            sizeof(int) * 64, o, o + 2, o + 1);
  return out;
}

}  // namespace
}  // namespace fastsoftmax

TORCH_LIBRARY_FRAGMENT(fastsoftmax_emu, m) {
  m.def("selftest(str which, Tensor x, int threads, int mask, int kind, int src) -> Tensor",
        &fastsoftmax::selftest);
}
