// Fibers of the CUDA emulator: a stack of its own per CUDA thread, switched cooperatively,
// so that a thread can stop in the middle of a kernel and resume there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "cuda_emu.h"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define FS_EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif
#ifdef __SANITIZE_ADDRESS__
#define FS_EMU_ASAN_FIBERS 1
#endif

namespace fastsoftmax {
namespace emu {

struct BlockRun;

#ifdef FS_EMU_ASM_SWITCH
struct Context {
  void* sp = nullptr;
};
#else
struct Context {
  ucontext_t uc{};
#ifdef FS_EMU_ASAN_FIBERS
  const void* stack_bottom = nullptr;  // a fiber's: set by prepare; the scheduler's: learnt
  size_t stack_size = 0;               // by each fiber when it first runs
  void* fake_stack = nullptr;          // ASan's frames of this context while it is switched out
#endif
};
#endif

// What a running thread knows of itself.
struct ThreadState {
  uint3 thread_idx{};
  int lane = 0;
  int warp = 0;
  BlockRun* block = nullptr;
};

struct Fiber {
  static constexpr size_t kStackBytes = size_t{256} << 10;  // room for -O0/ASan
  static constexpr size_t kGuardBytes = 4096;

  char* stack = nullptr;  // mmap'ed, lowest page a guard
  Context ctx;
  std::function<void()> const* body = nullptr;
  ThreadState state;
  enum Status { kRunnable, kAtBarrier, kAtWarp, kDone } status = kDone;
  uint64_t collective_result = 0;

  Fiber();
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
  uintptr_t stack_low() const { return reinterpret_cast<uintptr_t>(stack) + kGuardBytes; }
};

// Makes f start at fiber_entry(f) on its next switch.
void prepare(Fiber* f);
// `from_ends`: `from` is a finished fiber that never resumes (matters to ASan only).
void switch_to(Context& from, Context& to, bool from_ends = false);
// Runs the fiber's body; defined by the scheduler.
void fiber_entry(void* fiber);
// ASan only: the first switch into a fiber came from `scheduler`; learn its stack.
void fiber_started(Context& scheduler);

}  // namespace emu
}  // namespace fastsoftmax
