// word2vec maths shared by the CPU and CUDA training kernels: the one argument struct, the
// per-token random choices, the learning-rate schedule, the logistic function and the rule of
// lockstep rounds. Torch-free (nvcc compiles it on a machine without a GPU); the host-side
// checks that fill the struct are in word2vec_host.h.
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
//
// Two update orders:
//   sequential (round_size 0): word2vec.c's, one prediction after another, each seeing every
//     earlier update; several CPU workers run it Hogwild (csrc/cpu/word2vec.cpp).
//   lockstep rounds (round_size R > 0): the kept centres of a batch, in order, are cut into
//     rounds of R. Every prediction of a round reads the tables as they were when the round
//     began; when it ends, each row moves by the sum of its updates from the round, times
//     round_damping(L) below. The result is a function of the inputs alone, whatever the
//     number of threads or warps and their timing (up to the order of float sums). CUDA trains
//     this way (csrc/cuda/word2vec_rounds.cuh); the CPU replays it (word2vec_rounds.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "philox.h"

namespace fastsoftmax {
namespace w2v {

// Everything a training pass reads, as raw pointers and sizes: filled once by the host
// (word2vec_host.h's prepare_train) for both devices. Shapes: V vocabulary, D vector size,
// N tokens, S sentences, P the summed Huffman code lengths.
struct TrainParams {
  float* syn0;                  // [V, D] input vectors
  float* syn1neg;               // [V, D] output vectors of negative sampling (negative > 0)
  float* syn1;                  // [V - 1, D] inner-node vectors of the hierarchical softmax
  const int32_t* tokens;        // [N] in-vocabulary ids of the batch
  const int64_t* sentence_ends; // [S] exclusive end of each sentence in tokens
  const int64_t* words_before;  // [S] raw words trained before each sentence (all epochs)
  const float* keep_prob;       // [V] subsampling keep probabilities
  const float* ns_prob;         // [V] alias table of the noise distribution (negative > 0)
  const int32_t* ns_alias;      // [V]
  TableStrides ns_stride;       // of ns_prob and ns_alias (sampler_host.h)
  // Huffman paths (hs): the path of word w is hs_paths[hs_offsets[w] .. hs_offsets[w + 1]),
  // root first, each step 2 * inner id + code (word2vec.c's point and code).
  const int32_t* hs_paths;      // [P]
  const int64_t* hs_offsets;    // [V + 1]
  // gensim's vectors_lockf: word w's input-vector updates are scaled by lockf[w % lockf_len]
  // (0 locks the vector); lockf_len 0: no factor.
  const float* lockf;           // [lockf_len]
  int64_t lockf_len;
  int64_t S, N, V, D;
  uint64_t seed, first_token;
  int window, negative;         // negative = 0: no negative sampling (hs only)
  bool hs, sg, cbow_mean, shrink;
  float alpha, min_alpha;
  double total_words;
  // CUDA only, set by its host: the stream of tokens kept by subsampling (word2vec.cu).
  const int32_t* kept_ids;      // [N] kept tokens in order
  const int32_t* kept_win;      // [N] their effective half-windows
  const int64_t* kept_pos;      // [N] their positions in the batch (for the Philox counters)
  const int64_t* kept_end;      // [S] kept tokens through each sentence (inclusive scan)
  const int64_t* kept_sent;     // [N] the sentence of each kept token (rounds)
  float* scratch;               // [warps, 2, D] in global memory, or nullptr: shared memory
  double* stats;                // [2] summed loss, positive predictions (sequential)
  int64_t round_size;           // R centres a round; 0: the sequential order
};

// The factor on word w's input-vector update (vectors_lockf).
FS_HOST_DEVICE float lock_factor(const TrainParams& p, int32_t w) {
  return p.lockf_len ? p.lockf[w % p.lockf_len] : 1.0f;
}

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
// One step of a Huffman path (word2vec.c's hierarchical softmax): code 0 is the side of
// sigma(f), so the step's label is 1 - code, and its error (1 - code - sigma(f)) as above.
FS_HOST_DEVICE float hs_label(int32_t step) { return (step & 1) ? 0.0f : 1.0f; }
FS_HOST_DEVICE int64_t hs_node(int32_t step) { return step >> 1; }

// Lockstep rounds: why the damping. A row's summed update is what sequential SGD would do only
// while the row barely moves within the round. The rows of frequent words take thousands of
// updates a round (as a negative, "the" takes ~2 % of all draws), all computed at the same
// snapshot: their sum overshoots, pushes the row's scores outside (-6, 6), where gensim's rule
// stops updating it, and the row is left frozen at a huge norm (measured: R = 16384 CBOW
// centres on WikiText-2 without damping, rows of norm 20 and a training loss of 3.2-4.4
// against 2.09 sequentially). Sequential SGD instead slows as each step improves the score.
// Each update of the row, coefficient g on a vector x (the input for an output row, the
// output row for an input), has the curvature alpha * sigma'(f) * |x|^2 <= alpha |x|^2 / 4 along
// x; summed over the round it bounds how far the row may move in one go. The row moves by
// (1 - e^-L) / L of its summed update, L = kRoundStiffness * sum alpha |x|^2: the exact result
// of sequential steps on a quadratic of that curvature, ~1 for the rare words (L << 1), ~1/L
// for the hottest rows. kRoundStiffness = 0.1 / 4 and R = 4096 were chosen by measurement
// (docs/word2vec.md, "The GPU's update order"): larger factors slow the frequent words' rows,
// smaller ones let R = 16384 CBOW diverge.
constexpr float kRoundStiffness = 0.025f;
FS_HOST_DEVICE float round_bound(float alpha, float sq_norm) {
  return kRoundStiffness * alpha * sq_norm;
}
FS_HOST_DEVICE float round_damping(float L) {
  return L > 1e-3f ? -expm1f(-L) / L : 1.0f - 0.5f * L;  // (1 - e^-L) / L, stable near 0
}

FS_HOST_DEVICE float neg_log_sigmoid(float f) {
  // -log sigma(f) = log(1 + e^-f) = max(-f, 0) + log1p(e^-|f|)
  return (f < 0 ? -f : 0.0f) + log1pf(expf(f < 0 ? f : -f));
}

}  // namespace w2v
}  // namespace fastsoftmax
