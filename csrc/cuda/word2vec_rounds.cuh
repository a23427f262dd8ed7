// word2vec's lockstep rounds on CUDA (the update order of word2vec_math.h; the CPU replays it
// in csrc/cpu/word2vec_rounds.cpp). Per round two launches:
//  1. round_kernel: one warp per CBOW centre, or per skip-gram (centre, context) pair, reads
//     the tables (unchanged during the round) and adds its updates to a delta table beside
//     them, with each row's bound; a row's first update of the round lists it as touched;
//  2. apply_kernel: one warp per touched row: row += round_damping(L) * delta, then clears
//     the row's delta, bound and mark.
// The tables are the rows of syn0, then syn1neg, then syn1, numbered in one sequence of
// global rows. Updates are summed with float atomics, or (deterministic) in 64-bit fixed
// point, whose integer sums do not depend on the order in which the warps arrive.
#pragma once

#include "../common/philox.h"
#include "../common/word2vec_math.h"
#include "cuda_utils.cuh"

namespace fastsoftmax {
namespace w2v_rounds {

using cuda::kFullMask;
using w2v::TrainParams;

// Fixed point: 2^-32 resolution, far below a float32 weight's last bit, and sums up to
// 2^31. Sums that cannot be kept exactly poison their row, which the apply step sets to NaN
// (the run has diverged: deterministic mode says so rather than return wrapped-around sums):
//  - a single update of 2^20 or more, or NaN;
//  - updates that together could leave the range: 2^11 updates of 2^20 would wrap a sum
//    silently. So each row also counts its size in the round, the sum over its updates of
//    ceil(the largest |value| the update adds, to a coordinate or to the bound), and is
//    poisoned when that reaches 2^29: every sum of the row then stays below 2^29 in value.
//    The count bounds the sums whatever their signs, and grows in integers, so which rows
//    are poisoned does not depend on the order of the warps. (Ceil makes each update count
//    at least 1: a healthy row would need 2^29 updates in one round to reach the limit.)
constexpr float kFixedOne = 4294967296.0f;  // 2^32
constexpr float kFixedStep = 1.0f / kFixedOne;
constexpr float kFixedLimit = 1048576.0f;    // 2^20
constexpr float kBoundLimit = 65536.0f;      // a bound beyond this leaves the row still anyway
// The mark of a row: two flags, and above them (bits 2..31) the row's size, which stays below
// 2^29 + 2^20 until the row is poisoned, so it never carries into the flags or wraps first.
constexpr unsigned kTouched = 1, kPoisoned = 2, kSizeShift = 2;
constexpr unsigned kSizeLimit = 1u << 29;
constexpr double kLossOne = 16777216.0;      // the loss: 2^-24, sums of up to 2^39

// Global rows: [0, V) syn0, then syn1neg (negative > 0), then the V - 1 rows of syn1 (hs).
template <class Acc>
struct RoundState {
  Acc* delta;                 // [rows, D] summed updates of the round
  Acc* bound;                 // [rows] summed bounds L
  unsigned* mark;             // [rows] kTouched | kPoisoned | size << kSizeShift
  int64_t* touched;           // [rows] the touched rows of the round, in arrival order
  unsigned long long* count;  // [2] touched rows of the even and the odd rounds
  unsigned long long* stats;  // [2] loss (fixed point) and positive predictions
  int64_t neg_base, hs_base;  // global row of syn1neg row 0, of syn1 row 0
};

__device__ __forceinline__ void accumulate(float* acc, float v, unsigned*) { atomicAdd(acc, v); }
__device__ __forceinline__ void accumulate(unsigned long long* acc, float v, unsigned* mark) {
  if (!(fabsf(v) < kFixedLimit)) {
    atomicOr(mark, kPoisoned);
    return;
  }
  atomicAdd(acc, static_cast<unsigned long long>(llrintf(v * kFixedOne)));
}
__device__ __forceinline__ float value(float a) { return a; }
__device__ __forceinline__ float value(unsigned long long a) {
  return static_cast<float>(static_cast<long long>(a)) * kFixedStep;
}

// The sums over the lanes of two values at once (one 64-bit shuffle a step).
__device__ __forceinline__ void warp_sum2(float& a, float& b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long both =
        (static_cast<unsigned long long>(__float_as_uint(a)) << 32) | __float_as_uint(b);
    const unsigned long long other = __shfl_xor_sync(kFullMask, both, o);
    a += __uint_as_float(static_cast<unsigned>(other >> 32));
    b += __uint_as_float(static_cast<unsigned>(other));
  }
}

// Float sums need no size (they overflow to inf by themselves).
__device__ __forceinline__ void add_size(float*, unsigned*, float, int) {}
// Fixed point: the row's size grows by ceil(largest), the largest |value| of the update over
// the lanes (called by the whole warp); the add that takes it to kSizeLimit poisons the row.
// An update of kFixedLimit or more (or NaN) has poisoned the row already and is not counted.
__device__ __forceinline__ void add_size(unsigned long long*, unsigned* mark, float largest,
                                         int lane) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    largest = fmaxf(largest, __shfl_xor_sync(kFullMask, largest, o));
  if (lane != 0 || !(largest < kFixedLimit)) return;
  const unsigned size = static_cast<unsigned>(ceilf(largest));
  const unsigned before = atomicAdd(mark, size << kSizeShift) >> kSizeShift;
  if (before < kSizeLimit && before + size >= kSizeLimit) atomicOr(mark, kPoisoned);
}

// delta[row] += c * x (x lane-strided, length D); the row's bound grows by `bound`, and its
// first update of the round lists it.
template <class Acc>
__device__ void add_row(const RoundState<Acc>& st, int64_t D, int parity, int64_t row,
                        const float* x, float c, float bound, int lane) {
  Acc* delta = st.delta + row * D;
  bound = fminf(bound, kBoundLimit);
  float largest = bound;
  for (int64_t d = lane; d < D; d += 32) {
    const float v = c * x[d];
    accumulate(delta + d, v, st.mark + row);
    largest = fmaxf(largest, fabsf(v));
  }
  add_size(st.delta, st.mark + row, largest, lane);
  if (lane == 0) {
    accumulate(st.bound + row, bound, st.mark + row);
    if (!(atomicOr(st.mark + row, kTouched) & kTouched))
      st.touched[atomicAdd(st.count + parity, 1ull)] = row;
  }
}

// The warp's running sums: the loss and the predictions made.
struct Tally {
  double loss = 0.0;
  unsigned long long examples = 0;
};

// One logistic unit at the snapshot: `in` (|in|^2 = in_sq) should score row `row` of `table`
// (global row `grow`) as `label`. The row's delta takes g * in, work takes g * out, in_bound
// the input's share of the bound. Outside (-6, 6) nothing moves (gensim's rule).
template <class Acc>
__device__ void unit(const RoundState<Acc>& st, const TrainParams& p, int parity,
                     const float* in, float in_sq, const float* table, int64_t row,
                     int64_t grow, float label, float alpha, float* work, float& in_bound,
                     Tally& tally, int lane) {
  const float* out = table + row * p.D;
  float f = 0.f, out_sq = 0.f;
  for (int64_t d = lane; d < p.D; d += 32) {
    const float o = out[d];
    f += in[d] * o;
    out_sq += o * o;
  }
  warp_sum2(f, out_sq);
  tally.loss += w2v::neg_log_sigmoid(label > 0.5f ? f : -f);
  if (w2v::outside_logistic_range(f)) return;
  const float g = (label - w2v::sigmoid(f)) * alpha;
  in_bound += w2v::round_bound(alpha, out_sq);
  for (int64_t d = lane; d < p.D; d += 32) work[d] += g * out[d];
  add_row(st, p.D, parity, grow, in, g, w2v::round_bound(alpha, in_sq), lane);
}

// One prediction of `target` from `in`, the units in the sequential trainer's order; the
// K negatives are those of Philox counters counter0 .. counter0 + K - 1, drawn 32 at a time
// by the lanes and broadcast.
template <class Acc>
__device__ void predict(const RoundState<Acc>& st, const TrainParams& p, int parity,
                        const float* in, int32_t target, uint64_t counter0, float alpha,
                        float* work, float& in_bound, Tally& tally, int lane) {
  float in_sq = 0.f, unused = 0.f;
  for (int64_t d = lane; d < p.D; d += 32) in_sq += in[d] * in[d];
  warp_sum2(in_sq, unused);
  if (p.hs)
    for (int64_t q = p.hs_offsets[target]; q < p.hs_offsets[target + 1]; ++q) {
      const int32_t step = p.hs_paths[q];
      const int64_t node = w2v::hs_node(step);
      unit(st, p, parity, in, in_sq, p.syn1, node, st.hs_base + node, w2v::hs_label(step),
           alpha, work, in_bound, tally, lane);
    }
  if (p.negative == 0) return;
  unit(st, p, parity, in, in_sq, p.syn1neg, target, st.neg_base + target, 1.f, alpha, work,
       in_bound, tally, lane);
  for (int kb = 0; kb < p.negative; kb += 32) {
    const int n = min(32, p.negative - kb);
    int32_t mine = 0;
    if (lane < n) {
      const Philox4 r = philox_at(p.seed, kStreamW2vNegative, counter0 + kb + lane);
      mine = static_cast<int32_t>(alias_draw(r, p.ns_prob, p.ns_alias, p.V, p.ns_stride));
    }
    for (int k = 0; k < n; ++k) {
      const int32_t t = __shfl_sync(kFullMask, mine, k);
      if (t != target)
        unit(st, p, parity, in, in_sq, p.syn1neg, t, st.neg_base + t, 0.f, alpha, work,
             in_bound, tally, lane);
    }
  }
}

// Centres [first, last) of the kept stream. A work item is a CBOW centre, or a skip-gram
// (centre, k) with k < 2W: the centre's k-th context, if its shrunk window has one.
template <class Acc>
__global__ void round_kernel(TrainParams p, RoundState<Acc> st, int64_t first, int64_t last,
                             int parity) {
  FS_DYNAMIC_SHARED(float, smem);
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const int warps_per_block = static_cast<int>(blockDim.x >> 5);
  const int64_t warp = blockIdx.x * static_cast<int64_t>(warps_per_block) + wib;
  float* work = p.scratch ? p.scratch + warp * 2 * p.D : smem + wib * 2 * p.D;
  float* h = work + p.D;
  const int W = p.window, K = p.negative;
  const int64_t per_centre = p.sg ? 2 * W : 1;
  const int64_t items = (last - first) * per_centre;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * warps_per_block;
  Tally tally;
  for (int64_t item = warp; item < items; item += warps) {
    const int64_t c = first + item / per_centre;
    const int k = static_cast<int>(item % per_centre);
    const int64_t s = p.kept_sent[c];
    const int64_t begin = s == 0 ? 0 : p.kept_end[s - 1];
    const int L = static_cast<int>(p.kept_end[s] - begin), i = static_cast<int>(c - begin);
    const int32_t* sen = p.kept_ids + begin;
    const int lo = max(0, i - p.kept_win[c]), hi = min(L, i + p.kept_win[c] + 1);
    const int contexts = hi - lo - 1;
    if (k >= contexts) continue;  // also: no context at all
    const float alpha = w2v::learning_rate(
        p.alpha, p.min_alpha, static_cast<double>(p.words_before[s]), p.total_words);
    const uint64_t gid = p.first_token + static_cast<uint64_t>(p.kept_pos[c]);
    for (int64_t d = lane; d < p.D; d += 32) work[d] = 0.f;
    float bound = 0.f;
    if (p.sg) {
      const int j = lo + k + (lo + k >= i ? 1 : 0);
      predict(st, p, parity, p.syn0 + static_cast<int64_t>(sen[j]) * p.D, sen[i],
              (gid * static_cast<uint64_t>(2 * W) + k) * K, alpha, work, bound, tally, lane);
      add_row(st, p.D, parity, sen[j], work, w2v::lock_factor(p, sen[j]), bound, lane);
    } else {
      const float inv = 1.f / static_cast<float>(contexts);
      for (int64_t d = lane; d < p.D; d += 32) {
        float sum = 0.f;
        for (int j = lo; j < hi; ++j)
          if (j != i) sum += p.syn0[static_cast<int64_t>(sen[j]) * p.D + d];
        h[d] = p.cbow_mean ? sum * inv : sum;
      }
      predict(st, p, parity, h, sen[i], gid * K, alpha, work, bound, tally, lane);
      // Each context row takes work (mean: the 1/count is in h) or work / count (sum).
      const float scale = p.cbow_mean ? 1.f : inv;
      for (int j = lo; j < hi; ++j)
        if (j != i)
          add_row(st, p.D, parity, sen[j], work, scale * w2v::lock_factor(p, sen[j]),
                  bound * inv, lane);
    }
    ++tally.examples;
    __syncwarp();
  }
  if (lane == 0) {
    atomicAdd(st.stats, static_cast<unsigned long long>(llrint(tally.loss * kLossOne)));
    atomicAdd(st.stats + 1, tally.examples);
  }
}

// Ends a round: every touched row moves by round_damping(L) times its delta; its delta,
// bound and mark are cleared, and the next round's counter is zeroed (its last user, the
// round before, has ended).
template <class Acc>
__global__ void apply_kernel(TrainParams p, RoundState<Acc> st, int parity) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  const int64_t n = static_cast<int64_t>(st.count[parity]);
  for (int64_t t = warp; t < n; t += warps) {
    const int64_t row = st.touched[t];
    float* table = row < st.neg_base ? p.syn0 + row * p.D
                   : row < st.hs_base ? p.syn1neg + (row - st.neg_base) * p.D
                                      : p.syn1 + (row - st.hs_base) * p.D;
    const float step = (st.mark[row] & kPoisoned) ? NAN : w2v::round_damping(value(st.bound[row]));
    Acc* delta = st.delta + row * p.D;
    for (int64_t d = lane; d < p.D; d += 32) {
      table[d] += step * value(delta[d]);
      delta[d] = Acc{};
    }
    __syncwarp();
    if (lane == 0) {
      st.bound[row] = Acc{};
      st.mark[row] = 0;
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) st.count[parity ^ 1] = 0;
}

}  // namespace w2v_rounds
}  // namespace fastsoftmax
