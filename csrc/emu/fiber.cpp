// Stack switching for the emulator's fibers: a few instructions on x86-64, ucontext (with
// ASan's fiber annotations) elsewhere.
#include "fiber.h"

#include <c10/util/Exception.h>
#include <sys/mman.h>

#ifdef FS_EMU_ASAN_FIBERS
// ASan keeps one stack per OS thread in mind: every switch between a fiber's stack and the
// scheduler's must be announced, or a frame on the other stack reads as a stack overflow or
// a use after return.
#include <sanitizer/common_interface_defs.h>
#endif

#ifdef FS_EMU_ASM_SWITCH
// Saves the callee-saved registers on the current stack, stores the stack pointer in *from,
// loads `to` and restores that stack's registers (System V x86-64). A new fiber's stack is
// laid out so that the first switch "returns" into fs_emu_trampoline with the fiber in rbx.
// Hidden symbols: direct calls inside this shared object.
extern "C" void fs_emu_switch(void** from, void* to) __attribute__((visibility("hidden")));
extern "C" void fs_emu_trampoline() __attribute__((visibility("hidden")));
extern "C" __attribute__((visibility("hidden"), used)) void fs_emu_fiber_entry(void* fiber);
asm(R"(
  .text
  .globl fs_emu_switch
  .hidden fs_emu_switch
  .type fs_emu_switch,@function
fs_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size fs_emu_switch,.-fs_emu_switch
  .globl fs_emu_trampoline
  .hidden fs_emu_trampoline
  .type fs_emu_trampoline,@function
fs_emu_trampoline:
  movq %rbx, %rdi
  call fs_emu_fiber_entry
  ud2
  .size fs_emu_trampoline,.-fs_emu_trampoline
)");
extern "C" void fs_emu_fiber_entry(void* fiber) { fastsoftmax::emu::fiber_entry(fiber); }
#endif

namespace fastsoftmax {
namespace emu {

Fiber::Fiber() {
  void* p = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  TORCH_CHECK(p != MAP_FAILED, "CUDA emulator: could not map a fiber stack");
  mprotect(p, kGuardBytes, PROT_NONE);  // an overflow faults instead of corrupting memory
  stack = static_cast<char*>(p);
}

Fiber::~Fiber() { munmap(stack, kStackBytes + kGuardBytes); }

#ifdef FS_EMU_ASM_SWITCH
void prepare(Fiber* f) {
  // Top of stack, 16-byte aligned: [trampoline][rbp rbx r12 r13 r14 r15] below it.
  auto top = (f->stack_low() + Fiber::kStackBytes) & ~uintptr_t{15};
  auto* slot = reinterpret_cast<void**>(top);
  *--slot = reinterpret_cast<void*>(&fs_emu_trampoline);
  *--slot = nullptr;  // rbp
  *--slot = f;        // rbx: the trampoline's argument
  for (int i = 0; i < 4; ++i) *--slot = nullptr;  // r12..r15
  f->ctx.sp = slot;
}
void switch_to(Context& from, Context& to, bool /*from_ends*/) { fs_emu_switch(&from.sp, to.sp); }
void fiber_started(Context&) {}
#else
namespace {
void ucontext_entry(unsigned lo, unsigned hi) {
  fiber_entry(reinterpret_cast<void*>((static_cast<uintptr_t>(hi) << 32) | lo));
}
}  // namespace

void prepare(Fiber* f) {
  getcontext(&f->ctx.uc);
  f->ctx.uc.uc_stack.ss_sp = reinterpret_cast<void*>(f->stack_low());
  f->ctx.uc.uc_stack.ss_size = Fiber::kStackBytes;
  f->ctx.uc.uc_link = nullptr;
  const auto p = reinterpret_cast<uintptr_t>(f);
  makecontext(&f->ctx.uc, reinterpret_cast<void (*)()>(&ucontext_entry), 2,
              static_cast<unsigned>(p), static_cast<unsigned>(p >> 32));
#ifdef FS_EMU_ASAN_FIBERS
  f->ctx.stack_bottom = reinterpret_cast<void*>(f->stack_low());
  f->ctx.stack_size = Fiber::kStackBytes;
  f->ctx.fake_stack = nullptr;
#endif
}

void switch_to(Context& from, Context& to, bool from_ends) {
#ifdef FS_EMU_ASAN_FIBERS
  __sanitizer_start_switch_fiber(from_ends ? nullptr : &from.fake_stack, to.stack_bottom,
                                 to.stack_size);
#else
  (void)from_ends;
#endif
  swapcontext(&from.uc, &to.uc);
#ifdef FS_EMU_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(from.fake_stack, nullptr, nullptr);  // back on `from`
#endif
}

void fiber_started(Context& scheduler) {
#ifdef FS_EMU_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(nullptr, &scheduler.stack_bottom, &scheduler.stack_size);
#else
  (void)scheduler;
#endif
}
#endif

}  // namespace emu
}  // namespace fastsoftmax
