// Block barriers and warp collectives of the emulator, with the misuse they report.
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "scheduler.h"

namespace fastsoftmax {
namespace emu {

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

std::string where(const ThreadState& t) {
  std::ostringstream s;
  const uint3 b = t.block->block_idx;
  s << "thread (" << t.thread_idx.x << "," << t.thread_idx.y << "," << t.thread_idx.z
    << ") of block (" << b.x << "," << b.y << "," << b.z << "), warp " << t.warp << " lane "
    << t.lane;
  return s.str();
}

std::string hex(unsigned mask) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", mask);
  return buf;
}

namespace {

void finish_collective(BlockRun& b, Warp& w, size_t gi, const ThreadState& caller) {
  WarpGroup g = w.groups[gi];
  w.groups.erase(w.groups.begin() + static_cast<std::ptrdiff_t>(gi));
  uint64_t votes = 0;
  for (int l = 0; l < 32; ++l)
    if ((g.mask >> l) & 1u) votes |= (g.value[l] != 0 ? 1ull : 0ull) << l;
  const int warp_base = caller.warp * 32;
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
    if (l != caller.lane) f->status = Fiber::kRunnable;
  }
}

}  // namespace

uint64_t warp_collective(Collective kind, const char* name, unsigned mask, uint64_t value,
                         int src) {
  Fiber& self = *t_current.fiber;
  const ThreadState& t = self.state;
  BlockRun& b = *t.block;
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
    finish_collective(b, w, gi, t);
  } else {
    self.status = Fiber::kAtWarp;
    yield_to_scheduler();
  }
  return self.collective_result;
}

void syncthreads() {
  Fiber& self = *t_current.fiber;
  self.status = Fiber::kAtBarrier;
  ++self.state.block->at_barrier;
  yield_to_scheduler();
}

void open_barrier(BlockRun& b) {
  for (Fiber* f : b.fibers)
    if (f->status == Fiber::kAtBarrier) f->status = Fiber::kRunnable;
  b.at_barrier = 0;
  races().barrier(b.clock);
}

std::string deadlock_report(const BlockRun& b) {
  std::ostringstream s;
  s << "deadlock: no thread of block (" << b.block_idx.x << "," << b.block_idx.y << ","
    << b.block_idx.z << ") can run.";
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

}  // namespace emu
}  // namespace fastsoftmax
