// The CUDA emulator's scheduler: the resident blocks of a launch, their turns, and the
// interleaving policy. See cuda_emu.h for the semantics it honours.
#include "scheduler.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>
#include <numeric>

#include "launch_rules.h"

namespace fastsoftmax {
namespace emu {

thread_local Current t_current __attribute__((tls_model("initial-exec")));

namespace {

// Blocks resident at once: enough for a block to overtake another at every barrier, atomic
// and fence, few enough to keep a launch of 1024-thread blocks within 4096 fibers.
constexpr size_t kResidentBlocks = 4;

thread_local RaceDetector t_races;
thread_local StaticShared t_shared;
bool g_instrumented = false;

struct Schedule {
  std::string policy = "rotate";  // rotate: forward, reverse, random in turn per launch
  uint64_t seed = 0;
  uint64_t launches = 0;
};
thread_local Schedule t_schedule;

// Fibers are kept per OS thread and reused by every block and launch.
thread_local std::vector<std::unique_ptr<Fiber>> t_pool;

template <class T>
void arrange(std::vector<T>& items, Order order, uint64_t& rng) {
  if (order == Order::kReverse) {
    std::reverse(items.begin(), items.end());
  } else if (order == Order::kRandom) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[splitmix64(rng) % i]);
  }
}

Order order_for_launch(Schedule& s, uint64_t& rng) {
  rng = s.seed * 0x9E3779B97F4A7C15ull + s.launches;
  const uint64_t launch = s.launches++;
  if (s.policy == "forward") return Order::kForward;
  if (s.policy == "reverse") return Order::kReverse;
  if (s.policy == "random") return Order::kRandom;
  return static_cast<Order>(launch % 3);
}

void maybe_yield() {
  const Grid& g = *t_current.grid;
  if (g.order != Order::kRandom || (splitmix64(t_current.grid->rng) & 3u) != 0) return;
  yield_to_scheduler();  // stays runnable: resumed in a later turn of its block
}

// Makes slot b run block `id` of the grid from its first instruction.
void start_block(Grid& g, BlockRun& b, size_t slot, uint64_t id) {
  const dim3 gd = g.grid, bd = g.block;
  b.block_idx = {static_cast<unsigned>(id % gd.x), static_cast<unsigned>((id / gd.x) % gd.y),
                 static_cast<unsigned>(id / (uint64_t{gd.x} * gd.y))};
  b.linear = static_cast<uint32_t>(id);
  b.fibers.clear();
  b.warps.assign((g.threads + 31) / 32, Warp{});
  for (unsigned i = 0; i < g.threads; ++i) {
    Fiber* f = t_pool[slot * g.threads + i].get();
    f->state.thread_idx = {i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y)};
    f->state.lane = static_cast<int>(i % 32);
    f->state.warp = static_cast<int>(i / 32);
    f->state.block = &b;
    f->body = g.body;
    f->status = Fiber::kRunnable;
    prepare(f);
    b.fibers.push_back(f);
    b.warps[i / 32].existing |= 1u << (i % 32);
  }
  b.alive = static_cast<int>(g.threads);
  b.at_barrier = 0;
  b.dynamic.assign(g.dynamic_smem + 16, kPoison);  // shared memory starts undefined
  b.dynamic_smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(b.dynamic.data()) + 15) & ~uintptr_t{15});
  b.clock.epoch = 0;
  b.clock.warps.assign(b.warps.size(), WarpClock{});
  b.shared_image.clear();
  if (g.shared_owner == &b) g.shared_owner = nullptr;  // the live bytes were its predecessor's
}

// The static __shared__ bytes become b's.
void activate(Grid& g, BlockRun& b) {
  if (!g.track_shared || g.shared_owner == &b) return;
  if (g.shared_owner != nullptr) t_shared.save(g.shared_owner->shared_image);
  t_shared.restore(b.shared_image);
  g.shared_owner = &b;
}

void run_fiber(Grid& g, BlockRun& b, Fiber* f) {
  t_current.fiber = f;
  t_current.stack_low = f->stack_low();
  t_current.dynamic_low = reinterpret_cast<uintptr_t>(b.dynamic_smem);
  t_current.dynamic_size = g.dynamic_smem;
  switch_to(g.scheduler, f->ctx);
  t_current.fiber = nullptr;
  if (g.error) std::rethrow_exception(g.error);
  if (!t_races.report().empty()) fail(t_races.report());
}

// One turn of block b: each of its runnable threads runs until it stops (a barrier, a warp
// collective, an atomic or fence that yields, or its end); or, when every live thread
// waits at __syncthreads, the barrier opens.
void step(Grid& g, BlockRun& b, std::vector<Fiber*>& round) {
  round.clear();
  for (Fiber* f : b.fibers)
    if (f->status == Fiber::kRunnable) round.push_back(f);
  if (round.empty()) {
    if (b.at_barrier != b.alive) fail(deadlock_report(b));
    open_barrier(b);
    return;
  }
  activate(g, b);
  arrange(round, g.order, g.rng);
  for (Fiber* f : round)
    if (f->status == Fiber::kRunnable) run_fiber(g, b, f);
}

void run_blocks(Grid& g, std::vector<uint64_t>& sequence) {
  const size_t resident = std::min(sequence.size(), g.track_shared ? kResidentBlocks : 1);
  while (t_pool.size() < resident * g.threads) t_pool.push_back(std::make_unique<Fiber>());
  std::vector<std::unique_ptr<BlockRun>> slots;
  std::vector<size_t> live;  // slot indices
  size_t next = 0;
  for (size_t s = 0; s < resident; ++s) {
    slots.push_back(std::make_unique<BlockRun>());
    start_block(g, *slots[s], s, sequence[next++]);
    live.push_back(s);
  }
  std::vector<Fiber*> round;
  for (uint64_t turn = 0; !live.empty(); ++turn) {
    const size_t pick = g.order == Order::kRandom ? splitmix64(g.rng) % live.size()
                                                  : turn % live.size();
    const size_t s = live[pick];
    step(g, *slots[s], round);
    if (slots[s]->alive > 0) continue;
    if (next < sequence.size()) start_block(g, *slots[s], s, sequence[next++]);
    else live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
  }
}

}  // namespace

RaceDetector& races() { return t_races; }
StaticShared& static_shared() { return t_shared; }
bool instrumented() { return g_instrumented; }
void set_instrumented() { g_instrumented = true; }

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint3 thread_idx() { return t_current.fiber->state.thread_idx; }
uint3 block_idx() { return t_current.fiber->state.block->block_idx; }
dim3 block_dim() { return t_current.grid->block; }
dim3 grid_dim() { return t_current.grid->grid; }
int lane_id() { return t_current.fiber->state.lane; }
unsigned char* dynamic_smem() { return t_current.fiber->state.block->dynamic_smem; }

Who who(const ThreadState& t) { return Who{&t.block->clock, t.block->linear, t.warp}; }

void yield_to_scheduler() {
  switch_to(t_current.fiber->ctx, t_current.grid->scheduler);
}

void atomic_begin(const void* address, size_t bytes) {
  if (t_current.fiber == nullptr) return;  // host code
  maybe_yield();
  const auto a = reinterpret_cast<uintptr_t>(address);
  if (t_current.grid->track_shared && t_shared.contains(a)) {
    t_shared.touch(a, static_cast<unsigned>(bytes));
  } else if (a - t_current.dynamic_low >= t_current.dynamic_size) {
    t_races.atomic(who(t_current.fiber->state), a);
  }
}

void threadfence(bool device_scope) {
  if (t_current.fiber == nullptr) return;
  maybe_yield();
  if (device_scope) t_races.fence(who(t_current.fiber->state));
}

void on_access(uintptr_t address, unsigned bytes, bool write) {
  const Current& c = t_current;
  if (address - c.stack_low < Fiber::kStackBytes) return;  // the thread's own locals
  if (address - c.dynamic_low < c.dynamic_size) return;
  if (c.grid->track_shared && c.shared->contains(address)) {
    c.shared->touch(address, bytes);
    return;
  }
  c.races->access(who(c.fiber->state), address, bytes, write);
}

void fiber_entry(void* fiber) {
  auto* f = static_cast<Fiber*>(fiber);
  Grid& g = *t_current.grid;
  fiber_started(g.scheduler);
  try {
    (*f->body)();
  } catch (...) {
    if (!g.error) g.error = std::current_exception();
  }
  f->status = Fiber::kDone;
  --f->state.block->alive;
  switch_to(f->ctx, g.scheduler, /*from_ends=*/true);
  __builtin_unreachable();  // a finished fiber is re-prepared before it runs again
}

void run_grid(const char* name, const void* kernel, dim3 grid, dim3 block, size_t dynamic_smem,
              const void* tls_anchor, const std::function<void()>& body) {
  TORCH_CHECK(t_current.grid == nullptr, "CUDA emulator: a kernel launched another kernel");
  Grid g;
  g.name = name;
  g.grid = grid;
  g.block = block;
  g.dynamic_smem = dynamic_smem;
  g.body = &body;
  try {
    check_launch(name, kernel, grid, block, dynamic_smem);
    g.threads = block.x * block.y * block.z;
    g.order = order_for_launch(t_schedule, g.rng);
    g.track_shared = g_instrumented && t_shared.begin(tls_anchor);
    t_races.begin(name, grid, (g.threads + 31) / 32, g_instrumented);
    std::vector<uint64_t> sequence(uint64_t{grid.x} * grid.y * grid.z);
    std::iota(sequence.begin(), sequence.end(), uint64_t{0});
    arrange(sequence, g.order, g.rng);
    t_current = Current{&g};
    t_current.races = &t_races;
    t_current.shared = &t_shared;
    run_blocks(g, sequence);
    t_current = Current{};
    check_launch(name, kernel, grid, block, dynamic_smem, t_shared.touched_bytes());
  } catch (const std::exception& e) {
    t_current = Current{};
    TORCH_CHECK(false, "CUDA emulator: ", e.what());
  }
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
  // Whether the kernels were built with the instrumentation: without it (an ASan build)
  // there is no race check, and blocks run one after another.
  m.def("instrumented() -> bool", [] { return fastsoftmax::emu::instrumented(); });
}
