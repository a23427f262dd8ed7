// CUDA word2vec training, in the two update orders of word2vec_math.h, with the argument
// struct of csrc/cpu/word2vec.cpp:
//  1. keep_kernel: every token's subsampling coin and window shrink (the Philox draws of the
//     CPU); the survivors are compacted, in order, into one stream of kept tokens with each
//     sentence's end and each token's sentence (device scans, no host synchronisation);
//  2. lockstep rounds (word2vec_rounds.cuh): rounds of R kept centres, each read at one
//     snapshot of the tables and applied at its end, so the result does not depend on the
//     warps' timing; or the sequential order on one warp (train_kernel), which replays the
//     CPU's single worker bit for bit and slowly, for tests and exact parity.
// The D coordinates of every vector are spread over the 32 lanes of a warp and dot products
// are reduced with shuffles.
//
// Shapes: V vocabulary, D vector size, N tokens, S sentences, W window, K negatives.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "../common/philox.h"
#include "../common/word2vec_host.h"
#include "cuda_utils.cuh"
#include "word2vec_rounds.cuh"

namespace fastsoftmax {
namespace {

using cuda::kFullMask;
using cuda::warp_sum;

constexpr int kWarpsPerBlock = 4;
// Dynamic shared memory a launch may take without an opt-in; larger vectors keep each
// warp's two scratch vectors in global memory instead.
constexpr size_t kSharedLimit = 48 * 1024;

using w2v::TrainParams;

__global__ void keep_kernel(const int32_t* tokens, const float* keep_prob, int64_t N,
                            uint64_t seed, uint64_t first_token, int window, bool shrink,
                            int32_t* keep, int32_t* win) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Philox4 r = philox_at(seed, kStreamW2vToken, first_token + i);
    keep[i] = w2v::keep_token(r, keep_prob[tokens[i]]) ? 1 : 0;
    win[i] = w2v::effective_window(r, window, shrink);
  }
}

// Writes each kept token at its place in the kept stream (kept_through: inclusive scan),
// with its sentence: the first s whose end lies past it.
__global__ void compact_kernel(const int32_t* tokens, const int32_t* keep, const int32_t* win,
                               const int64_t* kept_through, const int64_t* sentence_ends,
                               int64_t S, int64_t N, int32_t* kept_ids, int32_t* kept_win,
                               int64_t* kept_pos, int64_t* kept_sent) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (!keep[i]) continue;
    const int64_t at = kept_through[i] - 1;
    kept_ids[at] = tokens[i];
    kept_win[at] = win[i];
    kept_pos[at] = i;
    int64_t lo = 0, hi = S - 1;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (sentence_ends[mid] > i) hi = mid; else lo = mid + 1;
    }
    kept_sent[at] = lo;
  }
}

__device__ __forceinline__ int32_t draw_negative(const TrainParams& p, uint64_t counter) {
  const Philox4 r = philox_at(p.seed, kStreamW2vNegative, counter);
  return static_cast<int32_t>(alias_draw(r, p.ns_prob, p.ns_alias, p.V, p.ns_stride));
}

// One logistic unit: h (length D, lane-strided) should score row `out` as `label`; updates
// out, accumulates the input side's update in work; returns the unit's -log sigma.
__device__ __forceinline__ float update(const TrainParams& p, const float* h, float* out,
                                        float label, float alpha, float* work, int lane) {
  float part = 0.f;
  for (int64_t d = lane; d < p.D; d += 32) part += h[d] * out[d];
  const float f = warp_sum(part);
  const float g = w2v::prediction_error(label, f) * alpha;
  for (int64_t d = lane; d < p.D; d += 32) {
    const float o = out[d];
    work[d] += g * o;
    out[d] = o + g * h[d];
  }
  return w2v::neg_log_sigmoid(label > 0.5f ? f : -f);
}

// One prediction of `target` in word2vec.c's order: the steps of its Huffman path (hs), then
// the target and the K negatives of prediction `counter0` (negatives equal to the target
// skipped). Lanes draw 32 negatives at a time and broadcast them by shuffle.
__device__ float predict(const TrainParams& p, const float* h, int32_t target,
                         uint64_t counter0, float alpha, float* work, int lane) {
  float loss = 0.f;
  if (p.hs) {
    for (int64_t q = p.hs_offsets[target]; q < p.hs_offsets[target + 1]; ++q) {
      const int32_t step = p.hs_paths[q];  // the same address in every lane: a broadcast
      loss += update(p, h, p.syn1 + w2v::hs_node(step) * p.D, w2v::hs_label(step), alpha,
                     work, lane);
    }
  }
  if (p.negative == 0) return loss;
  loss += update(p, h, p.syn1neg + static_cast<int64_t>(target) * p.D, 1.f, alpha, work, lane);
  for (int kb = 0; kb < p.negative; kb += 32) {
    const int n = min(32, p.negative - kb);
    const int32_t mine = lane < n ? draw_negative(p, counter0 + kb + lane) : 0;
    for (int k = 0; k < n; ++k) {
      const int32_t t = __shfl_sync(kFullMask, mine, k);
      if (t == target) continue;
      loss += update(p, h, p.syn1neg + static_cast<int64_t>(t) * p.D, 0.f, alpha, work, lane);
    }
  }
  return loss;
}

// The sequential order, launched as one warp: the kept centres one after another, each
// prediction seeing every earlier update, as the CPU's single worker.
__global__ void train_kernel(TrainParams p) {
  FS_DYNAMIC_SHARED(float, smem);
  const int lane = threadIdx.x & 31;
  float* work = p.scratch ? p.scratch : smem;
  float* neu1 = work + p.D;
  const int64_t total = p.kept_end[p.S - 1];
  double loss = 0.0, examples = 0.0;
  const int W = p.window, K = p.negative;
  int64_t s = 0;
  for (int64_t c = 0; c < total; ++c) {
    while (p.kept_end[s] <= c) ++s;  // empty sentences have no kept positions
    const int64_t begin = s == 0 ? 0 : p.kept_end[s - 1];
    const int L = static_cast<int>(p.kept_end[s] - begin), i = static_cast<int>(c - begin);
    const int32_t* sen = p.kept_ids + begin;
    const float alpha = w2v::learning_rate(p.alpha, p.min_alpha,
                                           static_cast<double>(p.words_before[s]),
                                           p.total_words);
    const int win = p.kept_win[c];
    const int lo = max(0, i - win), hi = min(L, i + win + 1);
    const int contexts = hi - lo - 1;
    if (contexts <= 0) continue;
    const uint64_t gid = p.first_token + static_cast<uint64_t>(p.kept_pos[c]);
    if (p.sg) {
      int k = 0;
      for (int j = lo; j < hi; ++j) {
        if (j == i) continue;
        float* in = p.syn0 + static_cast<int64_t>(sen[j]) * p.D;
        for (int64_t d = lane; d < p.D; d += 32) work[d] = 0.f;
        const uint64_t counter = (gid * static_cast<uint64_t>(2 * W) + k) * K;
        loss += predict(p, in, sen[i], counter, alpha, work, lane);
        const float lock = w2v::lock_factor(p, sen[j]);
        for (int64_t d = lane; d < p.D; d += 32) in[d] += lock * work[d];
        ++k;
        examples += 1;
      }
    } else {
      for (int64_t d = lane; d < p.D; d += 32) {
        float h = 0.f;
        for (int j = lo; j < hi; ++j)
          if (j != i) h += p.syn0[static_cast<int64_t>(sen[j]) * p.D + d];
        neu1[d] = p.cbow_mean ? h / contexts : h;
        work[d] = 0.f;
      }
      loss += predict(p, neu1, sen[i], gid * K, alpha, work, lane);
      const float scale = p.cbow_mean ? 1.f : 1.f / contexts;
      for (int j = lo; j < hi; ++j) {
        if (j == i) continue;
        float* row = p.syn0 + static_cast<int64_t>(sen[j]) * p.D;
        const float step = scale * w2v::lock_factor(p, sen[j]);
        for (int64_t d = lane; d < p.D; d += 32) row[d] += step * work[d];
      }
      examples += 1;
    }
    __syncwarp();
  }
  if (lane == 0) {
    atomicAdd(p.stats + 0, loss);
    atomicAdd(p.stats + 1, examples);
  }
}

// The kept stream of a batch (keep_kernel, compact_kernel) into p.kept_*; returns the
// tensors behind those pointers. kept_through[i] = kept tokens among 0..i, stored after a
// leading 0 so that kept_end (kept tokens through each sentence) is one gather at the
// sentence ends, an empty first sentence included.
std::vector<Tensor> keep_tokens(TrainParams& p, const Tensor& tokens, const Tensor& keep_prob,
                                const Tensor& sentence_ends) {
  const Device device = tokens.device();
  const int64_t N = p.N;
  Tensor keep = empty({N}, kInt, device), win = empty({N}, kInt, device);
  FS_LAUNCH(keep_kernel, cuda::blocks_for(N, cuda::kThreads), cuda::kThreads, 0,
            data<int32_t>(tokens), data<float>(keep_prob), N, p.seed, p.first_token, p.window,
            p.shrink, data<int32_t>(keep), data<int32_t>(win));
  Tensor kept_through0 = zeros({N + 1}, kLong, device);
  Tensor kept_through = torch::stable::narrow(kept_through0, 0, 1, N);
  call("aten::cumsum", "out", keep, int64_t{0}, std::optional<ScalarType>(kLong), kept_through);
  Tensor kept_ids = empty({N}, kInt, device), kept_win = empty({N}, kInt, device);
  Tensor kept_pos = empty({N}, kLong, device), kept_sent = empty({N}, kLong, device);
  FS_LAUNCH(compact_kernel, cuda::blocks_for(N, cuda::kThreads), cuda::kThreads, 0,
            data<int32_t>(tokens), data<int32_t>(keep), data<int32_t>(win),
            data<int64_t>(kept_through), data<int64_t>(sentence_ends), p.S, N,
            data<int32_t>(kept_ids), data<int32_t>(kept_win), data<int64_t>(kept_pos),
            data<int64_t>(kept_sent));
  Tensor kept_end = call("aten::index_select", "", kept_through0, int64_t{0}, sentence_ends);
  p.kept_ids = data<int32_t>(kept_ids);
  p.kept_win = data<int32_t>(kept_win);
  p.kept_pos = data<int64_t>(kept_pos);
  p.kept_sent = data<int64_t>(kept_sent);
  p.kept_end = data<int64_t>(kept_end);
  return {kept_ids, kept_win, kept_pos, kept_sent, kept_end};
}

// Dynamic shared bytes of a block of `warps_per_block` warps: each warp's scratch (work and
// h, 2 D floats), or 0 when that is more than a launch may take without an opt-in and the
// scratch lives in global memory (warp_scratch).
size_t scratch_smem(const TrainParams& p, int warps_per_block) {
  const size_t smem = static_cast<size_t>(warps_per_block) * 2 * p.D * sizeof(float);
  return smem <= kSharedLimit ? smem : 0;
}

// Allocates the global-memory scratch of `warps` warps when the launch takes none in shared
// memory. Returns the dynamic shared bytes of a block.
size_t warp_scratch(TrainParams& p, int64_t warps, int warps_per_block, Tensor& scratch,
                    const Device& device) {
  const size_t smem = scratch_smem(p, warps_per_block);
  if (smem > 0 || p.D == 0) return smem;
  scratch = empty({warps, 2, p.D}, kFloat, device);
  p.scratch = data<float>(scratch);
  return 0;
}

__global__ void finish_kernel(const unsigned long long* sums, double* stats) {
  stats[0] = static_cast<double>(sums[0]) / w2v_rounds::kLossOne;
  stats[1] = static_cast<double>(sums[1]);
}

// Rounds of p.round_size centres over the `total` kept centres, summing in Acc (float, or
// unsigned long long: fixed point). At most num_workers warps a launch.
template <class Acc>
void train_rounds(TrainParams& p, int64_t total, int64_t num_workers, const Tensor& stats,
                  const Device& device) {
  using namespace w2v_rounds;
  const ScalarType acc_type = std::is_same<Acc, float>::value ? kFloat : kLong;
  const int64_t neg_rows = p.negative > 0 ? p.V : 0, rows = p.V + neg_rows + (p.hs ? p.V - 1 : 0);
  Tensor delta = zeros({rows, p.D}, acc_type, device), bound = zeros({rows}, acc_type, device);
  Tensor mark = zeros({rows}, kInt, device), touched = empty({rows}, kLong, device);
  Tensor sums = zeros({4}, kLong, device);  // touched counts (even, odd rounds), loss, examples
  RoundState<Acc> st{reinterpret_cast<Acc*>(delta.data_ptr()),
                     reinterpret_cast<Acc*>(bound.data_ptr()),
                     reinterpret_cast<unsigned*>(data<int32_t>(mark)), data<int64_t>(touched),
                     reinterpret_cast<unsigned long long*>(data<int64_t>(sums)),
                     reinterpret_cast<unsigned long long*>(data<int64_t>(sums)) + 2, p.V,
                     p.V + neg_rows};
  // Work items: a CBOW centre, or a skip-gram (centre, context slot).
  const int64_t items = p.round_size * (p.sg ? 2 * p.window : 1);
  const int warps_per_block = static_cast<int>(std::min<int64_t>(kWarpsPerBlock, num_workers));
  // Occupancy of the launch made: with the scratch in global memory, no shared memory.
  const int64_t resident_warps =
      int64_t{cuda::multiprocessor_count()} * warps_per_block *
      cuda::resident_blocks_per_sm(round_kernel<Acc>, warps_per_block * 32,
                                   scratch_smem(p, warps_per_block));
  const int64_t warps = std::max<int64_t>(1, std::min({items, num_workers, resident_warps}));
  const int blocks = static_cast<int>((warps + warps_per_block - 1) / warps_per_block);
  Tensor scratch;
  const size_t smem = warp_scratch(p, int64_t{blocks} * warps_per_block, warps_per_block,
                                   scratch, device);
  const int apply_blocks = static_cast<int>(std::min<int64_t>(
      4 * int64_t{cuda::multiprocessor_count()}, cuda::blocks_for(rows, cuda::kThreads / 32)));
  for (int64_t first = 0, round = 0; first < total; first += p.round_size, ++round) {
    const int parity = static_cast<int>(round & 1);
    FS_LAUNCH(round_kernel<Acc>, blocks, warps_per_block * 32, smem, p, st, first,
              std::min(total, first + p.round_size), parity);
    FS_LAUNCH(apply_kernel<Acc>, apply_blocks, cuda::kThreads, 0, p, st, parity);
  }
  FS_LAUNCH(finish_kernel, 1, 1, 0, st.stats, data<double>(stats));
}

Tensor word2vec_train_cuda(const Tensor& syn0, const Tensor& syn1neg, const Tensor& tokens,
                           const Tensor& sentence_ends, const Tensor& words_before,
                           const Tensor& keep_prob, const Tensor& ns_prob, const Tensor& ns_alias,
                           int64_t seed, int64_t first_token, bool sg, bool cbow_mean,
                           int64_t window, int64_t negative, bool shrink_windows, double alpha,
                           double min_alpha, double total_words, int64_t num_workers,
                           const Tensor& syn1, const Tensor& hs_paths, const Tensor& hs_offsets,
                           const Tensor& lockf, bool hs, int64_t round_size,
                           bool deterministic) {
  TrainParams p = w2v::prepare_train(
      syn0, syn1neg, tokens, sentence_ends, words_before, keep_prob, ns_prob, ns_alias, seed,
      first_token, sg, cbow_mean, window, negative, shrink_windows, alpha, min_alpha,
      total_words, num_workers, syn1, hs_paths, hs_offsets, lockf, hs, round_size);
  FS_CHECK_VALUE(round_size > 0 || num_workers == 1,
                 "word2vec_train: on CUDA the sequential order (round_size 0) runs on one warp: "
                 "give num_workers = 1, or round_size > 0 for lockstep rounds (Hogwild across "
                 "warps is gone: its quality depended on timing), got num_workers ",
                 num_workers);
  const cuda::DeviceGuard guard(syn0.device());
  const Device device = syn0.device();
  Tensor stats = zeros({3}, kDouble, device);
  if (p.S == 0 || p.N == 0) return stats;
  std::vector<Tensor> kept = keep_tokens(p, tokens, keep_prob, sentence_ends);
  Tensor kept_total = torch::stable::narrow(kept.back(), 0, p.S - 1, 1);
  Tensor stats_kept = torch::stable::narrow(stats, 0, 2, 1);
  torch::stable::copy_(stats_kept, kept_total);
  if (round_size > 0) {
    // The rounds are launched from the host: one read of the kept count per batch.
    const int64_t total = data<int64_t>(to_cpu(kept_total))[0];
    if (deterministic) train_rounds<unsigned long long>(p, total, num_workers, stats, device);
    else train_rounds<float>(p, total, num_workers, stats, device);
    return stats;
  }
  Tensor scratch;
  const size_t smem = warp_scratch(p, 1, 1, scratch, device);
  p.stats = data<double>(stats);
  FS_LAUNCH(train_kernel, 1, 32, smem, p);
  return stats;
}

}  // namespace

FS_CUDA_IMPL(m) { m.impl("word2vec_train", TORCH_BOX(&word2vec_train_cuda)); }

}  // namespace fastsoftmax
