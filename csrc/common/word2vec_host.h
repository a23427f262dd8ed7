// Host-side checks of the word2vec_train op's arguments, shared by both devices.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include "word2vec_math.h"

namespace fastsoftmax {
namespace w2v {

// Host-side validation shared by both devices (a bad index on CUDA would be a device-side
// assert, i.e. a crash, so everything is checked before any launch).
inline void check_train_args(const at::Tensor& syn0, const at::Tensor& syn1neg,
                             const at::Tensor& tokens, const at::Tensor& sentence_ends,
                             const at::Tensor& words_before, const at::Tensor& keep_prob,
                             const at::Tensor& ns_prob, const at::Tensor& ns_alias,
                             int64_t window, int64_t negative, double total_words,
                             int64_t num_workers, int64_t first_token) {
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
  TORCH_CHECK_VALUE(first_token >= 0, "word2vec_train: first_token must be >= 0");
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
