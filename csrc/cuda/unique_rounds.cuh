// The multi-block rounds of unique sampling (sample_unique.cu). A round takes `draws`
// consecutive draws of the unique stream and does, over the whole grid, what TensorFlow's loop
// does one draw at a time: a draw is kept when no earlier draw has its class, at the position
// given by the number of kept draws before it. Three kernels, because each step needs all of
// the previous one, device-wide:
//   1. round_mark_kernel: every draw atomicMin's its index (+ 1) into its class's mark;
//   2. round_count_kernel: a draw is kept iff its class's mark is its own index (a class kept
//      in an earlier round has mark 0, below any index); each tile of kRoundThreads draws
//      counts its kept draws, and the last block to finish turns the counts into the tiles'
//      first ranks (nobody waits for another block, so any number of blocks may run);
//   3. round_write_kernel: kept draws of rank < num_sampled write their class at their rank
//      and mark it kept; rank num_sampled - 1 sets num_tries.
// After a round that does not complete the set, every class it drew was kept (its first draw
// was), so marks hold only "kept" and "never drawn" and the next round starts clean without a
// reset. Every kernel first reads the device's count of candidates found and exits when the
// set is complete, so the host launches a fixed list of rounds and reads nothing back.
#pragma once

#include "../common/philox.h"
#include "cuda_utils.cuh"

namespace fastsoftmax {
namespace {

constexpr int kRoundThreads = 256;  // one draw per thread per tile
constexpr int kRoundWarps = kRoundThreads / cuda::kWarp;
constexpr unsigned kKept = 0;             // mark of a class kept in an earlier round
constexpr unsigned kNeverDrawn = ~0u;     // mark before any draw (the buffer's fill)

// The draws' inputs, passed by value to every kernel of unique sampling.
struct DrawSource {
  const float* prob;     // the alias table (nullptr for the samplers without one)
  const int32_t* alias;
  TableStrides stride;
  const int64_t* seed;   // on the device: the key is read there, not on the host
  int64_t num_classes;
};

template <int64_t Kind>
__device__ __forceinline__ int64_t unique_draw(const DrawSource& s, uint64_t key, uint64_t i) {
  return draw_class(Kind, key, kStreamUnique, i, s.prob, s.alias, s.num_classes, s.stride);
}

struct Round {
  int64_t index;        // 1, 2, ...: which round last ranked its draws is kept on the device
  int64_t first_draw;   // stream index of the round's draw 0
  int64_t draws;        // at most 2^31 - 2, so that index + 1 fits a mark
  int64_t num_sampled;
};

// On the device, zeroed per call.
struct RoundState {
  long long kept;               // candidates found so far, at most num_sampled
  long long ranked;             // index of the last round whose count kernel ran
  unsigned long long finished;  // blocks of the running count kernel that are done
};

__device__ __forceinline__ int64_t round_tiles(const Round& r) {
  return (r.draws + kRoundThreads - 1) / kRoundThreads;
}

template <int64_t Kind>
__global__ void __launch_bounds__(kRoundThreads)
    round_mark_kernel(DrawSource src, Round round, const RoundState* state, unsigned* marks) {
  if (state->kept >= round.num_sampled) return;
  const uint64_t key = static_cast<uint64_t>(src.seed[0]);
  for (int64_t i = blockIdx.x * int64_t{kRoundThreads} + threadIdx.x; i < round.draws;
       i += int64_t{gridDim.x} * kRoundThreads) {
    const int64_t c = unique_draw<Kind>(src, key, static_cast<uint64_t>(round.first_draw + i));
    const unsigned mark = static_cast<unsigned>(i + 1);
    // Marks only decrease: the plain read spares the atomic (and its contention on the most
    // likely classes) when an earlier draw of the class is already there.
    if (marks[c] > mark) atomicMin(&marks[c], mark);
  }
}

// Run by the last block of round_count_kernel: tile_rank holds each tile's count of kept
// draws and becomes each tile's first rank (kept before the round + the tiles before it).
__device__ void rank_tiles(long long* tile_rank, int64_t tiles, long long kept,
                           const Round& round, RoundState* state, int* warp_sums) {
  const volatile long long* counts = tile_rank;  // other blocks' writes: not from this L1
  long long carry = kept;
  for (int64_t first = 0; first < tiles; first += kRoundThreads) {
    const int64_t k = first + threadIdx.x;
    const int count = k < tiles ? static_cast<int>(counts[k]) : 0;
    int chunk_total = 0;
    const int before = cuda::block_exclusive_scan(count, &chunk_total, warp_sums);
    if (k < tiles) tile_rank[k] = carry + before;
    carry += chunk_total;
    __syncthreads();  // warp_sums is the next chunk's
  }
  if (threadIdx.x == 0) {
    state->kept = carry < round.num_sampled ? carry : round.num_sampled;
    state->ranked = round.index;
    state->finished = 0;  // for the next round's count kernel
  }
}

template <int64_t Kind>
__global__ void __launch_bounds__(kRoundThreads)
    round_count_kernel(DrawSource src, Round round, RoundState* state, const unsigned* marks,
                       unsigned* keep_bits, long long* tile_rank) {
  __shared__ int warp_sums[cuda::kWarp];
  __shared__ bool last;
  const long long kept = state->kept;
  if (kept >= round.num_sampled) return;  // the same for every block
  const uint64_t key = static_cast<uint64_t>(src.seed[0]);
  const int64_t tiles = round_tiles(round);
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t i = tile * kRoundThreads + threadIdx.x;
    bool keep = false;
    if (i < round.draws) {
      const int64_t c = unique_draw<Kind>(src, key, static_cast<uint64_t>(round.first_draw + i));
      keep = marks[c] == static_cast<unsigned>(i + 1);
    }
    const unsigned bits = __ballot_sync(cuda::kFullMask, keep);
    if (lane == 0) keep_bits[tile * kRoundWarps + warp] = bits;
    const int count = cuda::block_reduce<false>(static_cast<int>(keep), 0, warp_sums);
    if (threadIdx.x == 0) tile_rank[tile] = count;
  }
  // The fence publishes this block's counts before its arrival is counted; the block that
  // arrives last sees every count (threadFenceReduction's pattern).
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(&state->finished, 1ull) == gridDim.x - 1ull;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  rank_tiles(tile_rank, tiles, kept, round, state, warp_sums);
}

template <int64_t Kind>
__global__ void __launch_bounds__(kRoundThreads)
    round_write_kernel(DrawSource src, Round round, const RoundState* state,
                       const unsigned* keep_bits, const long long* tile_rank, unsigned* marks,
                       int64_t* out, int64_t* num_tries) {
  __shared__ int warp_sums[cuda::kWarp];
  if (state->ranked != round.index) return;  // the set was complete before this round
  const uint64_t key = static_cast<uint64_t>(src.seed[0]);
  const int64_t tiles = round_tiles(round);
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const long long first_rank = tile_rank[tile];
    if (first_rank >= round.num_sampled) continue;  // the same for the whole block
    const bool keep = (keep_bits[tile * kRoundWarps + warp] >> lane) & 1u;
    int tile_total = 0;
    const long long rank =
        first_rank + cuda::block_exclusive_scan(keep ? 1 : 0, &tile_total, warp_sums);
    if (keep && rank < round.num_sampled) {
      const int64_t i = tile * kRoundThreads + threadIdx.x;
      const int64_t c = unique_draw<Kind>(src, key, static_cast<uint64_t>(round.first_draw + i));
      out[rank] = c;
      marks[c] = kKept;  // one kept draw per class: no other thread writes this mark
      if (rank == round.num_sampled - 1) *num_tries = round.first_draw + i + 1;
    }
    __syncthreads();  // warp_sums is the next tile's
  }
}

}  // namespace
}  // namespace fastsoftmax
