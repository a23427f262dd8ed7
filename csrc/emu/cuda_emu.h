// An emulator of CUDA's execution model on the CPU, so that the unchanged kernels of
// csrc/cuda run in CI on machines without a GPU. Test infrastructure: never in the wheel.
// docs/emulator.md says what it proves and what it cannot.
//
// This header is what a kernel file sees. Everything with state lives in the runtime
// library (the other files of csrc/emu), which is built without instrumentation, while the
// kernel files are built with GCC's -fsanitize=thread instrumentation and no TSan runtime:
// every load and store of kernel code calls a hook of ours (hooks.cpp), which is how plain
// global-memory accesses are checked for races and how static __shared__ memory is told
// apart per block. Hence the rules for this header: it keeps no state of its own, and what
// reads the emulator's state (threadIdx, the lane of a shuffle) is an out-of-line call, so
// that the emulator's own memory never reaches the hooks.
//
//  - Every CUDA thread is a fiber; a few blocks of a launch are resident at once and run
//    interleaved, switching at barriers, warp collectives, atomics and fences.
//  - __syncthreads is a barrier over the block's live threads; warp collectives complete
//    when every lane of their mask has arrived, and their misuse is an error.
//  - Static __shared__ variables are thread_local (one OS thread runs a launch); the runtime
//    gives every block its own copy, 0xCD until written. Dynamic shared memory likewise.
//  - A plain access to global memory racing with a plain write of another warp is an error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- language keywords ---------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static thread_local
#define __constant__
#define __restrict__ __restrict

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef struct fs_emu_stream* cudaStream_t;

// The part of the runtime API a launch configuration needs.
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

namespace fastsoftmax {
namespace emu {

// The running thread's coordinates and its launch's shape; defined in scheduler.cpp.
uint3 thread_idx();
uint3 block_idx();
dim3 block_dim();
dim3 grid_dim();
int lane_id();
unsigned char* dynamic_smem();

// Runs body once per thread of every block of the grid; throws c10::Error (a RuntimeError
// in Python) naming the fault. `tls_anchor` is a thread_local of the kernels' library: it
// tells the runtime where their static __shared__ variables live.
void run_grid(const char* name, const void* kernel, dim3 grid, dim3 block, size_t dynamic_smem,
              const void* tls_anchor, const std::function<void()>& body);
inline thread_local char tls_anchor;

template <class F>
const void* kernel_id(F* kernel) {
  return reinterpret_cast<const void*>(kernel);
}

template <class... Params, class... Args>
void launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
            size_t dynamic_smem, Args&&... args) {
  // Arguments convert to the parameter types once, as a real launch copies them.
  const std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  run_grid(name, kernel_id(kernel), grid, block, dynamic_smem, &tls_anchor, [&] {
    std::tuple<std::decay_t<Params>...> mine = params;  // each thread its own copy
    std::apply(kernel, mine);
  });
}

template <class T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(dynamic_smem());
}

// Synchronisation, defined in scheduler.cpp.
void syncthreads();
enum class Collective : int { kShfl, kBallot, kSyncWarp, kAny, kAll };
// Lane arrives at a warp collective with `value`, reading lane `src` (-1: none). Returns the
// value of lane src for shuffles, the ballot for votes.
uint64_t warp_collective(Collective kind, const char* name, unsigned mask, uint64_t value,
                         int src);
// An atomic on `address` is about to run: the hand-off bookkeeping of the race detector,
// and in random order sometimes another thread first.
void atomic_begin(const void* address, size_t bytes);
// __threadfence (device scope: orders this warp's writes for other blocks) or
// __threadfence_block (block scope).
void threadfence(bool device_scope);

// Launch limits and the occupancy calculator of an H100/H200-like device (launch_rules.cpp).
cudaError_t set_max_dynamic_smem(const void* kernel, int bytes);
cudaError_t occupancy(int* blocks, const void* kernel, int threads, size_t dynamic_smem);
// Blocks per SM as fastsoftmax sizes grids; an error where the query answers 0 (the
// configuration asked about cannot launch at all).
int resident_blocks_per_sm(const void* kernel, int threads, size_t dynamic_smem);

struct DeviceGuard {
  template <class D>
  explicit DeviceGuard(const D&) {}
};
inline cudaStream_t current_stream() { return nullptr; }
// Small on purpose: grid-stride loops then take several turns in tests.
inline int multiprocessor_count() { return 4; }

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a type > 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

// Source lane of a shuffle within segments of `width` lanes; -1 keeps the lane's own value.
inline int shfl_source(int lane, int target, int width) {
  return (lane & ~(width - 1)) + (target & (width - 1));
}

}  // namespace emu
}  // namespace fastsoftmax

#define threadIdx (::fastsoftmax::emu::thread_idx())
#define blockIdx (::fastsoftmax::emu::block_idx())
#define blockDim (::fastsoftmax::emu::block_dim())
#define gridDim (::fastsoftmax::emu::grid_dim())
#define warpSize 32

template <class F>
cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  return ::fastsoftmax::emu::set_max_dynamic_smem(::fastsoftmax::emu::kernel_id(kernel), value);
}
template <class F>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, F* kernel, int threads,
                                                          size_t dynamic_smem) {
  return ::fastsoftmax::emu::occupancy(blocks, ::fastsoftmax::emu::kernel_id(kernel), threads,
                                       dynamic_smem);
}

// ---- intrinsics ----------------------------------------------------------------------------
inline void __syncthreads() { ::fastsoftmax::emu::syncthreads(); }
inline void __threadfence() { ::fastsoftmax::emu::threadfence(true); }
inline void __threadfence_block() { ::fastsoftmax::emu::threadfence(false); }

#include "cuda_emu_intrinsics.h"
