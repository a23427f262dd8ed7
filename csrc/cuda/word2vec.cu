// CUDA word2vec training: the same Hogwild SGD as csrc/cpu/word2vec.cpp, one warp per
// sentence. A warp first subsamples its sentence (32 tokens at a time, compacted with a
// ballot), then walks the center words in order; the D coordinates of every vector are
// spread over the 32 lanes and dot products are reduced with shuffles. Random draws use the
// same Philox counters as the CPU (csrc/common/word2vec.h), so the samples are identical;
// the update order differs across sentences (thousands run at once), as Hogwild allows.
//
// Shapes: V vocabulary, D vector size, N tokens, S sentences, W window, K negatives.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/library.h>

#include "../common/philox.h"
#include "../common/word2vec.h"
#include "cuda_utils.cuh"

namespace fastsoftmax {
namespace {

using cuda::kFullMask;
using cuda::warp_sum;

constexpr int kWarpsPerBlock = 4;
// Dynamic shared memory a launch may take without an opt-in; larger vectors keep each
// warp's two scratch vectors in global memory instead.
constexpr size_t kSharedLimit = 48 * 1024;

struct Params {
  float* syn0;
  float* syn1;
  const int32_t* tokens;
  const int64_t* sentence_ends;
  const int64_t* words_before;
  const float* keep_prob;
  const float* ns_prob;
  const int32_t* ns_alias;
  int32_t* kept_ids;   // [N] workspace: each sentence compacts into its own slice
  int32_t* kept_win;   // [N]
  int64_t* kept_pos;   // [N] batch position of each kept token (for its Philox counter)
  float* scratch;      // [warps, 2, D] in global memory, or nullptr: in shared memory
  double* stats;       // [3] loss, positive predictions, kept tokens
  int64_t S, V, D;
  uint64_t seed, first_token;
  int window, negative;
  bool sg, cbow_mean, shrink;
  float alpha, min_alpha;
  double total_words;
};

__device__ __forceinline__ int32_t draw_negative(const Params& p, uint64_t counter) {
  const Philox4 r = philox_at(p.seed, kStreamW2vNegative, counter);
  return static_cast<int32_t>(alias_draw(r, p.ns_prob, p.ns_alias, p.V));
}

// One prediction of target t from input h (both length D, lane-strided): updates syn1[t],
// accumulates the input gradient in work; returns this prediction's -log sigma.
__device__ __forceinline__ float update(const Params& p, const float* h, int32_t t, float label,
                                        float alpha, float* work, int lane) {
  float* out = p.syn1 + static_cast<int64_t>(t) * p.D;
  float part = 0.f;
  for (int64_t d = lane; d < p.D; d += 32) part += h[d] * out[d];
  const float f = warp_sum(part);
  const float g = (label - w2v::sigmoid(f)) * alpha;
  for (int64_t d = lane; d < p.D; d += 32) {
    const float o = out[d];
    work[d] += g * o;
    out[d] = o + g * h[d];
  }
  return w2v::neg_log_sigmoid(label > 0.5f ? f : -f);
}

// The positive target and the K negatives of prediction `counter0` (negatives equal to the
// target skipped). Lanes draw 32 negatives at a time and broadcast them by shuffle.
__device__ float predict(const Params& p, const float* h, int32_t target, uint64_t counter0,
                         float alpha, float* work, int lane) {
  float loss = update(p, h, target, 1.f, alpha, work, lane);
  for (int kb = 0; kb < p.negative; kb += 32) {
    const int n = min(32, p.negative - kb);
    const int32_t mine = lane < n ? draw_negative(p, counter0 + kb + lane) : 0;
    for (int k = 0; k < n; ++k) {
      const int32_t t = __shfl_sync(kFullMask, mine, k);
      if (t == target) continue;
      loss += update(p, h, t, 0.f, alpha, work, lane);
    }
  }
  return loss;
}

__global__ void word2vec_kernel(Params p) {
  FS_DYNAMIC_SHARED(float, smem);
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const int warps_per_block = static_cast<int>(blockDim.x >> 5);
  const int64_t warp = blockIdx.x * static_cast<int64_t>(warps_per_block) + wib;
  float* work = (p.scratch ? p.scratch + warp * 2 * p.D : smem + wib * 2 * p.D);
  float* neu1 = work + p.D;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * warps_per_block;
  double loss = 0.0, examples = 0.0, kept = 0.0;
  const int W = p.window, K = p.negative;
  for (int64_t s = warp; s < p.S; s += warps) {
    const int64_t begin = s == 0 ? 0 : p.sentence_ends[s - 1], end = p.sentence_ends[s];
    const float alpha = w2v::learning_rate(p.alpha, p.min_alpha,
                                           static_cast<double>(p.words_before[s]),
                                           p.total_words);
    // Subsample, compacting the survivors in order into kept_*[begin, begin + L).
    int L = 0;
    for (int64_t base = begin; base < end; base += 32) {
      const int64_t i = base + lane;
      bool keep = false;
      int win = 0;
      int32_t w = 0;
      if (i < end) {
        const Philox4 r = philox_at(p.seed, kStreamW2vToken, p.first_token + i);
        w = p.tokens[i];
        keep = w2v::keep_token(r, p.keep_prob[w]);
        win = w2v::effective_window(r, W, p.shrink);
      }
      const unsigned mask = __ballot_sync(kFullMask, keep);
      if (keep) {
        const int pos = L + __popc(mask & ((1u << lane) - 1u));
        p.kept_ids[begin + pos] = w;
        p.kept_win[begin + pos] = win;
        p.kept_pos[begin + pos] = i;
      }
      L += __popc(mask);
    }
    __syncwarp();
    kept += L;
    const int32_t* sen = p.kept_ids + begin;
    for (int i = 0; i < L; ++i) {
      const int win = p.kept_win[begin + i];
      const int lo = max(0, i - win), hi = min(L, i + win + 1);
      const int contexts = hi - lo - 1;
      if (contexts <= 0) continue;
      const uint64_t gid = p.first_token + static_cast<uint64_t>(p.kept_pos[begin + i]);
      if (p.sg) {
        int c = 0;
        for (int j = lo; j < hi; ++j) {
          if (j == i) continue;
          float* in = p.syn0 + static_cast<int64_t>(sen[j]) * p.D;
          for (int64_t d = lane; d < p.D; d += 32) work[d] = 0.f;
          const uint64_t counter = (gid * static_cast<uint64_t>(2 * W) + c) * K;
          loss += predict(p, in, sen[i], counter, alpha, work, lane);
          for (int64_t d = lane; d < p.D; d += 32) in[d] += work[d];
          ++c;
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
          for (int64_t d = lane; d < p.D; d += 32) row[d] += scale * work[d];
        }
        examples += 1;
      }
      __syncwarp();
    }
  }
  if (lane == 0) {
    atomicAdd(p.stats + 0, loss);
    atomicAdd(p.stats + 1, examples);
    atomicAdd(p.stats + 2, kept);
  }
}

at::Tensor word2vec_train_cuda(at::Tensor& syn0, at::Tensor& syn1neg, const at::Tensor& tokens,
                               const at::Tensor& sentence_ends, const at::Tensor& words_before,
                               const at::Tensor& keep_prob, const at::Tensor& ns_prob,
                               const at::Tensor& ns_alias, int64_t seed, int64_t first_token,
                               bool sg, bool cbow_mean, int64_t window, int64_t negative,
                               bool shrink_windows, double alpha, double min_alpha,
                               double total_words, int64_t num_workers) {
  w2v::check_train_args(syn0, syn1neg, tokens, sentence_ends, words_before, keep_prob, ns_prob,
                        ns_alias, window, negative, total_words, num_workers);
  TORCH_CHECK_VALUE(first_token >= 0, "word2vec_train: first_token must be >= 0");
  const int64_t D = syn0.size(1);
  const cuda::DeviceGuard guard(syn0.device());
  at::Tensor stats = at::zeros({3}, syn0.options().dtype(at::kDouble));
  const int64_t S = sentence_ends.numel(), N = tokens.numel();
  if (S == 0) return stats;
  // One worker: a single warp walks the sentences in order, replaying the CPU's single
  // worker (same Philox draws, same update order). Otherwise enough warps to fill the GPU
  // (16 resident blocks of 4 warps per SM), one sentence each at a time.
  const int warps_per_block = num_workers == 1 ? 1 : kWarpsPerBlock;
  const int64_t blocks_needed = (S + warps_per_block - 1) / warps_per_block;
  const int blocks = num_workers == 1 ? 1
                                      : static_cast<int>(std::min<int64_t>(
                                            blocks_needed, int64_t{16} * cuda::multiprocessor_count()));
  size_t smem = static_cast<size_t>(warps_per_block) * 2 * D * sizeof(float);
  at::Tensor scratch;
  if (smem > kSharedLimit) {
    scratch = at::empty({int64_t{blocks} * warps_per_block, 2, D}, syn0.options());
    smem = 0;
  }
  at::Tensor kept_ids = at::empty({N}, tokens.options());
  at::Tensor kept_win = at::empty({N}, tokens.options());
  at::Tensor kept_pos = at::empty({N}, sentence_ends.options());
  Params p{syn0.data_ptr<float>(),
           syn1neg.data_ptr<float>(),
           tokens.data_ptr<int32_t>(),
           sentence_ends.data_ptr<int64_t>(),
           words_before.data_ptr<int64_t>(),
           keep_prob.data_ptr<float>(),
           ns_prob.data_ptr<float>(),
           ns_alias.data_ptr<int32_t>(),
           kept_ids.data_ptr<int32_t>(),
           kept_win.data_ptr<int32_t>(),
           kept_pos.data_ptr<int64_t>(),
           scratch.defined() ? scratch.data_ptr<float>() : nullptr,
           stats.data_ptr<double>(),
           S,
           syn0.size(0),
           D,
           static_cast<uint64_t>(seed),
           static_cast<uint64_t>(first_token),
           static_cast<int>(window),
           static_cast<int>(negative),
           sg,
           cbow_mean,
           shrink_windows,
           static_cast<float>(alpha),
           static_cast<float>(min_alpha),
           total_words};
  FS_LAUNCH(word2vec_kernel, blocks, warps_per_block * 32, smem, p);
  return stats;
}

}  // namespace

FS_CUDA_IMPL(m) { m.impl("word2vec_train", &word2vec_train_cuda); }

}  // namespace fastsoftmax
