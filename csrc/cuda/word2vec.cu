// CUDA word2vec training: the same Hogwild SGD as csrc/cpu/word2vec.cpp (hierarchical
// softmax, negative sampling or both), with the same argument struct. Two kernels:
//  1. keep_kernel: every token's subsampling coin and window shrink (the Philox draws of the
//     CPU, csrc/common/word2vec_math.h); the survivors are compacted, in order, into one stream of
//     kept tokens with each sentence's end in it (device scans, no host synchronisation);
//  2. train_kernel: warps take segments of kSegment consecutive centres of that stream, so a
//     corpus of one long line fills the GPU as well as one of many short sentences. A centre's
//     window reads its neighbours within its own sentence, across segment edges; the D
//     coordinates of every vector are spread over the 32 lanes and dot products are reduced
//     with shuffles. Warps update the tables concurrently, as Hogwild allows; one worker (one
//     warp, segments in order) replays the CPU's single worker.
//
// Shapes: V vocabulary, D vector size, N tokens, S sentences, W window, K negatives.
#include <algorithm>

#include "../common/philox.h"
#include "../common/word2vec_host.h"
#include "cuda_utils.cuh"

namespace fastsoftmax {
namespace {

using cuda::kFullMask;
using cuda::warp_sum;

constexpr int kWarpsPerBlock = 4;
constexpr int64_t kSegment = 64;  // centres per unit of work
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

// Writes each kept token at its place in the kept stream (kept_before: exclusive scan).
__global__ void compact_kernel(const int32_t* tokens, const int32_t* keep, const int32_t* win,
                               const int64_t* kept_through, int64_t N, int32_t* kept_ids,
                               int32_t* kept_win, int64_t* kept_pos) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (!keep[i]) continue;
    const int64_t at = kept_through[i] - 1;
    kept_ids[at] = tokens[i];
    kept_win[at] = win[i];
    kept_pos[at] = i;
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

// The sentence of kept position c: the first s with kept_end[s] > c.
__device__ __forceinline__ int64_t sentence_of(const TrainParams& p, int64_t c) {
  int64_t lo = 0, hi = p.S - 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (p.kept_end[mid] > c) hi = mid; else lo = mid + 1;
  }
  return lo;
}

__global__ void train_kernel(TrainParams p) {
  FS_DYNAMIC_SHARED(float, smem);
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const int warps_per_block = static_cast<int>(blockDim.x >> 5);
  const int64_t warp = blockIdx.x * static_cast<int64_t>(warps_per_block) + wib;
  float* work = (p.scratch ? p.scratch + warp * 2 * p.D : smem + wib * 2 * p.D);
  float* neu1 = work + p.D;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * warps_per_block;
  const int64_t total = p.kept_end[p.S - 1];
  double loss = 0.0, examples = 0.0;
  const int W = p.window, K = p.negative;
  for (int64_t first = warp * kSegment; first < total; first += warps * kSegment) {
    const int64_t last = min(total, first + kSegment);
    int64_t s = sentence_of(p, first);
    for (int64_t c = first; c < last; ++c) {
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
  }
  if (lane == 0) {
    atomicAdd(p.stats + 0, loss);
    atomicAdd(p.stats + 1, examples);
  }
}

Tensor word2vec_train_cuda(const Tensor& syn0, const Tensor& syn1neg, const Tensor& tokens,
                           const Tensor& sentence_ends, const Tensor& words_before,
                           const Tensor& keep_prob, const Tensor& ns_prob, const Tensor& ns_alias,
                           int64_t seed, int64_t first_token, bool sg, bool cbow_mean,
                           int64_t window, int64_t negative, bool shrink_windows, double alpha,
                           double min_alpha, double total_words, int64_t num_workers,
                           const Tensor& syn1, const Tensor& hs_paths, const Tensor& hs_offsets,
                           const Tensor& lockf, bool hs) {
  TrainParams p = w2v::prepare_train(
      syn0, syn1neg, tokens, sentence_ends, words_before, keep_prob, ns_prob, ns_alias, seed,
      first_token, sg, cbow_mean, window, negative, shrink_windows, alpha, min_alpha,
      total_words, num_workers, syn1, hs_paths, hs_offsets, lockf, hs);
  const int64_t D = syn0.size(1);
  const cuda::DeviceGuard guard(syn0.device());
  const Device device = syn0.device();
  Tensor stats = zeros({3}, kDouble, device);
  const int64_t S = sentence_ends.numel(), N = tokens.numel();
  if (S == 0 || N == 0) return stats;
  // 1. Subsample and compact: kept_through[i] = kept tokens among 0..i, stored after a
  // leading 0 so that kept_end (kept tokens through each sentence) is one gather at the
  // sentence ends, an empty first sentence included.
  Tensor keep = empty({N}, kInt, device), win = empty({N}, kInt, device);
  FS_LAUNCH(keep_kernel, cuda::blocks_for(N, cuda::kThreads), cuda::kThreads, 0,
            data<int32_t>(tokens), data<float>(keep_prob), N, static_cast<uint64_t>(seed),
            static_cast<uint64_t>(first_token), static_cast<int>(window), shrink_windows,
            data<int32_t>(keep), data<int32_t>(win));
  Tensor kept_through0 = zeros({N + 1}, kLong, device);
  Tensor kept_through = torch::stable::narrow(kept_through0, 0, 1, N);
  call("aten::cumsum", "out", keep, int64_t{0}, std::optional<ScalarType>(kLong), kept_through);
  Tensor kept_ids = empty({N}, kInt, device), kept_win = empty({N}, kInt, device);
  Tensor kept_pos = empty({N}, kLong, device);
  FS_LAUNCH(compact_kernel, cuda::blocks_for(N, cuda::kThreads), cuda::kThreads, 0,
            data<int32_t>(tokens), data<int32_t>(keep), data<int32_t>(win),
            data<int64_t>(kept_through), N, data<int32_t>(kept_ids), data<int32_t>(kept_win),
            data<int64_t>(kept_pos));
  Tensor kept_end = call("aten::index_select", "", kept_through0, int64_t{0}, sentence_ends);
  Tensor kept_total = torch::stable::narrow(stats, 0, 2, 1);
  torch::stable::copy_(kept_total, torch::stable::narrow(kept_end, 0, S - 1, 1));
  // 2. Train. One worker: a single warp walks the segments in order, replaying the CPU's
  // single worker (same draws, same update order). Otherwise num_workers warps (rounded up to
  // whole blocks), at most as many as fit on the GPU at once: fewer warps race less on the
  // rows every prediction touches (the top of the Huffman tree, frequent words).
  const int warps_per_block = num_workers == 1 ? 1 : kWarpsPerBlock;
  size_t smem = static_cast<size_t>(warps_per_block) * 2 * D * sizeof(float);
  const bool global_scratch = smem > kSharedLimit;
  if (global_scratch) smem = 0;
  const int64_t resident =
      static_cast<int64_t>(cuda::multiprocessor_count()) *
      cuda::resident_blocks_per_sm(train_kernel, warps_per_block * 32, smem);
  const int blocks = static_cast<int>(
      std::min<int64_t>(resident, (num_workers + warps_per_block - 1) / warps_per_block));
  Tensor scratch;
  if (global_scratch) scratch = empty({int64_t{blocks} * warps_per_block, 2, D}, kFloat, device);
  p.kept_ids = data<int32_t>(kept_ids);
  p.kept_win = data<int32_t>(kept_win);
  p.kept_pos = data<int64_t>(kept_pos);
  p.kept_end = data<int64_t>(kept_end);
  p.scratch = global_scratch ? data<float>(scratch) : nullptr;
  p.stats = data<double>(stats);
  FS_LAUNCH(train_kernel, blocks, warps_per_block * 32, smem, p);
  return stats;
}

}  // namespace

FS_CUDA_IMPL(m) { m.impl("word2vec_train", TORCH_BOX(&word2vec_train_cuda)); }

}  // namespace fastsoftmax
