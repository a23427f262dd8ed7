// Kernels that check the emulator's stricter rules (tests/test_cuda_emulator_rules.py): races
// on global memory, the hand-off between blocks, interleaved blocks, static shared memory per
// block, and the launch limits and occupancy queries. Only in the emulated build.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>

#include "../cuda/cuda_utils.cuh"

namespace fastsoftmax {
namespace {

// kind 0: every thread writes data[0] (warps race); 1: each thread writes data[t], then reads
// the slot of the next warp's thread (races with its write); 2: as 1 with a barrier between;
// 3: block b writes data[b] and reads data[b + 1] (blocks race); 4: atomics on data[0] and
// reads of data[1] only (no race); 5: every block writes the same data[0] (blocks race);
// 6: every warp reads data[0], then warp 1 writes it (races with the other warps' reads);
// 7: as 6 with a barrier between.
__global__ void race_kernel(int* data, int kind) {
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  const int b = static_cast<int>(blockIdx.x), blocks = static_cast<int>(gridDim.x);
  if (kind == 0) data[0] = t;
  if (kind == 1 || kind == 2) {
    data[t] = t;
    if (kind == 2) __syncthreads();
    data[n + t] = data[(t + 32) % n];
  }
  if (kind == 3 && t == 0) {
    data[b] = b;
    data[blocks + b] = data[(b + 1) % blocks];
  }
  if (kind == 4) {
    atomicAdd(data, 1);
    if (data[1] != 0) atomicAdd(data + 2, 1);
  }
  if (kind == 5 && t == 0) data[0] = 7;
  if (kind == 6 || kind == 7) {
    data[1 + t] = data[0];
    if (kind == 7) __syncthreads();
    if (t == 32) data[0] = 5;
  }
}

// The last-block hand-off of unique sampling's count kernel (threadFenceReduction's pattern):
// each block publishes partial[b], counts its arrival, and the last to arrive sums them.
// variant 1 drops the writer's fence, variant 2 the reader's.
__global__ void handoff_kernel(int* partial, unsigned* arrived, int* out, int variant) {
  __shared__ bool last;
  const unsigned b = blockIdx.x;
  if (threadIdx.x == 0) {
    partial[b] = static_cast<int>(b) + 1;
    if (variant != 1) __threadfence();
    last = atomicAdd(arrived, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  if (variant != 2) __threadfence();
  if (threadIdx.x == 0) {
    int sum = 0;
    for (unsigned k = 0; k < gridDim.x; ++k) sum += partial[k];
    *out = sum;
  }
}

// Thread 0 of each block takes a ticket before and after a barrier: blocks run one after
// another iff every block's two tickets are consecutive.
__global__ void ticket_kernel(unsigned* counter, int* tickets) {
  const unsigned b = blockIdx.x;
  if (threadIdx.x == 0) tickets[2 * b] = static_cast<int>(atomicAdd(counter, 1u));
  __syncthreads();
  if (threadIdx.x == 0) tickets[2 * b + 1] = static_cast<int>(atomicAdd(counter, 1u));
}

// Each block fills its static shared array, passes a barrier (where other blocks run) and
// reads a neighbour's slot; thread 0 first reads a variable not yet written.
__global__ void static_shared_kernel(int* out) {
  __shared__ int slots[1024];
  __shared__ int never_written;
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  const int b = static_cast<int>(blockIdx.x);
  int* mine = out + b * (n + 1);
  if (t == 0) mine[0] = never_written;
  slots[t] = b * 1000 + t;
  __syncthreads();
  mine[1 + t] = slots[(t + 1) % n];
  // Written after it was read: a variable never written at all the compiler reads as 0.
  if (t == 0) never_written = b;
}

// One thread of the grid writes: a launch of any shape without races.
__global__ void grid_kernel(int* out) {
  if (blockIdx.x + blockIdx.y + blockIdx.z + threadIdx.x == 0) out[0] = 1;
}

__global__ void smem_kernel(int* out) {
  FS_DYNAMIC_SHARED(int, buf);
  buf[threadIdx.x] = static_cast<int>(threadIdx.x);
  out[threadIdx.x] = buf[threadIdx.x];
}
// The same, for the opt-in (an attribute of the function that stays set).
__global__ void smem_optin_kernel(int* out) {
  FS_DYNAMIC_SHARED(int, buf);
  buf[threadIdx.x] = static_cast<int>(threadIdx.x);
  out[threadIdx.x] = buf[threadIdx.x];
}

const auto kInts = at::TensorOptions().dtype(at::kInt);

at::Tensor launch_rule(int64_t variant, int64_t threads, int64_t bytes) {
  at::Tensor out = at::zeros({threads}, kInts);
  int* o = out.data_ptr<int>();
  const unsigned n = static_cast<unsigned>(threads);
  if (variant == 0) FS_LAUNCH(grid_kernel, dim3(1, static_cast<unsigned>(bytes)), n, 0, o);
  if (variant == 1) FS_LAUNCH(grid_kernel, dim3(static_cast<unsigned>(bytes)), n, 0, o);
  if (variant == 2) FS_LAUNCH(smem_kernel, 1, n, static_cast<size_t>(bytes), o);
  if (variant == 3) {
    TORCH_CHECK(cudaFuncSetAttribute(smem_optin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(bytes)) == cudaSuccess,
                "cudaFuncSetAttribute refused ", bytes, " bytes");
    FS_LAUNCH(smem_optin_kernel, 1, n, static_cast<size_t>(bytes), o);
  }
  return out;
}

// which: race, handoff, tickets, static_shared (threads, blocks, variant as above); launch
// (variant 0: grid y = blocks, 1: grid x = blocks, 2: `blocks` bytes of dynamic shared memory
// without the opt-in, 3: with it); occupancy (threads, blocks = dynamic bytes, variant 1: of
// the opted-in kernel) -> [blocks per SM, status].
at::Tensor rules(c10::string_view which, int64_t threads, int64_t blocks, int64_t variant) {
  const std::string name(which);
  const unsigned n = static_cast<unsigned>(threads), g = static_cast<unsigned>(blocks);
  if (name == "race") {
    at::Tensor data = at::zeros({2 * threads * blocks + 4}, kInts);
    FS_LAUNCH(race_kernel, g, n, 0, data.data_ptr<int>(), static_cast<int>(variant));
    return data;
  }
  if (name == "handoff") {
    at::Tensor data = at::zeros({blocks + 2}, kInts);  // partial..., arrived, out
    int* d = data.data_ptr<int>();
    FS_LAUNCH(handoff_kernel, g, n, 0, d, reinterpret_cast<unsigned*>(d + blocks), d + blocks + 1,
              static_cast<int>(variant));
    return data;
  }
  if (name == "tickets") {
    at::Tensor data = at::zeros({2 * blocks + 1}, kInts);
    int* d = data.data_ptr<int>();
    FS_LAUNCH(ticket_kernel, g, n, 0, reinterpret_cast<unsigned*>(d + 2 * blocks), d);
    return data.narrow(0, 0, 2 * blocks);
  }
  if (name == "static_shared") {
    at::Tensor out = at::zeros({blocks, threads + 1}, kInts);
    FS_LAUNCH(static_shared_kernel, g, n, 0, out.data_ptr<int>());
    return out;
  }
  if (name == "launch") return launch_rule(variant, threads, blocks);
  TORCH_CHECK(name == "occupancy", "unknown rule self-test ", name);
  int resident = -1;
  const cudaError_t status = variant == 1
      ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, smem_optin_kernel,
                                                      static_cast<int>(threads), g)
      : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, smem_kernel,
                                                      static_cast<int>(threads), g);
  return at::tensor({resident, static_cast<int>(status)}, kInts);
}

}  // namespace
}  // namespace fastsoftmax

TORCH_LIBRARY_FRAGMENT(fastsoftmax_emu, m) {
  m.def("rules(str which, int threads, int blocks, int variant) -> Tensor", &fastsoftmax::rules);
}
