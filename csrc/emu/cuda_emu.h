// An emulator of CUDA's execution model on the CPU, so that the unchanged kernels of
// csrc/cuda run in CI on machines without a GPU. Test infrastructure: never in the wheel.
//
// Every CUDA thread of a block is a fiber (a stack of its own, switched cooperatively), so
// a thread can stop in the middle of a kernel at a barrier or a warp collective and resume
// there. A block runs on the launching OS thread; blocks run one after another.
//   - __syncthreads is a real barrier over the block's threads that have not exited.
//   - Warp collectives (__shfl*_sync, __ballot_sync, __syncwarp) complete when every lane
//     of their mask has arrived; the calling lane missing from its own mask, a mask naming
//     lanes that do not exist (a partial warp), lanes of one mask calling different
//     collectives or masks, a shuffle reading a lane outside the mask, and a lane that
//     exits or waits elsewhere while its warp-mates wait for it are reported as errors.
//   - Static __shared__ variables are one copy per block (static thread_local: blocks of a
//     launch run one at a time on one OS thread); dynamic shared memory is a buffer of the
//     launch's size per block, filled with 0xCD so that reading before writing shows.
//   - Between two synchronisation points, threads (and blocks) run in an order chosen per
//     launch: forward, reverse or seeded random (see set_schedule). In random order an
//     atomic may also yield to another thread. A missing barrier or a read of another
//     thread's unsynchronised write therefore changes the result under some order.
// What it cannot show: speed, and races of the real memory model (there is no weak
// ordering or caching here: every write is visible at once).
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

namespace fastsoftmax {
namespace emu {

struct Block;

// What a running thread sees of itself and of its launch.
struct ThreadState {
  uint3 thread_idx;
  int lane = 0;
  int warp = 0;
  Block* block = nullptr;
};
struct LaunchState {
  dim3 grid_dim, block_dim;
  uint3 block_idx;
  unsigned char* dynamic_smem = nullptr;
};
inline thread_local ThreadState* t_self = nullptr;
inline thread_local LaunchState* t_launch = nullptr;

// Runs body once per thread of every block of the grid with the semantics above; throws
// c10::Error (a RuntimeError in Python) naming the fault. Defined in cuda_emu.cpp.
void run_grid(dim3 grid, dim3 block, size_t dynamic_smem, const std::function<void()>& body);

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t dynamic_smem,
            Args&&... args) {
  // Arguments convert to the parameter types once, as a real launch copies them.
  const std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  run_grid(grid, block, dynamic_smem, [&] {
    std::tuple<std::decay_t<Params>...> mine = params;  // each thread its own copy
    std::apply(kernel, mine);
  });
}

template <class T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(t_launch->dynamic_smem);
}

// Synchronisation, defined in cuda_emu.cpp.
void syncthreads();
enum class Collective : int { kShfl, kBallot, kSyncWarp, kAny, kAll };
// Lane arrives at a warp collective with `value`, reading lane `src` (-1: none). Returns the
// value of lane src for shuffles, the ballot for votes.
uint64_t warp_collective(Collective kind, const char* name, unsigned mask, uint64_t value,
                         int src);
// In random order, sometimes lets another thread run (called by the atomics).
void maybe_yield();

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

#define threadIdx (::fastsoftmax::emu::t_self->thread_idx)
#define blockIdx (::fastsoftmax::emu::t_launch->block_idx)
#define blockDim (::fastsoftmax::emu::t_launch->block_dim)
#define gridDim (::fastsoftmax::emu::t_launch->grid_dim)
#define warpSize 32

// ---- intrinsics ----------------------------------------------------------------------------
inline void __syncthreads() { ::fastsoftmax::emu::syncthreads(); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::fastsoftmax::emu::warp_collective(::fastsoftmax::emu::Collective::kSyncWarp, "__syncwarp",
                                      mask, 0, -1);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(::fastsoftmax::emu::warp_collective(
      ::fastsoftmax::emu::Collective::kBallot, "__ballot_sync", mask, predicate != 0, -1));
}
inline int __any_sync(unsigned mask, int predicate) {
  return static_cast<int>(::fastsoftmax::emu::warp_collective(
      ::fastsoftmax::emu::Collective::kAny, "__any_sync", mask, predicate != 0, -1));
}
inline int __all_sync(unsigned mask, int predicate) {
  return static_cast<int>(::fastsoftmax::emu::warp_collective(
      ::fastsoftmax::emu::Collective::kAll, "__all_sync", mask, predicate != 0, -1));
}

template <class T>
T fs_emu_shuffle(const char* name, unsigned mask, T var, int src) {
  using namespace ::fastsoftmax::emu;
  return from_bits<T>(warp_collective(Collective::kShfl, name, mask, to_bits(var), src));
}
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
  const int lane = ::fastsoftmax::emu::t_self->lane;
  return fs_emu_shuffle("__shfl_sync", mask, var,
                        ::fastsoftmax::emu::shfl_source(lane, src_lane, width));
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  const int lane = ::fastsoftmax::emu::t_self->lane;
  const int in_segment = lane & (width - 1);
  const int src = in_segment >= static_cast<int>(delta) ? lane - static_cast<int>(delta) : -1;
  return fs_emu_shuffle("__shfl_up_sync", mask, var, src);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  const int lane = ::fastsoftmax::emu::t_self->lane;
  const int in_segment = lane & (width - 1);
  const int src = in_segment + static_cast<int>(delta) < width ? lane + static_cast<int>(delta)
                                                               : -1;
  return fs_emu_shuffle("__shfl_down_sync", mask, var, src);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  const int lane = ::fastsoftmax::emu::t_self->lane;
  const int target = lane ^ lane_mask;
  // A target beyond the lane's segment of `width` lanes keeps the lane's own value.
  const int src = (target & ~(width - 1)) == (lane & ~(width - 1)) ? target : -1;
  return fs_emu_shuffle("__shfl_xor_sync", mask, var, src);
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<uint64_t>(a) * b) >> 32);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
template <class T>
T __ldg(const T* p) {
  return *p;
}
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

// CUDA's global min/max for arithmetic types (host C++ has only std::min/std::max).
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}

// ---- atomics: each returns the old value; may yield first in random order --------------------
template <class T, class Update>
T fs_emu_atomic_update(T* address, Update update) {
  ::fastsoftmax::emu::maybe_yield();
  const T old = *address;  // cooperative threads: nothing runs between the read and the write
  *address = update(old);
  return old;
}
#define FS_EMU_ATOMIC(name, T, expr)                                              \
  inline T name(T* address, T val) {                                              \
    return fs_emu_atomic_update<T>(address, [val](T old) -> T { return expr; });  \
  }
FS_EMU_ATOMIC(atomicAdd, int, old + val)
FS_EMU_ATOMIC(atomicAdd, unsigned, old + val)
FS_EMU_ATOMIC(atomicAdd, unsigned long long, old + val)
FS_EMU_ATOMIC(atomicAdd, float, old + val)
FS_EMU_ATOMIC(atomicAdd, double, old + val)
FS_EMU_ATOMIC(atomicOr, int, old | val)
FS_EMU_ATOMIC(atomicOr, unsigned, old | val)
FS_EMU_ATOMIC(atomicOr, unsigned long long, old | val)
FS_EMU_ATOMIC(atomicAnd, unsigned, old & val)
FS_EMU_ATOMIC(atomicAnd, unsigned long long, old & val)
FS_EMU_ATOMIC(atomicMin, int, val < old ? val : old)
FS_EMU_ATOMIC(atomicMin, unsigned, val < old ? val : old)
FS_EMU_ATOMIC(atomicMin, long long, val < old ? val : old)
FS_EMU_ATOMIC(atomicMin, unsigned long long, val < old ? val : old)
FS_EMU_ATOMIC(atomicMax, int, val > old ? val : old)
FS_EMU_ATOMIC(atomicMax, unsigned, val > old ? val : old)
FS_EMU_ATOMIC(atomicMax, long long, val > old ? val : old)
FS_EMU_ATOMIC(atomicMax, unsigned long long, val > old ? val : old)
FS_EMU_ATOMIC(atomicExch, int, val)
FS_EMU_ATOMIC(atomicExch, unsigned, val)
FS_EMU_ATOMIC(atomicExch, unsigned long long, val)
FS_EMU_ATOMIC(atomicExch, float, val)
#undef FS_EMU_ATOMIC

template <class T>
T fs_emu_atomic_cas(T* address, T compare, T val) {
  return fs_emu_atomic_update<T>(address, [=](T old) -> T { return old == compare ? val : old; });
}
inline int atomicCAS(int* a, int c, int v) { return fs_emu_atomic_cas(a, c, v); }
inline unsigned atomicCAS(unsigned* a, unsigned c, unsigned v) {
  return fs_emu_atomic_cas(a, c, v);
}
inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long c,
                                    unsigned long long v) {
  return fs_emu_atomic_cas(a, c, v);
}
