// The emulator's scheduler state, shared by its files (not by the kernels): the blocks of a
// launch that are resident, their warps' collectives, and what the instrumentation hooks
// need to classify an access.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "fiber.h"
#include "races.h"
#include "static_shared.h"

namespace fastsoftmax {
namespace emu {

enum class Order { kForward, kReverse, kRandom };

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

// One resident block.
struct BlockRun {
  std::vector<Fiber*> fibers;  // one per thread, in thread-index order
  std::vector<Warp> warps;
  uint3 block_idx{};
  uint32_t linear = 0;  // x + y gx + z gx gy (race reports decode it)
  int alive = 0, at_barrier = 0;
  std::vector<unsigned char> dynamic;  // dynamic shared memory, 16-byte aligned inside
  unsigned char* dynamic_smem = nullptr;
  std::vector<unsigned char> shared_image;  // its static __shared__ bytes while another runs
  BlockClock clock;
};

struct Grid {
  const char* name = "";
  dim3 grid, block;
  size_t dynamic_smem = 0;
  unsigned threads = 0;
  Order order = Order::kForward;
  uint64_t rng = 0;
  const std::function<void()>* body = nullptr;
  Context scheduler;
  std::exception_ptr error;  // thrown by a thread
  bool track_shared = false;  // static __shared__ per block (needs the instrumentation)
  BlockRun* shared_owner = nullptr;  // the block whose static __shared__ bytes are live
};

// Per OS thread. `fiber` is set while kernel code runs: the hooks ignore everything else.
struct Current {
  Grid* grid = nullptr;
  Fiber* fiber = nullptr;
  uintptr_t stack_low = 0, dynamic_low = 0;
  size_t dynamic_size = 0;
  RaceDetector* races = nullptr;  // this thread's (cached: a thread_local object costs a call)
  StaticShared* shared = nullptr;
};
// Initial-exec: the hooks read it at every load and store, and a dynamic TLS access costs a
// call of __tls_get_addr each time.
extern thread_local Current t_current __attribute__((tls_model("initial-exec")));
RaceDetector& races();
StaticShared& static_shared();
// Whether the kernels' library carries the instrumentation (its constructor says so).
bool instrumented();
void set_instrumented();

[[noreturn]] void fail(const std::string& message);
std::string where(const ThreadState& t);
std::string hex(unsigned mask);
uint64_t splitmix64(uint64_t& state);
// The running fiber stops; the scheduler resumes it later (or never, when the launch fails).
void yield_to_scheduler();
Who who(const ThreadState& t);
// Opens __syncthreads of b for its live threads (every one of them waits there).
void open_barrier(BlockRun& b);
std::string deadlock_report(const BlockRun& b);
// A plain access of kernel code (from the hooks).
void on_access(uintptr_t address, unsigned bytes, bool write);

}  // namespace emu
}  // namespace fastsoftmax
