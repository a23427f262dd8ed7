// Unique candidate sampling on CUDA: TensorFlow's rejection loop, with the same ids in the
// same order and the same num_tries as the CPU's (csrc/cpu/sampler.cpp), draw for draw.
//
// Draw i of the unique stream is a pure function of i (philox.h), so the loop's result is a
// property of the sequence: draw i is kept iff no earlier draw has its class, at the position
// given by the number of kept draws before it; num_tries is the index of the draw of position
// num_sampled - 1, plus one. Two schemes compute it:
//  - one block (the default, and the only one below kMultiBlockFrom): 1024 draws a round, a
//    shared hash finds each class's first draw in the round, a bitmap the classes kept
//    before, a block scan the positions. One launch, but one round at a time: S = 8192
//    log-uniform candidates over 10^6 classes need about 16 rounds, each a chain of global
//    reads and block barriers.
//  - many blocks (unique_rounds.cuh), from kMultiBlockFrom candidates when asked for
//    (rounds_requested): rounds of 4 S, 16 S and 64 S draws over the whole grid, three
//    kernels each. S = 8192 over 10^6 classes needs about 1.9 S draws for log-uniform,
//    1.2 S for unigram^0.75 and S for uniform, so the first round almost always completes
//    the set and the rest exit at once. Any draws still needed (84 S draws were not enough:
//    barely S classes of non-negligible probability) are the single block's, from the
//    rounds' state, up to the give-up limit.
// The launches are the same whatever the draws (a CUDA graph can hold them), and nothing is
// read back unless the give-up check is immediate (checks_read_back()).
#include <algorithm>
#include <climits>
#include <cstdlib>

#include "../common/philox.h"
#include "../common/sampler_host.h"
#include "cuda_utils.cuh"
#include "sampler_draws.cuh"
#include "unique_rounds.cuh"

namespace fastsoftmax {
namespace {

// ---- one block ------------------------------------------------------------------------------

constexpr int kUniqueThreads = 1024;
constexpr int kHashSlots = 2048;  // power of two, twice the draws of a round

// "Kept earlier" for the single block: a bitmap on its own path (V / 8 bytes to clear), the
// rounds' marks when it finishes their work.
struct SeenBits {
  unsigned long long* bits;
  __device__ bool has(int64_t c) const { return (bits[c >> 6] >> (c & 63)) & 1ull; }
  __device__ void add(int64_t c) const { atomicOr(&bits[c >> 6], 1ull << (c & 63)); }
};
struct SeenMarks {
  unsigned* marks;
  __device__ bool has(int64_t c) const { return marks[c] == kKept; }
  __device__ void add(int64_t c) const { marks[c] = kKept; }  // kept once: one writer
};

// Replays the loop from draw first_draw with *kept_before candidates found (none when
// nullptr), 1024 draws a round: a draw is kept when its class was not kept before and no
// lower-numbered draw of the round has it; a block scan ranks the kept draws in draw order.
template <int64_t Kind, class Seen>
__global__ void __launch_bounds__(kUniqueThreads)
    sample_unique_kernel(DrawSource src, int64_t num_sampled, uint64_t first_draw,
                         const long long* kept_before, Seen seen, int64_t* out,
                         int64_t* num_tries) {
  __shared__ unsigned long long keys[kHashSlots];
  __shared__ int first_in_round[kHashSlots];
  __shared__ int warp_sums[32];
  __shared__ long long kept_so_far;
  const int t = threadIdx.x;
  const uint64_t key = static_cast<uint64_t>(src.seed[0]);
  constexpr unsigned long long kEmpty = ~0ull;
  if (t == 0) kept_so_far = kept_before != nullptr ? *kept_before : 0;
  for (uint64_t base = first_draw;; base += kUniqueThreads) {
    for (int k = t; k < kHashSlots; k += blockDim.x) {
      keys[k] = kEmpty;
      first_in_round[k] = INT_MAX;
    }
    __syncthreads();
    const long long kept = kept_so_far;
    if (kept >= num_sampled) break;  // uniform across the block
    if (base >= kMaxUniqueTries) {   // give up (see philox.h); also uniform
      for (long long k = kept + t; k < num_sampled; k += blockDim.x) out[k] = -1;
      if (t == 0) *num_tries = -1;
      break;
    }
    const int64_t c = unique_draw<Kind>(src, key, base + t);
    const bool seen_before = seen.has(c);
    unsigned slot =
        static_cast<unsigned>((static_cast<uint64_t>(c) * 0x9E3779B97F4A7C15ull) >> 53) &
        (kHashSlots - 1);
    while (true) {
      const unsigned long long prev =
          atomicCAS(&keys[slot], kEmpty, static_cast<unsigned long long>(c));
      if (prev == kEmpty || prev == static_cast<unsigned long long>(c)) break;
      slot = (slot + 1) & (kHashSlots - 1);
    }
    atomicMin(&first_in_round[slot], t);
    __syncthreads();
    const int is_new = (!seen_before && first_in_round[slot] == t) ? 1 : 0;
    int new_in_round = 0;
    const int rank = cuda::block_exclusive_scan(is_new, &new_in_round, warp_sums);
    if (is_new && kept + rank < num_sampled) {
      out[kept + rank] = c;
      seen.add(c);
      if (kept + rank == num_sampled - 1) *num_tries = static_cast<int64_t>(base + t + 1);
    }
    __syncthreads();
    if (t == 0) kept_so_far = kept + new_in_round;
  }
}

// ---- many blocks ----------------------------------------------------------------------------

// The crossover is static (num_sampled, and the switch of rounds_requested), as a CUDA graph
// needs. Below 4 rounds of the single block its one launch wins; from there on, its chain of
// rounds (more for a skewed distribution) is expected to cost more than the rounds' dozen
// launches. Not yet measured on a GPU: hence the switch.
constexpr int64_t kMultiBlockFrom = 4 * kUniqueThreads;
constexpr int kRounds = 3;
constexpr int64_t kFirstRoundPerSample = 4;  // draws of round 1 per candidate
constexpr int64_t kRoundGrowth = 4;
constexpr int64_t kMaxRoundDraws = int64_t{1} << 30;
constexpr int64_t kMaxRoundBlocks = 1024;  // more tiles: the blocks loop over them

struct RoundPlan {
  Round round[kRounds];
  int count = 0;
  int64_t draws = 0;      // the rounds' draws together: the single block goes on from there
  int64_t max_tiles = 0;
};

RoundPlan plan_rounds(int64_t num_sampled) {
  RoundPlan plan;
  int64_t draws = kFirstRoundPerSample * num_sampled;
  for (int r = 0; r < kRounds; ++r, draws *= kRoundGrowth) {
    const int64_t left = static_cast<int64_t>(kMaxUniqueTries) - plan.draws;
    const int64_t n = std::min({draws, kMaxRoundDraws, left});
    if (n <= 0) break;
    plan.round[plan.count++] = Round{r + 1, plan.draws, n, num_sampled};
    plan.draws += n;
    plan.max_tiles = std::max(plan.max_tiles, (n + kRoundThreads - 1) / kRoundThreads);
  }
  return plan;
}

template <int64_t Kind>
void unique_in_rounds(const DrawSource& src, int64_t num_sampled, int64_t* out,
                      int64_t* num_tries, const Device& device) {
  const RoundPlan plan = plan_rounds(num_sampled);
  const Tensor marks = full({src.num_classes}, -1.0, kInt, device);  // kNeverDrawn
  const Tensor state = zeros({sizeof(RoundState) / sizeof(int64_t)}, kLong, device);
  const Tensor keep_bits = empty({plan.max_tiles * kRoundWarps}, kInt, device);
  const Tensor tile_rank = empty({plan.max_tiles}, kLong, device);
  auto* m = reinterpret_cast<unsigned*>(data<int32_t>(marks));
  auto* s = reinterpret_cast<RoundState*>(data<int64_t>(state));
  auto* bits = reinterpret_cast<unsigned*>(data<int32_t>(keep_bits));
  auto* ranks = reinterpret_cast<long long*>(data<int64_t>(tile_rank));
  for (int r = 0; r < plan.count; ++r) {
    const Round& round = plan.round[r];
    const int64_t grid = std::min((round.draws + kRoundThreads - 1) / kRoundThreads,
                                  kMaxRoundBlocks);
    FS_LAUNCH(round_mark_kernel<Kind>, grid, kRoundThreads, 0, src, round, s, m);
    FS_LAUNCH(round_count_kernel<Kind>, grid, kRoundThreads, 0, src, round, s, m, bits, ranks);
    FS_LAUNCH(round_write_kernel<Kind>, grid, kRoundThreads, 0, src, round, s, bits, ranks, m,
              out, num_tries);
  }
  const long long* kept = &s->kept;
  FS_LAUNCH((sample_unique_kernel<Kind, SeenMarks>), 1, kUniqueThreads, 0, src, num_sampled,
            static_cast<uint64_t>(plan.draws), kept, SeenMarks{m}, out, num_tries);
}

// ---- the op ---------------------------------------------------------------------------------

// A new CUDA path replaces a measured one as the default only once a GPU run has committed its
// rows (docs/samplers.md). The single block ran on an H200 (it drew the S = 8192 candidates
// of the sampled softmax rows of 2026-11-26); the rounds have not run on a GPU, so they are
// taken only when asked for, from kMultiBlockFrom candidates: FASTSOFTMAX_UNIQUE_ROUNDS=1
// (read at each call, so a benchmark or a test can time or check both).
bool rounds_requested() {
  const char* value = std::getenv("FASTSOFTMAX_UNIQUE_ROUNDS");
  return value != nullptr && value[0] == '1' && value[1] == '\0';
}

std::tuple<Tensor, Tensor> sample_unique_cuda(const Tensor& prob, const Tensor& alias,
                                              const Tensor& seed, int64_t num_classes,
                                              int64_t kind, int64_t num_sampled) {
  const TableStrides stride = check_sample_args(prob, alias, seed, num_classes, kind);
  check_num_sampled(num_sampled, num_classes);
  const cuda::DeviceGuard guard(seed.device());
  const Device device = seed.device();
  Tensor out = empty({num_sampled}, kLong, device);
  Tensor tries = empty({}, kLong, device);
  const DrawSource src{prob_ptr(prob, kind), alias_ptr(alias, kind), stride,
                       data<int64_t>(seed), num_classes};
  int64_t* o = data<int64_t>(out);
  int64_t* nt = data<int64_t>(tries);
  with_kind(kind, [&](auto k) {
    constexpr int64_t K = decltype(k)::value;
    if (num_sampled >= kMultiBlockFrom && rounds_requested()) {
      unique_in_rounds<K>(src, num_sampled, o, nt, device);
      return;
    }
    const Tensor seen = zeros({(num_classes + 63) / 64}, kLong, device);
    const SeenBits bits{reinterpret_cast<unsigned long long*>(data<int64_t>(seen))};
    FS_LAUNCH((sample_unique_kernel<K, SeenBits>), 1, kUniqueThreads, 0, src, num_sampled,
              uint64_t{0}, static_cast<const long long*>(nullptr), bits, o, nt);
  });
  // Both schemes give up as the CPU does (kMaxUniqueTries draws) with num_tries -1. One host
  // synchronisation raises the CPU's error instead of handing on ids of -1, unless the
  // checks are deferred: the op wrapper then keeps num_tries < 0 as a device flag.
  if (checks_read_back()) check_unique_found(sampler::item<int64_t>(tries) >= 0, num_sampled);
  return {out, tries};
}

}  // namespace

FS_CUDA_IMPL(m) { m.impl("sample_unique", TORCH_BOX(&sample_unique_cuda)); }

}  // namespace fastsoftmax
