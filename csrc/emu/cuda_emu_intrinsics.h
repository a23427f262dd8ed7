// The device intrinsics of the emulated build: warp collectives, bit tricks, fast maths and
// the atomics. Included by cuda_emu.h; see there for why nothing here reads emulator state
// directly.
#pragma once

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
  const int lane = ::fastsoftmax::emu::lane_id();
  return fs_emu_shuffle("__shfl_sync", mask, var,
                        ::fastsoftmax::emu::shfl_source(lane, src_lane, width));
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  const int lane = ::fastsoftmax::emu::lane_id();
  const int in_segment = lane & (width - 1);
  const int src = in_segment >= static_cast<int>(delta) ? lane - static_cast<int>(delta) : -1;
  return fs_emu_shuffle("__shfl_up_sync", mask, var, src);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  const int lane = ::fastsoftmax::emu::lane_id();
  const int in_segment = lane & (width - 1);
  const int src = in_segment + static_cast<int>(delta) < width ? lane + static_cast<int>(delta)
                                                               : -1;
  return fs_emu_shuffle("__shfl_down_sync", mask, var, src);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  const int lane = ::fastsoftmax::emu::lane_id();
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

// ---- atomics: each returns the old value ---------------------------------------------------
// The read and the write go through __atomic builtins, which the instrumentation reports as
// atomic (exempt from the race check) rather than as plain accesses. Fibers are cooperative,
// so nothing runs between the two.
template <class T, class Update>
T fs_emu_atomic_update(T* address, Update update) {
  ::fastsoftmax::emu::atomic_begin(address, sizeof(T));
  T old;
  __atomic_load(address, &old, __ATOMIC_RELAXED);
  T next = update(old);
  __atomic_store(address, &next, __ATOMIC_RELAXED);
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
