// The CUDA emulator's scheduler: fibers, the block barrier, warp collectives and the
// interleaving policy. See cuda_emu.h for the semantics it honours.
#include "cuda_emu.h"

#include <c10/util/Exception.h>
#include <sys/mman.h>
#include <torch/library.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define FS_EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif
#ifdef __SANITIZE_ADDRESS__
// ASan keeps one stack per OS thread in mind: every switch between a fiber's stack and the
// scheduler's must be announced, or a frame on the other stack reads as a stack overflow or
// a use after return.
#include <sanitizer/common_interface_defs.h>
#define FS_EMU_ASAN_FIBERS 1
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
#endif

namespace fastsoftmax {
namespace emu {
void fiber_entry(void* fiber);
}
}  // namespace fastsoftmax

#ifdef FS_EMU_ASM_SWITCH
extern "C" void fs_emu_fiber_entry(void* fiber) { fastsoftmax::emu::fiber_entry(fiber); }
#endif

namespace fastsoftmax {
namespace emu {
namespace {

// ---- fibers --------------------------------------------------------------------------------

constexpr size_t kStackBytes = size_t{256} << 10;  // kernels are shallow; room for -O0/ASan
constexpr size_t kGuardBytes = 4096;

struct Fiber;

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

struct Fiber {
  char* stack = nullptr;  // mmap'ed, lowest page a guard
  Context ctx;
  Context* scheduler = nullptr;
  std::function<void()> const* body = nullptr;
  ThreadState state;
  enum Status { kRunnable, kAtBarrier, kAtWarp, kDone } status = kDone;
  uint64_t collective_result = 0;

  Fiber() {
    void* p = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    TORCH_CHECK(p != MAP_FAILED, "CUDA emulator: could not map a fiber stack");
    mprotect(p, kGuardBytes, PROT_NONE);  // an overflow faults instead of corrupting memory
    stack = static_cast<char*>(p);
  }
  ~Fiber() { munmap(stack, kStackBytes + kGuardBytes); }
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
};

#ifdef FS_EMU_ASM_SWITCH
void prepare(Fiber* f) {
  // Top of stack, 16-byte aligned: [trampoline][rbp rbx r12 r13 r14 r15] below it.
  auto top = reinterpret_cast<uintptr_t>(f->stack + kGuardBytes + kStackBytes) & ~uintptr_t{15};
  auto* slot = reinterpret_cast<void**>(top);
  *--slot = reinterpret_cast<void*>(&fs_emu_trampoline);
  *--slot = nullptr;  // rbp
  *--slot = f;        // rbx: the trampoline's argument
  for (int i = 0; i < 4; ++i) *--slot = nullptr;  // r12..r15
  f->ctx.sp = slot;
}
// `from_ends`: `from` is a finished fiber that never resumes (matters to ASan only).
void switch_to(Context& from, Context& to, bool /*from_ends*/ = false) {
  fs_emu_switch(&from.sp, to.sp);
}
#else
void ucontext_entry(unsigned lo, unsigned hi) {
  fiber_entry(reinterpret_cast<void*>((static_cast<uintptr_t>(hi) << 32) | lo));
}
void prepare(Fiber* f) {
  getcontext(&f->ctx.uc);
  f->ctx.uc.uc_stack.ss_sp = f->stack + kGuardBytes;
  f->ctx.uc.uc_stack.ss_size = kStackBytes;
  f->ctx.uc.uc_link = nullptr;
  const auto p = reinterpret_cast<uintptr_t>(f);
  makecontext(&f->ctx.uc, reinterpret_cast<void (*)()>(&ucontext_entry), 2,
              static_cast<unsigned>(p), static_cast<unsigned>(p >> 32));
#ifdef FS_EMU_ASAN_FIBERS
  f->ctx.stack_bottom = f->stack + kGuardBytes;
  f->ctx.stack_size = kStackBytes;
  f->ctx.fake_stack = nullptr;
#endif
}
// `from_ends`: `from` is a finished fiber that never resumes (ASan frees its frames).
void switch_to(Context& from, Context& to, bool from_ends = false) {
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
#endif

// ---- schedule ------------------------------------------------------------------------------

enum class Order { kForward, kReverse, kRandom };

struct Schedule {
  std::string policy = "rotate";  // rotate: forward, reverse, random in turn per launch
  uint64_t seed = 0;
  uint64_t launches = 0;
};
thread_local Schedule t_schedule;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class T>
void arrange(std::vector<T>& items, Order order, uint64_t& rng) {
  if (order == Order::kReverse) {
    std::reverse(items.begin(), items.end());
  } else if (order == Order::kRandom) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[splitmix64(rng) % i]);
  }
}

// ---- blocks --------------------------------------------------------------------------------

struct WarpGroup {  // lanes waiting at one warp collective
  unsigned mask = 0, arrived = 0;
  Collective kind = Collective::kShfl;
  const char* name = "";
  uint64_t value[32] = {};
  int src[32] = {};
};

struct Warp {
  unsigned existing = 0;  // lanes that exist (a partial last warp has fewer than 32)
  std::vector<WarpGroup> groups;
};

std::string where(const ThreadState& t);

}  // namespace

struct Block {
  std::vector<Fiber*> fibers;  // one per thread, in thread-index order
  std::vector<Warp> warps;
  Context scheduler;
  Fiber* running = nullptr;
  int alive = 0, at_barrier = 0;
  Order order = Order::kForward;
  uint64_t rng = 0;
  std::exception_ptr error;
  LaunchState* launch = nullptr;
};

namespace {

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

std::string where(const ThreadState& t) {
  std::ostringstream s;
  const LaunchState& l = *t.block->launch;
  s << "thread (" << t.thread_idx.x << "," << t.thread_idx.y << "," << t.thread_idx.z
    << ") of block (" << l.block_idx.x << "," << l.block_idx.y << "," << l.block_idx.z
    << "), warp " << t.warp << " lane " << t.lane;
  return s.str();
}

std::string hex(unsigned mask) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", mask);
  return buf;
}

void yield_to_scheduler(Block& b) {
  Fiber* f = b.running;
  switch_to(f->ctx, b.scheduler);
}

void finish_collective(Block& b, Warp& w, size_t gi, int caller_lane) {
  WarpGroup g = w.groups[gi];
  w.groups.erase(w.groups.begin() + static_cast<std::ptrdiff_t>(gi));
  uint64_t votes = 0;
  for (int l = 0; l < 32; ++l)
    if ((g.mask >> l) & 1u) votes |= (g.value[l] != 0 ? 1ull : 0ull) << l;
  const int warp_base = b.running->state.warp * 32;
  for (int l = 0; l < 32; ++l) {
    if (!((g.mask >> l) & 1u)) continue;
    uint64_t result = 0;
    switch (g.kind) {
      case Collective::kShfl: result = g.src[l] >= 0 ? g.value[g.src[l]] : g.value[l]; break;
      case Collective::kBallot: result = votes; break;
      case Collective::kAny: result = votes != 0; break;
      case Collective::kAll: result = votes == g.mask; break;
      case Collective::kSyncWarp: break;
    }
    Fiber* f = b.fibers[static_cast<size_t>(warp_base + l)];
    f->collective_result = result;
    if (l != caller_lane) f->status = Fiber::kRunnable;
  }
}

}  // namespace

uint64_t warp_collective(Collective kind, const char* name, unsigned mask, uint64_t value,
                         int src) {
  ThreadState& t = *t_self;
  Block& b = *t.block;
  Warp& w = b.warps[static_cast<size_t>(t.warp)];
  const unsigned me = 1u << t.lane;
  if (!(mask & me))
    fail(where(t) + " calls " + name + " with mask " + hex(mask) +
         ", which does not include the calling lane");
  if (mask & ~w.existing)
    fail(where(t) + " calls " + name + " with mask " + hex(mask) +
         " on a partial warp: only lanes " + hex(w.existing) +
         " exist (blockDim is not a multiple of 32)");
  if (src >= 0 && !((mask >> src) & 1u))
    fail(where(t) + " calls " + name + " reading lane " + std::to_string(src) +
         ", which is not in mask " + hex(mask));
  size_t gi = 0;
  while (gi < w.groups.size() && !(w.groups[gi].mask & me)) ++gi;
  if (gi == w.groups.size()) {
    w.groups.push_back(WarpGroup{});
    w.groups.back().mask = mask;
    w.groups.back().kind = kind;
    w.groups.back().name = name;
  }
  WarpGroup& g = w.groups[gi];
  if (g.mask != mask || g.kind != kind)
    fail(where(t) + " calls " + name + " with mask " + hex(mask) + " while lanes " +
         hex(g.arrived) + " of its warp wait at " + g.name + " with mask " + hex(g.mask));
  g.arrived |= me;
  g.value[t.lane] = value;
  g.src[t.lane] = src;
  if (g.arrived == mask) {
    finish_collective(b, w, gi, t.lane);
  } else {
    b.running->status = Fiber::kAtWarp;
    yield_to_scheduler(b);
  }
  return b.running->collective_result;
}

void syncthreads() {
  Block& b = *t_self->block;
  b.running->status = Fiber::kAtBarrier;
  ++b.at_barrier;
  yield_to_scheduler(b);
}

void maybe_yield() {
  ThreadState* t = t_self;
  if (t == nullptr) return;  // host code
  Block& b = *t->block;
  if (b.order != Order::kRandom || (splitmix64(b.rng) & 3u) != 0) return;
  yield_to_scheduler(b);  // stays runnable: resumed in the next round
}

void fiber_entry(void* fiber) {
  auto* f = static_cast<Fiber*>(fiber);
  Block& b = *f->state.block;
#ifdef FS_EMU_ASAN_FIBERS
  // The first run on this stack: the switch came from the scheduler, whose stack we learn.
  __sanitizer_finish_switch_fiber(nullptr, &b.scheduler.stack_bottom, &b.scheduler.stack_size);
#endif
  try {
    (*f->body)();
  } catch (...) {
    if (!b.error) b.error = std::current_exception();
  }
  f->status = Fiber::kDone;
  --b.alive;
  switch_to(f->ctx, b.scheduler, /*from_ends=*/true);
  __builtin_unreachable();  // a finished fiber is re-prepared before it runs again
}

namespace {

std::string deadlock_report(const Block& b) {
  std::ostringstream s;
  s << "deadlock: no thread of block (" << b.launch->block_idx.x << "," << b.launch->block_idx.y
    << "," << b.launch->block_idx.z << ") can run.";
  for (size_t wi = 0; wi < b.warps.size(); ++wi) {
    for (const WarpGroup& g : b.warps[wi].groups) {
      s << " Warp " << wi << ": lanes " << hex(g.arrived) << " wait at " << g.name << " with mask "
        << hex(g.mask) << " for lanes " << hex(g.mask & ~g.arrived);
      unsigned exited = 0, barrier = 0;
      for (int l = 0; l < 32; ++l) {
        if (!(((g.mask & ~g.arrived) >> l) & 1u)) continue;
        const Fiber* f = b.fibers[wi * 32 + static_cast<size_t>(l)];
        if (f->status == Fiber::kDone) exited |= 1u << l;
        if (f->status == Fiber::kAtBarrier) barrier |= 1u << l;
      }
      if (exited) s << " (lanes " << hex(exited) << " have exited)";
      if (barrier) s << " (lanes " << hex(barrier) << " wait at __syncthreads)";
      s << ".";
    }
  }
  if (b.at_barrier > 0)
    s << " " << b.at_barrier << " of " << b.alive << " live threads wait at __syncthreads.";
  return s.str();
}

// Fibers are kept per OS thread and reused by every block and launch.
thread_local std::vector<std::unique_ptr<Fiber>> t_pool;

void run_block(Block& b, unsigned threads, const std::function<void()>& body) {
  const LaunchState& l = *b.launch;
  while (t_pool.size() < threads) t_pool.push_back(std::make_unique<Fiber>());
  b.fibers.clear();
  b.warps.assign((threads + 31) / 32, Warp{});
  for (unsigned i = 0; i < threads; ++i) {
    Fiber* f = t_pool[i].get();
    f->state.thread_idx = {i % l.block_dim.x, (i / l.block_dim.x) % l.block_dim.y,
                           i / (l.block_dim.x * l.block_dim.y)};
    f->state.lane = static_cast<int>(i % 32);
    f->state.warp = static_cast<int>(i / 32);
    f->state.block = &b;
    f->body = &body;
    f->status = Fiber::kRunnable;
    prepare(f);
    b.fibers.push_back(f);
    b.warps[i / 32].existing |= 1u << (i % 32);
  }
  b.alive = static_cast<int>(threads);
  b.at_barrier = 0;
  std::vector<Fiber*> round;
  while (b.alive > 0 && !b.error) {
    round.clear();
    for (Fiber* f : b.fibers)
      if (f->status == Fiber::kRunnable) round.push_back(f);
    if (round.empty()) {
      if (b.at_barrier == b.alive) {  // every live thread reached __syncthreads
        for (Fiber* f : b.fibers)
          if (f->status == Fiber::kAtBarrier) f->status = Fiber::kRunnable;
        b.at_barrier = 0;
        continue;
      }
      fail(deadlock_report(b));
    }
    arrange(round, b.order, b.rng);
    for (Fiber* f : round) {
      if (f->status != Fiber::kRunnable) continue;
      b.running = f;
      t_self = &f->state;
      switch_to(b.scheduler, f->ctx);
      t_self = nullptr;
      if (b.error) break;
    }
  }
  b.running = nullptr;
  if (b.error) std::rethrow_exception(b.error);
}

Order order_for_launch(Schedule& s, uint64_t& rng) {
  rng = s.seed * 0x9E3779B97F4A7C15ull + s.launches;
  const uint64_t launch = s.launches++;
  if (s.policy == "forward") return Order::kForward;
  if (s.policy == "reverse") return Order::kReverse;
  if (s.policy == "random") return Order::kRandom;
  return static_cast<Order>(launch % 3);
}

}  // namespace

void run_grid(dim3 grid, dim3 block, size_t dynamic_smem, const std::function<void()>& body) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  TORCH_CHECK(threads >= 1 && threads <= 1024 && block.z <= 64,
              "CUDA emulator: invalid launch, block (", block.x, ",", block.y, ",", block.z,
              ") (at most 1024 threads, z at most 64)");
  TORCH_CHECK(grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 2147483647u &&
                  grid.y <= 65535 && grid.z <= 65535,
              "CUDA emulator: invalid launch, grid (", grid.x, ",", grid.y, ",", grid.z, ")");
  TORCH_CHECK(dynamic_smem <= 48 * 1024, "CUDA emulator: a launch asks for ", dynamic_smem,
              " bytes of dynamic shared memory; more than 48 KiB needs an explicit opt-in "
              "(cudaFuncSetAttribute), which no fastsoftmax kernel makes");
  TORCH_CHECK(t_launch == nullptr, "CUDA emulator: a kernel launched another kernel");
  LaunchState launch;
  launch.grid_dim = grid;
  launch.block_dim = block;
  std::vector<unsigned char> smem(dynamic_smem + 16);
  Block b;
  b.launch = &launch;
  b.order = order_for_launch(t_schedule, b.rng);
  std::vector<uint64_t> blocks(uint64_t{grid.x} * grid.y * grid.z);
  std::iota(blocks.begin(), blocks.end(), uint64_t{0});
  arrange(blocks, b.order, b.rng);
  auto* aligned = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem.data()) + 15) & ~uintptr_t{15});
  launch.dynamic_smem = aligned;
  t_launch = &launch;
  try {
    for (const uint64_t id : blocks) {
      launch.block_idx = {static_cast<unsigned>(id % grid.x),
                          static_cast<unsigned>((id / grid.x) % grid.y),
                          static_cast<unsigned>(id / (uint64_t{grid.x} * grid.y))};
      std::memset(aligned, 0xCD, dynamic_smem);  // shared memory starts undefined
      run_block(b, static_cast<unsigned>(threads), body);
    }
  } catch (const std::exception& e) {
    t_launch = nullptr;
    t_self = nullptr;
    TORCH_CHECK(false, "CUDA emulator: ", e.what());
  }
  t_launch = nullptr;
}

namespace {

void set_schedule(c10::string_view policy, int64_t seed) {
  const std::string p(policy);
  TORCH_CHECK_VALUE(p == "rotate" || p == "forward" || p == "reverse" || p == "random",
                    "schedule policy must be rotate, forward, reverse or random, got ", p);
  t_schedule.policy = p;
  t_schedule.seed = static_cast<uint64_t>(seed);
  t_schedule.launches = 0;
}

}  // namespace

}  // namespace emu
}  // namespace fastsoftmax

TORCH_LIBRARY_FRAGMENT(fastsoftmax_emu, m) {
  // Order of threads and blocks between synchronisation points for the launches that
  // follow, on this OS thread; resets the launch counter (so a test replays exactly).
  m.def("set_schedule(str policy, int seed) -> ()", &fastsoftmax::emu::set_schedule);
}
