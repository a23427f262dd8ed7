// word2vec pieces shared by the CPU and CUDA training kernels: the per-token random choices,
// the learning-rate schedule and the logistic function (host/device), plus the host-side
// argument checks (ATen; both device files include ATen anyway).
//
// Randomness is a pure function of (seed, counter), never of thread scheduling:
//   token t (its global position in the stream of in-vocabulary tokens fed to training, over
//   all epochs)                -> Philox(seed, kStreamW2vToken, t): words 0-1 the subsampling
//                                 coin, words 2-3 the window shrink;
//   negative k of prediction c of center token t
//     skip-gram                -> Philox(seed, kStreamW2vNegative, (t * 2W + c) * K + k)
//     CBOW (one prediction)    -> Philox(seed, kStreamW2vNegative, t * K + k)
// where W is the window, K the number of negatives and c counts the contexts actually used
// (0 .. 2W-1). So one worker replays bit for bit, and CPU and CUDA draw the same samples.
#pragma once

#include <cmath>
#include <cstdint>

#include "philox.h"

namespace fastsoftmax {
namespace w2v {

// Keep decision for a token whose word has keep probability `keep` (word2vec.c's
// (sqrt(c/(s T)) + 1) (s T) / c, capped at 1, precomputed per word on the host).
FS_HOST_DEVICE bool keep_token(const Philox4& r, float keep) {
  return uniform_double(r.x[0], r.x[1]) < static_cast<double>(keep);
}

// Effective half-window in 1..W, uniform: word2vec.c's b = rand % W, window W - b.
FS_HOST_DEVICE int effective_window(const Philox4& r, int window, bool shrink) {
  if (!shrink) return window;
  return window - static_cast<int>(uniform_index(r.x[2], r.x[3], window));
}

// Linear decay from alpha to min_alpha over all raw words of all epochs, as gensim: a
// sentence trains at the rate of the progress made before it, never below min_alpha.
FS_HOST_DEVICE float learning_rate(float alpha, float min_alpha, double words_before,
                                   double total_words) {
  const double progress = total_words > 0 ? words_before / total_words : 0.0;
  const double a = alpha - (static_cast<double>(alpha) - min_alpha) * progress;
  return static_cast<float>(a < min_alpha ? min_alpha : a);
}

// Exact logistic and -log(sigmoid(label ? f : -f)), both stable for any f.
FS_HOST_DEVICE float sigmoid(float f) {
  return f >= 0 ? 1.0f / (1.0f + expf(-f)) : expf(f) / (1.0f + expf(f));
}

// word2vec.c and gensim only evaluate the logistic on (-6, 6) (MAX_EXP). gensim skips a
// prediction whose score f lies outside: no update of the output row, nothing added to the
// input gradient. We follow gensim, whose quality we match: the error term of a prediction
// is label - sigma(f) inside the range and 0 outside. (word2vec.c instead saturates sigma to
// 0 or 1 there, which only matters for the rare confidently wrong predictions.) Inside, both
// read sigma from a 1000-entry table at the grid point below f, a bias of at most 0.012
// sigma'(f); we compute it exactly: replaying their table changed no WS-353 score beyond
// seed noise (CBOW, WikiText-2, 3 epochs, seeds 1-3), and the exact value keeps the kernel
// checkable against the float64 reference without grid-boundary flips.
constexpr float kMaxExp = 6.0f;
FS_HOST_DEVICE bool outside_logistic_range(float f) { return f <= -kMaxExp || f >= kMaxExp; }
FS_HOST_DEVICE float prediction_error(float label, float f) {
  return outside_logistic_range(f) ? 0.0f : label - sigmoid(f);
}
FS_HOST_DEVICE float neg_log_sigmoid(float f) {
  // -log sigma(f) = log(1 + e^-f) = max(-f, 0) + log1p(e^-|f|)
  return (f < 0 ? -f : 0.0f) + log1pf(expf(f < 0 ? f : -f));
}

}  // namespace w2v
}  // namespace fastsoftmax

#include <ATen/ATen.h>

namespace fastsoftmax {
namespace w2v {

// Host-side validation shared by both devices (a bad index on CUDA would be a device-side
// assert, i.e. a crash, so everything is checked before any launch).
inline void check_train_args(const at::Tensor& syn0, const at::Tensor& syn1neg,
                             const at::Tensor& tokens, const at::Tensor& sentence_ends,
                             const at::Tensor& words_before, const at::Tensor& keep_prob,
                             const at::Tensor& ns_prob, const at::Tensor& ns_alias,
                             int64_t window, int64_t negative, double total_words,
                             int64_t num_workers) {
  TORCH_CHECK_TYPE(syn0.scalar_type() == at::kFloat && syn1neg.scalar_type() == at::kFloat,
                   "word2vec_train: syn0 and syn1neg must be float32");
  TORCH_CHECK_VALUE(syn0.dim() == 2 && syn1neg.sizes() == syn0.sizes(),
                    "word2vec_train: syn0 and syn1neg must both be [V, D], got ", syn0.sizes(),
                    " and ", syn1neg.sizes());
  TORCH_CHECK_VALUE(syn0.is_contiguous() && syn1neg.is_contiguous(),
                    "word2vec_train: syn0 and syn1neg must be contiguous");
  const int64_t V = syn0.size(0);
  TORCH_CHECK_VALUE(V > 0 && syn0.size(1) > 0, "word2vec_train: empty embedding table");
  TORCH_CHECK_TYPE(tokens.scalar_type() == at::kInt && tokens.dim() == 1,
                   "word2vec_train: tokens must be a 1-D int32 tensor");
  TORCH_CHECK_TYPE(sentence_ends.scalar_type() == at::kLong && sentence_ends.dim() == 1 &&
                       words_before.scalar_type() == at::kLong &&
                       words_before.sizes() == sentence_ends.sizes(),
                   "word2vec_train: sentence_ends and words_before must be 1-D int64 of one "
                   "entry per sentence");
  TORCH_CHECK_TYPE(keep_prob.scalar_type() == at::kFloat && keep_prob.dim() == 1 &&
                       keep_prob.numel() == V,
                   "word2vec_train: keep_prob must be float32 [V] with V = ", V);
  TORCH_CHECK_TYPE(ns_prob.scalar_type() == at::kFloat && ns_alias.scalar_type() == at::kInt &&
                       ns_prob.numel() == V && ns_alias.numel() == V,
                   "word2vec_train: the negative-sampling table must be (float32 [V], int32 "
                   "[V]) with V = ", V);
  for (const at::Tensor* t : {&syn1neg, &tokens, &sentence_ends, &words_before, &keep_prob,
                              &ns_prob, &ns_alias}) {
    TORCH_CHECK_VALUE(t->device() == syn0.device(), "word2vec_train: all tensors must be on ",
                      syn0.device(), ", found one on ", t->device());
    TORCH_CHECK_VALUE(t->is_contiguous(), "word2vec_train: inputs must be contiguous");
  }
  TORCH_CHECK_VALUE(window >= 1, "word2vec_train: window must be >= 1, got ", window);
  TORCH_CHECK_VALUE(negative >= 1, "word2vec_train: negative must be >= 1, got ", negative);
  TORCH_CHECK_VALUE(total_words >= 0, "word2vec_train: total_words must be >= 0");
  TORCH_CHECK_VALUE(num_workers >= 1, "word2vec_train: num_workers must be >= 1");
  // One worker replays the corpus in order (bit-identical run to run); several race, as
  // Hogwild SGD does by design.
  if (num_workers > 1)
    at::globalContext().alertNotDeterministic(
        "word2vec_train with num_workers > 1 (Hogwild updates race by design; use one worker)");
  const int64_t S = sentence_ends.numel();
  if (S > 0) {
    // Offsets and ids are small host-side reductions; on CUDA they cost one sync per batch.
    const at::Tensor ends = sentence_ends.cpu();
    const int64_t* e = ends.data_ptr<int64_t>();
    int64_t prev = 0;
    for (int64_t s = 0; s < S; ++s) {
      TORCH_CHECK_VALUE(e[s] >= prev, "word2vec_train: sentence_ends must be non-decreasing");
      prev = e[s];
    }
    TORCH_CHECK_VALUE(prev == tokens.numel(), "word2vec_train: the last sentence end (", prev,
                      ") must equal the number of tokens (", tokens.numel(), ")");
  } else {
    TORCH_CHECK_VALUE(tokens.numel() == 0, "word2vec_train: tokens given without sentences");
  }
  if (tokens.numel() > 0) {
    const int64_t lo = tokens.min().item<int64_t>(), hi = tokens.max().item<int64_t>();
    TORCH_CHECK_VALUE(lo >= 0 && hi < V, "word2vec_train: token ids must lie in [0, ", V,
                      "), found [", lo, ", ", hi, "]");
  }
}

}  // namespace w2v
}  // namespace fastsoftmax
