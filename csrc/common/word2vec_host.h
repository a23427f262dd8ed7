// Host-side checks of the word2vec_train op's arguments, shared by both devices, which fill
// the trainers' one argument struct (w2v::TrainParams, word2vec_math.h).
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "sampler_host.h"
#include "stable.h"
#include "word2vec_math.h"

namespace fastsoftmax {
namespace w2v {

// (min, max) of a non-empty int32 tensor: read in place on the CPU; on a device both come to
// the host in one copy.
inline std::pair<int64_t, int64_t> int32_range(const Tensor& t) {
  if (on_host(t)) {
    const int32_t* v = data<int32_t>(t);
    const auto mm = std::minmax_element(v, v + t.numel());
    return {*mm.first, *mm.second};
  }
  const auto mm = call_n<2>("aten::aminmax", "", t, std::optional<int64_t>(), false);
  const Tensor both = to_cpu(call("aten::stack", "", std::vector<Tensor>{mm[0], mm[1]},
                                  int64_t{0}));
  return {data<int32_t>(both)[0], data<int32_t>(both)[1]};
}

// Host-side validation shared by both devices (a bad index on CUDA would be a device-side
// assert, i.e. a crash, so everything is checked before any launch), then the one argument
// struct of both trainers. The CUDA host adds its kept stream to it.
// In the sequential order with num_workers > 1 the CPU workers race, as Hogwild SGD does by
// design: fastsoftmax/ops/word2vec.py raises torch's deterministic-mode alert for it (a
// stable kernel cannot). Each device checks what num_workers may be in each order.
inline TrainParams prepare_train(
    const Tensor& syn0, const Tensor& syn1neg, const Tensor& tokens, const Tensor& sentence_ends,
    const Tensor& words_before, const Tensor& keep_prob, const Tensor& ns_prob,
    const Tensor& ns_alias, int64_t seed, int64_t first_token, bool sg, bool cbow_mean,
    int64_t window, int64_t negative, bool shrink_windows, double alpha, double min_alpha,
    double total_words, int64_t num_workers, const Tensor& syn1, const Tensor& hs_paths,
    const Tensor& hs_offsets, const Tensor& lockf, bool hs, int64_t round_size) {
  FS_CHECK_TYPE(syn0.scalar_type() == kFloat && syn0.dim() == 2 && syn0.is_contiguous(),
                "word2vec_train: syn0 must be a contiguous float32 [V, D] tensor");
  const int64_t V = syn0.size(0), D = syn0.size(1);
  FS_CHECK_VALUE(V > 0 && D > 0, "word2vec_train: empty embedding table");
  FS_CHECK_VALUE(negative >= 0, "word2vec_train: negative must be >= 0, got ", negative);
  FS_CHECK_VALUE(negative > 0 || hs, "word2vec_train: no output layer: give negative > 0, "
                                     "hs = true, or both");
  std::vector<const Tensor*> used{&tokens, &sentence_ends, &words_before, &keep_prob};
  if (negative > 0) {
    FS_CHECK_TYPE(syn1neg.scalar_type() == kFloat && syn1neg.sizes() == syn0.sizes(),
                  "word2vec_train: syn1neg must be float32 [V, D] like syn0 ", syn0.sizes(),
                  ", got ", syn1neg.scalar_type(), " ", syn1neg.sizes());
    FS_CHECK_TYPE(ns_prob.scalar_type() == kFloat && ns_alias.scalar_type() == kInt &&
                      ns_prob.numel() == V && ns_alias.numel() == V,
                  "word2vec_train: the negative-sampling table must be (float32 [V], int32 "
                  "[V]) with V = ", V);
    used.insert(used.end(), {&syn1neg, &ns_prob, &ns_alias});
  }
  if (hs) {
    FS_CHECK_VALUE(V >= 2, "word2vec_train: hierarchical softmax needs at least 2 words");
    FS_CHECK_TYPE(syn1.scalar_type() == kFloat && syn1.dim() == 2 &&
                      syn1.size(0) == V - 1 && syn1.size(1) == D,
                  "word2vec_train: syn1 must be float32 [V - 1, D] = [", V - 1, ", ", D,
                  "], got ", syn1.scalar_type(), " ", syn1.sizes());
    FS_CHECK_TYPE(hs_paths.scalar_type() == kInt && hs_paths.dim() == 1 &&
                      hs_offsets.scalar_type() == kLong && hs_offsets.dim() == 1 &&
                      hs_offsets.numel() == V + 1,
                  "word2vec_train: the Huffman paths must be int32 [P] and their offsets "
                  "int64 [V + 1] with V = ", V);
    used.insert(used.end(), {&syn1, &hs_paths, &hs_offsets});
  }
  FS_CHECK_TYPE(tokens.scalar_type() == kInt && tokens.dim() == 1,
                "word2vec_train: tokens must be a 1-D int32 tensor");
  FS_CHECK_TYPE(sentence_ends.scalar_type() == kLong && sentence_ends.dim() == 1 &&
                    words_before.scalar_type() == kLong &&
                    words_before.sizes() == sentence_ends.sizes(),
                "word2vec_train: sentence_ends and words_before must be 1-D int64 of one "
                "entry per sentence");
  FS_CHECK_TYPE(keep_prob.scalar_type() == kFloat && keep_prob.dim() == 1 &&
                    keep_prob.numel() == V,
                "word2vec_train: keep_prob must be float32 [V] with V = ", V);
  if (lockf.numel() > 0) {
    FS_CHECK_TYPE(lockf.scalar_type() == kFloat && lockf.dim() == 1,
                  "word2vec_train: lockf must be a 1-D float32 tensor, got ",
                  lockf.scalar_type(), " ", lockf.sizes());
    used.push_back(&lockf);
  }
  for (const Tensor* t : used) {
    FS_CHECK_VALUE(t->device() == syn0.device(), "word2vec_train: all tensors must be on ",
                   syn0.device(), ", found one on ", t->device());
    // The negative table may be strided (interleaved, sampler_host.h): checked below.
    FS_CHECK_VALUE(t->is_contiguous() || t == &ns_prob || t == &ns_alias,
                   "word2vec_train: inputs must be contiguous");
  }
  FS_CHECK_VALUE(window >= 1, "word2vec_train: window must be >= 1, got ", window);
  FS_CHECK_VALUE(total_words >= 0, "word2vec_train: total_words must be >= 0");
  FS_CHECK_VALUE(num_workers >= 1, "word2vec_train: num_workers must be >= 1");
  FS_CHECK_VALUE(round_size >= 0, "word2vec_train: round_size must be >= 0 (0: the sequential "
                 "order), got ", round_size);
  FS_CHECK_VALUE(first_token >= 0, "word2vec_train: first_token must be >= 0");
  const int64_t S = sentence_ends.numel();
  if (S > 0) {
    // Offsets and ids are small host-side reductions; on CUDA they cost one sync per batch.
    const Tensor ends = to_cpu(sentence_ends);
    const int64_t* e = data<int64_t>(ends);
    int64_t prev = 0;
    for (int64_t s = 0; s < S; ++s) {
      FS_CHECK_VALUE(e[s] >= prev, "word2vec_train: sentence_ends must be non-decreasing");
      prev = e[s];
    }
    FS_CHECK_VALUE(prev == tokens.numel(), "word2vec_train: the last sentence end (", prev,
                   ") must equal the number of tokens (", tokens.numel(), ")");
  } else {
    FS_CHECK_VALUE(tokens.numel() == 0, "word2vec_train: tokens given without sentences");
  }
  if (tokens.numel() > 0) {
    const auto [lo, hi] = int32_range(tokens);
    FS_CHECK_VALUE(lo >= 0 && hi < V, "word2vec_train: token ids must lie in [0, ", V,
                   "), found [", lo, ", ", hi, "]");
  }
  if (hs) {
    // Every step must name an inner node (a row of syn1) and every word's path must lie in
    // hs_paths: then no read or write leaves the tables, whatever the tree.
    const Tensor offsets = to_cpu(hs_offsets);
    const int64_t* o = data<int64_t>(offsets);
    FS_CHECK_VALUE(o[0] == 0 && o[V] == hs_paths.numel(),
                   "word2vec_train: hs_offsets must run from 0 to the number of path steps (",
                   hs_paths.numel(), "), got ", o[0], " .. ", o[V]);
    for (int64_t w = 0; w < V; ++w)
      FS_CHECK_VALUE(o[w + 1] >= o[w], "word2vec_train: hs_offsets must be non-decreasing");
    if (hs_paths.numel() > 0) {
      const auto [lo, hi] = int32_range(hs_paths);
      FS_CHECK_VALUE(lo >= 0 && hi < 2 * (V - 1),
                     "word2vec_train: Huffman path steps (2 * inner node + code) must lie "
                     "in [0, ", 2 * (V - 1), "), found [", lo, ", ", hi, "]");
    }
  }
  TrainParams p{};
  p.syn0 = data<float>(syn0);
  p.syn1neg = negative > 0 ? data<float>(syn1neg) : nullptr;
  p.syn1 = hs ? data<float>(syn1) : nullptr;
  p.tokens = data<int32_t>(tokens);
  p.sentence_ends = data<int64_t>(sentence_ends);
  p.words_before = data<int64_t>(words_before);
  p.keep_prob = data<float>(keep_prob);
  p.ns_prob = negative > 0 ? data<float>(ns_prob) : nullptr;
  p.ns_alias = negative > 0 ? data<int32_t>(ns_alias) : nullptr;
  if (negative > 0)
    p.ns_stride = alias_table_strides(ns_prob, ns_alias, "word2vec_train: the negative table");
  p.hs_paths = hs ? data<int32_t>(hs_paths) : nullptr;
  p.hs_offsets = hs ? data<int64_t>(hs_offsets) : nullptr;
  p.lockf = lockf.numel() > 0 ? data<float>(lockf) : nullptr;
  p.lockf_len = lockf.numel();
  p.S = S;
  p.N = tokens.numel();
  p.V = V;
  p.D = D;
  p.seed = static_cast<uint64_t>(seed);
  p.first_token = static_cast<uint64_t>(first_token);
  p.window = static_cast<int>(window);
  p.negative = static_cast<int>(negative);
  p.hs = hs;
  p.sg = sg;
  p.cbow_mean = cbow_mean;
  p.shrink = shrink_windows;
  p.alpha = static_cast<float>(alpha);
  p.min_alpha = static_cast<float>(min_alpha);
  p.total_words = total_words;
  p.round_size = round_size;
  return p;
}

}  // namespace w2v
}  // namespace fastsoftmax
