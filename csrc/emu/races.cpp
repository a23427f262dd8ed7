// The race detector: see races.h for the order it honours.
#include "races.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace fastsoftmax {
namespace emu {

void Knowledge::join(const Knowledge& other) {
  for (const auto& [b, e] : other.blocks) {
    uint32_t& mine = blocks[b];
    mine = std::max(mine, e);
  }
  for (const auto& [g, t] : other.warps) {
    uint32_t& mine = warps[g];
    mine = std::max(mine, t);
  }
}

// Shadow of 4 bytes of global memory: the last plain write, and the last read (more reads
// with no order among them in shared_reads_). Masks say which of the 4 bytes; 0: none.
struct RaceDetector::Cell {
  Stamp w;
  Stamp r;
  uint32_t more;  // 1 + index into shared_reads_, or 0
  uint8_t wmask, rmask;
};
constexpr unsigned kPageGranules = 1024;
struct RaceDetector::Page {
  Cell cells[kPageGranules];
};

RaceDetector::RaceDetector() = default;
RaceDetector::~RaceDetector() = default;

void RaceDetector::begin(const char* kernel, dim3 grid, unsigned warps_per_block, bool enabled) {
  kernel_ = kernel;
  grid_ = grid;
  warps_per_block_ = warps_per_block;
  const uint64_t warps = uint64_t{grid.x} * grid.y * grid.z * warps_per_block;
  enabled_ = enabled && warps < (uint64_t{1} << 32);
  handoffs_ = false;
  report_.clear();
  for (auto& [key, page] : pages_) std::memset(static_cast<void*>(page), 0, sizeof(Page));
  pages_.clear();
  for (auto& entry : page_cache_) entry = {~uintptr_t{0}, nullptr};
  shared_reads_.clear();
  sync_.clear();
}

RaceDetector::Cell& RaceDetector::cell(uintptr_t granule) {
  const uintptr_t key = granule / kPageGranules;
  auto& cached = page_cache_[key % kPageCache];
  if (cached.first != key) {
    Page*& page = pages_[key];
    if (page == nullptr) {
      // Pages are reused across launches (begin zeroes the ones in use).
      const size_t used = pages_.size() - 1;
      if (used == pool_.size()) pool_.push_back(std::make_unique<Page>());
      page = pool_[used].get();
    }
    cached = {key, page};
  }
  return cached.second->cells[granule % kPageGranules];
}

RaceDetector::Stamp RaceDetector::stamp(const Who& who) const {
  return Stamp{who.block * warps_per_block_ + static_cast<uint32_t>(who.warp), who.clock->epoch,
               who.clock->warps[static_cast<size_t>(who.warp)].time};
}

bool RaceDetector::ordered(const Stamp& s, const Who& who) const {
  const uint32_t gid = who.block * warps_per_block_ + static_cast<uint32_t>(who.warp);
  if (s.gid == gid) return true;
  const uint32_t block = s.gid / warps_per_block_;
  if (block == who.block && s.epoch < who.clock->epoch) return true;  // a barrier since
  const Knowledge& k = who.clock->warps[static_cast<size_t>(who.warp)].known;
  if (k.empty()) return false;
  const auto b = k.blocks.find(block);
  if (b != k.blocks.end() && b->second > s.epoch) return true;
  const auto w = k.warps.find(s.gid);
  return w != k.warps.end() && w->second >= s.time;
}

std::string RaceDetector::describe(uint32_t gid) const {
  const uint64_t block = gid / warps_per_block_;
  std::ostringstream s;
  s << "warp " << gid % warps_per_block_ << " of block (" << block % grid_.x << ","
    << (block / grid_.x) % grid_.y << "," << block / (uint64_t{grid_.x} * grid_.y) << ")";
  return s.str();
}

void RaceDetector::check(const Stamp& earlier, bool earlier_write, const Who& who, bool write,
                         uintptr_t address) {
  if (ordered(earlier, who) || !report_.empty()) return;
  char at[32];
  std::snprintf(at, sizeof at, "0x%llx", static_cast<unsigned long long>(address));
  const Stamp me = stamp(who);
  report_ = std::string("data race in kernel ") + kernel_ + " at global address " + at + ": " +
            describe(me.gid) + (write ? " writes it" : " reads it") + " while " +
            describe(earlier.gid) + (earlier_write ? " wrote it" : " read it") +
            " with no __syncthreads (same block) or __threadfence and atomic hand-off (other "
            "blocks) between them";
}

void RaceDetector::read(Cell& c, const Who& who, uint8_t mask, uintptr_t address) {
  if (c.wmask & mask) check(c.w, true, who, false, address);
  const Stamp me = stamp(who);
  if (c.rmask == 0 || c.r.gid == me.gid || ordered(c.r, who)) {
    c.rmask = c.rmask != 0 && c.r.gid == me.gid ? static_cast<uint8_t>(c.rmask | mask) : mask;
    c.r = me;
    return;
  }
  if (c.more == 0) {  // a second read with no order to the first: keep both
    shared_reads_.push_back(SharedReads{});
    c.more = static_cast<uint32_t>(shared_reads_.size());
  }
  SharedReads& more = shared_reads_[c.more - 1];
  const int n = static_cast<int>(std::min<uint32_t>(more.count, kSharedReads));
  int slot = -1;  // this warp's entry, or one ordered before this read, or the oldest
  for (int i = 0; i < n && slot < 0; ++i)
    if (more.stamp[i].gid == me.gid) slot = i;
  for (int i = 0; i < n && slot < 0; ++i)
    if (ordered(more.stamp[i], who)) slot = i;
  if (slot < 0) slot = static_cast<int>(more.count++ % kSharedReads);
  const bool same = more.stamp[slot].gid == me.gid && slot < n;
  more.mask[slot] = same ? static_cast<uint8_t>(more.mask[slot] | mask) : mask;
  more.stamp[slot] = me;
}

void RaceDetector::write(Cell& c, const Who& who, uint8_t mask, uintptr_t address) {
  if (c.wmask & mask) check(c.w, true, who, true, address);
  if (c.rmask & mask) check(c.r, false, who, true, address);
  if (c.more != 0) {
    SharedReads& more = shared_reads_[c.more - 1];
    for (uint32_t i = 0; i < std::min<uint32_t>(more.count, kSharedReads); ++i)
      if (more.mask[i] & mask) check(more.stamp[i], false, who, true, address);
    more.count = 0;
  }
  // Reads before this write are ordered before it (or were reported), so they are dropped:
  // a later access that races with one of them races with this write too.
  c.w = stamp(who);
  c.wmask = mask;
  c.rmask = 0;
}

void RaceDetector::access(const Who& who, uintptr_t address, unsigned bytes, bool write_access) {
  if (!enabled()) return;
  const uintptr_t end = address + bytes;
  for (uintptr_t g = address / 4; g * 4 < end; ++g) {
    const uintptr_t lo = std::max(address, g * 4), hi = std::min(end, g * 4 + 4);
    const auto mask = static_cast<uint8_t>(((1u << (hi - lo)) - 1u) << (lo - g * 4));
    Cell& c = cell(g);
    if (write_access) write(c, who, mask, lo);
    else read(c, who, mask, lo);
  }
}

void RaceDetector::fence(const Who& who) {
  if (!enabled()) return;
  WarpClock& w = who.clock->warps[static_cast<size_t>(who.warp)];
  for (const uintptr_t x : w.pending) {  // acquire what the atomics read
    const auto it = sync_.find(x);
    if (it != sync_.end()) w.known.join(it->second);
  }
  w.pending.clear();
  w.released = w.known;  // release what this warp knows, its own accesses so far included
  uint32_t& own_block = w.released.blocks[who.block];
  own_block = std::max(own_block, who.clock->epoch);
  w.released.warps[who.block * warps_per_block_ + static_cast<uint32_t>(who.warp)] = w.time;
  w.has_released = true;
  ++w.time;  // later accesses are not part of this release
  handoffs_ = true;
}

void RaceDetector::atomic(const Who& who, uintptr_t address) {
  if (!enabled() || !handoffs_) return;  // no fence has released anything yet
  WarpClock& w = who.clock->warps[static_cast<size_t>(who.warp)];
  if (w.has_released) sync_[address].join(w.released);
  if (sync_.count(address) &&
      std::find(w.pending.begin(), w.pending.end(), address) == w.pending.end())
    w.pending.push_back(address);
}

void RaceDetector::barrier(BlockClock& clock) {
  ++clock.epoch;
  bool any = false;
  for (const WarpClock& w : clock.warps) any = any || !w.known.empty() || !w.pending.empty();
  if (!any) return;
  // Every warp of the block now knows what any of them knew, and carries every pending
  // acquire on to its own next fence.
  Knowledge all;
  std::vector<uintptr_t> pending;
  for (const WarpClock& w : clock.warps) {
    all.join(w.known);
    pending.insert(pending.end(), w.pending.begin(), w.pending.end());
  }
  std::sort(pending.begin(), pending.end());
  pending.erase(std::unique(pending.begin(), pending.end()), pending.end());
  for (WarpClock& w : clock.warps) {
    w.known = all;
    w.pending = pending;
  }
}

}  // namespace emu
}  // namespace fastsoftmax
