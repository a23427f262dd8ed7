// The entry points that GCC's -fsanitize=thread instrumentation calls in the kernel files.
// There is no TSan runtime: these are ours. Plain loads and stores of kernel code go to the
// emulator (on_access); everything else, host code included, costs one thread-local test.
// The atomic entry points perform the atomic operation itself (the instrumentation replaces
// it by the call), sequentially consistent whatever order was asked for.
#include "scheduler.h"

namespace fe = fastsoftmax::emu;

namespace {

inline void plain(const void* p, unsigned bytes, bool write) {
  if (fe::t_current.fiber == nullptr) return;
  fe::on_access(reinterpret_cast<uintptr_t>(p), bytes, write);
}

constexpr int kSeqCst = __ATOMIC_SEQ_CST;

}  // namespace

extern "C" {

// The kernels' library was built with the instrumentation: its constructor calls this.
void __tsan_init() { fe::set_instrumented(); }
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

#define FS_EMU_PLAIN(n)                                                          \
  void __tsan_read##n(void* p) { plain(p, n, false); }                           \
  void __tsan_write##n(void* p) { plain(p, n, true); }                           \
  void __tsan_unaligned_read##n(void* p) { plain(p, n, false); }                 \
  void __tsan_unaligned_write##n(void* p) { plain(p, n, true); }                 \
  void __tsan_volatile_read##n(void* p) { plain(p, n, false); }                  \
  void __tsan_volatile_write##n(void* p) { plain(p, n, true); }
FS_EMU_PLAIN(1)
FS_EMU_PLAIN(2)
FS_EMU_PLAIN(4)
FS_EMU_PLAIN(8)
FS_EMU_PLAIN(16)
#undef FS_EMU_PLAIN

void __tsan_read_range(void* p, unsigned long bytes) {
  for (unsigned long i = 0; i < bytes; i += 8)
    plain(static_cast<char*>(p) + i, static_cast<unsigned>(bytes - i < 8 ? bytes - i : 8), false);
}
void __tsan_write_range(void* p, unsigned long bytes) {
  for (unsigned long i = 0; i < bytes; i += 8)
    plain(static_cast<char*>(p) + i, static_cast<unsigned>(bytes - i < 8 ? bytes - i : 8), true);
}

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(kSeqCst); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(kSeqCst); }

#define FS_EMU_ATOMICS(n, T)                                                                 \
  T __tsan_atomic##n##_load(const volatile T* a, int) { return __atomic_load_n(a, kSeqCst); } \
  void __tsan_atomic##n##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, kSeqCst); } \
  T __tsan_atomic##n##_exchange(volatile T* a, T v, int) {                                   \
    return __atomic_exchange_n(a, v, kSeqCst);                                               \
  }                                                                                          \
  T __tsan_atomic##n##_fetch_add(volatile T* a, T v, int) {                                  \
    return __atomic_fetch_add(a, v, kSeqCst);                                                \
  }                                                                                          \
  T __tsan_atomic##n##_fetch_sub(volatile T* a, T v, int) {                                  \
    return __atomic_fetch_sub(a, v, kSeqCst);                                                \
  }                                                                                          \
  T __tsan_atomic##n##_fetch_and(volatile T* a, T v, int) {                                  \
    return __atomic_fetch_and(a, v, kSeqCst);                                                \
  }                                                                                          \
  T __tsan_atomic##n##_fetch_or(volatile T* a, T v, int) {                                   \
    return __atomic_fetch_or(a, v, kSeqCst);                                                 \
  }                                                                                          \
  T __tsan_atomic##n##_fetch_xor(volatile T* a, T v, int) {                                  \
    return __atomic_fetch_xor(a, v, kSeqCst);                                                \
  }                                                                                          \
  T __tsan_atomic##n##_fetch_nand(volatile T* a, T v, int) {                                 \
    return __atomic_fetch_nand(a, v, kSeqCst);                                               \
  }                                                                                          \
  int __tsan_atomic##n##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {       \
    return __atomic_compare_exchange_n(a, c, v, false, kSeqCst, kSeqCst);                    \
  }                                                                                          \
  int __tsan_atomic##n##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {         \
    return __atomic_compare_exchange_n(a, c, v, false, kSeqCst, kSeqCst);                    \
  }                                                                                          \
  T __tsan_atomic##n##_compare_exchange_val(volatile T* a, T c, T v, int, int) {             \
    __atomic_compare_exchange_n(a, &c, v, false, kSeqCst, kSeqCst);                         \
    return c;                                                                                \
  }
FS_EMU_ATOMICS(8, char)
FS_EMU_ATOMICS(16, short)
FS_EMU_ATOMICS(32, int)
FS_EMU_ATOMICS(64, long)
#undef FS_EMU_ATOMICS

}  // extern "C"
