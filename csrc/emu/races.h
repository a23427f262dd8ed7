// The race detector of the emulated launches: shadow memory over global memory, and the
// happens-before order that CUDA gives a launch's warps.
//
// Order between two accesses of one launch comes from:
//  - program order within a warp (lanes of a warp are not told apart);
//  - __syncthreads within a block: an access of an earlier barrier epoch of the block
//    precedes every later access of the block;
//  - a hand-off between blocks: warp A's __threadfence then an atomic on X (a release of what
//    A knows at the fence) and warp B's atomic on X then a __threadfence (an acquire). A
//    barrier passes a pending acquire on to the block's warps, who complete it at their own
//    fence. Without A's fence, or without B's, nothing is handed over.
// A plain read or write and a plain write of another warp to the same bytes with no such
// order between them is a race. Atomics are exempt; so is sharing by reads only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_emu.h"

namespace fastsoftmax {
namespace emu {

// What a warp knows of others: every access of block b in barrier epochs below blocks[b],
// and every access of warp g at local times up to warps[g].
struct Knowledge {
  std::unordered_map<uint32_t, uint32_t> blocks, warps;
  bool empty() const { return blocks.empty() && warps.empty(); }
  void join(const Knowledge& other);
};

struct WarpClock {
  uint32_t time = 1;  // advances at the warp's fences
  Knowledge known;
  Knowledge released;  // what its last __threadfence published
  bool has_released = false;
  std::vector<uintptr_t> pending;  // atomics read since its last fence: acquires to complete
};

struct BlockClock {
  uint32_t epoch = 0;  // __syncthreads passed
  std::vector<WarpClock> warps;
};

// A warp of the launch: its block's clock, the block's linear index and the warp's.
struct Who {
  BlockClock* clock;
  uint32_t block;
  int warp;
};

class RaceDetector {
 public:
  RaceDetector();
  ~RaceDetector();
  // A new launch: forgets the last one's shadow memory. Off when the launch has too many
  // warps to number in 32 bits.
  void begin(const char* kernel, dim3 grid, unsigned warps_per_block, bool enabled);
  bool enabled() const { return enabled_ && report_.empty(); }
  void access(const Who& who, uintptr_t address, unsigned bytes, bool write);
  void atomic(const Who& who, uintptr_t address);
  void fence(const Who& who);
  void barrier(BlockClock& clock);
  // The first race found, or empty.
  const std::string& report() const { return report_; }

 private:
  struct Stamp {
    uint32_t gid, epoch, time;
  };
  struct Cell;
  struct Page;
  Stamp stamp(const Who& who) const;
  bool ordered(const Stamp& s, const Who& who) const;
  Cell& cell(uintptr_t granule);
  void check(const Stamp& earlier, bool earlier_write, const Who& who, bool write,
             uintptr_t address);
  void read(Cell& c, const Who& who, uint8_t mask, uintptr_t address);
  void write(Cell& c, const Who& who, uint8_t mask, uintptr_t address);
  std::string describe(uint32_t gid) const;

  const char* kernel_ = "";
  dim3 grid_;
  unsigned warps_per_block_ = 1;
  bool enabled_ = false;
  bool handoffs_ = false;  // a fence has released something this launch
  std::string report_;
  std::unordered_map<uintptr_t, Page*> pages_;
  std::vector<std::unique_ptr<Page>> pool_;
  // Reads of one granule by several warps with no order among them: the last few (a write
  // racing with a read dropped here goes unreported; nothing unreal is reported).
  static constexpr int kSharedReads = 8;
  struct SharedReads {
    Stamp stamp[kSharedReads];
    uint8_t mask[kSharedReads];
    uint32_t count;
  };
  std::vector<SharedReads> shared_reads_;
  // Pages of the shadow recently used, by page number modulo kPageCache.
  static constexpr size_t kPageCache = 64;
  std::pair<uintptr_t, Page*> page_cache_[kPageCache];
  std::unordered_map<uintptr_t, Knowledge> sync_;  // what atomics on an address carry
};

}  // namespace emu
}  // namespace fastsoftmax
