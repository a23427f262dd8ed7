// What both CPU word2vec orders share (word2vec.cpp, word2vec.c's pairs; word2vec_batched.cpp,
// shared negatives): the statistics, the logistic tables, the row helpers, the negative draws
// and the subsampled window of a sentence. Every helper is forced inline, so that each
// kernel's AVX2 copy (vec::with_best_isa) gets AVX2 code for it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "../common/philox.h"
#include "../common/sampler_host.h"
#include "../common/word2vec_host.h"
#include "alias_simd.h"
#include "vec.h"
#include "word2vec_rows.h"

namespace fastsoftmax {
namespace w2v {

struct Stats {
  double loss = 0;         // sum of -log sigma over every positive and negative prediction
  int64_t examples = 0;    // positive predictions made (pairs for skip-gram, centers for CBOW)
  int64_t kept = 0;        // tokens surviving subsampling
};

// Logistic and softplus by linear interpolation in tables on [-16, 16] (4096 steps): the
// interpolation error is below 1e-6, i.e. the exact functions to float32 working precision,
// at the cost of two loads instead of expf/log1pf (which dominated the loop otherwise).
// Outside the range sigma is 0 or 1 to within 1.2e-7 and softplus(f) = max(f, 0).
constexpr int kTableSteps = 4096;
constexpr float kTableMax = 16.0f;
constexpr float kTableScale = kTableSteps / (2 * kTableMax);

struct LogisticTables {
  float sigmoid[kTableSteps + 2];
  float softplus[kTableSteps + 2];  // softplus(x) = log(1 + e^x) = -log sigma(-x)
  LogisticTables() {
    for (int i = 0; i <= kTableSteps + 1; ++i) {
      const double x = -kTableMax + i / static_cast<double>(kTableScale);
      sigmoid[i] = static_cast<float>(1.0 / (1.0 + std::exp(-x)));
      softplus[i] = static_cast<float>(x > 0 ? x + std::log1p(std::exp(-x))
                                             : std::log1p(std::exp(x)));
    }
  }
};
inline const LogisticTables kTables;

FS_ALWAYS_INLINE float interpolate(const float* table, float x) {
  const float pos = (x + kTableMax) * kTableScale;
  const int i = static_cast<int>(pos);
  const float frac = pos - static_cast<float>(i);
  return table[i] + frac * (table[i + 1] - table[i]);
}

// A NaN score (vectors that diverged, e.g. under a huge learning rate) fails every range
// test and must not reach interpolate(): int(NaN) is undefined and indexed far outside the
// table (a crash). It propagates as NaN instead, as the exact functions would.
FS_ALWAYS_INLINE float fast_sigmoid(float f) {
  if (f <= -kTableMax) return 0.0f;
  if (f >= kTableMax) return 1.0f;
  if (f != f) return f;
  return interpolate(kTables.sigmoid, f);
}

// -log sigma(f) = softplus(-f).
FS_ALWAYS_INLINE float fast_neg_log_sigmoid(float f) {
  if (f >= kTableMax) return 0.0f;
  if (f <= -kTableMax) return -f;
  if (f != f) return f;
  return interpolate(kTables.softplus, -f);
}

// Rows of D floats: prefetched for the coming update, dot products, y += g x (vec.h).
FS_ALWAYS_INLINE void prefetch_row(const float* row, int64_t D) {
  vec::prefetch_row(row, D * static_cast<int64_t>(sizeof(float)), /*for_write=*/true);
}
FS_ALWAYS_INLINE float dot(const float* a, const float* b, int64_t D) {
  return vec::dot<float, float>(a, b, D);
}
FS_ALWAYS_INLINE void axpy(float g, const float* x, float* y, int64_t D) {
  vec::axpy<float, float>(y, g, x, D);
}

// sum_e coef[e] rows[e], then out = scale * sum (add = false) or out += scale * sum
// (add = true). The sums are kept in registers over all n rows, 32 floats at a time in four
// independent accumulators: with one, each multiply-add waited on the previous one's
// latency (n is only 2 to 10 here), and the kernel ran at a quarter of its throughput.
// Four floats left over (D = 100, 300) take one half-width step, not four scalar ones.
using vec::v4f;
// (Overloads, not a template on the vector type: deduction drops the typedefs' aligned(4),
// and an aligned store of an unaligned row faults.)
template <bool add>
FS_ALWAYS_INLINE void store_sum(float* out, const vec::v8f& acc, float scale) {
  vec::v8f* o = reinterpret_cast<vec::v8f*>(out);
  if (add) *o += scale * acc;
  else *o = scale * acc;
}
template <bool add>
FS_ALWAYS_INLINE void store_sum(float* out, const v4f& acc, float scale) {
  v4f* o = reinterpret_cast<v4f*>(out);
  if (add) *o += scale * acc;
  else *o = scale * acc;
}
template <bool add>
FS_ALWAYS_INLINE void combine(const float* coef, const float* const* rows, int n, float scale,
                              float* out, int64_t D) {
  int64_t d = 0;
  for (; d + 32 <= D; d += 32) {
    vec::v8f a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (int e = 0; e < n; ++e) {
      const float c = coef[e];
      const float* p = rows[e] + d;
      a0 += c * vec::load8(p);
      a1 += c * vec::load8(p + 8);
      a2 += c * vec::load8(p + 16);
      a3 += c * vec::load8(p + 24);
    }
    store_sum<add>(out + d, a0, scale);
    store_sum<add>(out + d + 8, a1, scale);
    store_sum<add>(out + d + 16, a2, scale);
    store_sum<add>(out + d + 24, a3, scale);
  }
  for (; d + 8 <= D; d += 8) {
    vec::v8f acc = {};
    for (int e = 0; e < n; ++e) acc += coef[e] * vec::load8(rows[e] + d);
    store_sum<add>(out + d, acc, scale);
  }
  if (d + 4 <= D) {
    v4f acc = {};
    for (int e = 0; e < n; ++e) acc += coef[e] * *reinterpret_cast<const v4f*>(rows[e] + d);
    store_sum<add>(out + d, acc, scale);
    d += 4;
  }
  for (; d < D; ++d) {
    float acc = 0.0f;
    for (int e = 0; e < n; ++e) acc += coef[e] * rows[e][d];
    out[d] = add ? out[d] + scale * acc : scale * acc;
  }
}

// The negatives at counters index[0, count) of the negative stream, drawn from the alias
// table: eight at a time with AVX-512 where the CPU has it and the table is flat or
// interleaved (alias_simd.h, the same draws bit for bit), else one by one. Drawn for a whole
// sentence at once: one centre's K draws at a time ran the vector loop for no lane, and
// the draws cost a quarter of CBOW's time (96 of 375 ns a kept word, WikiText-2, one
// thread), most of it the branch on the coin, which mispredicts.
inline void draw_negatives_at(const TrainParams& a, const uint64_t* index, int64_t count,
                              int32_t* out) {
  int64_t done = 0;
  const bool together = interleaved(a.ns_prob, a.ns_alias, a.ns_stride);
  const bool flat = a.ns_stride.prob == 1 && a.ns_stride.alias == 1;
  if ((together || flat) && alias_simd_supported()) {
    done = count & ~int64_t{7};
    if (together)
      philox_draws_at_avx512<kInterleaved>(a.seed, kStreamW2vNegative, index, done, a.ns_prob,
                                           a.ns_alias, a.V, out);
    else
      philox_draws_at_avx512<kTwoArrays>(a.seed, kStreamW2vNegative, index, done, a.ns_prob,
                                         a.ns_alias, a.V, out);
  }
  for (int64_t j = done; j < count; ++j) {
    const Philox4 r = philox_at(a.seed, kStreamW2vNegative, index[j]);
    const int64_t bucket = uniform_index(r.x[0], r.x[1], a.V);
    const double coin = uniform_double(r.x[2], r.x[3]);
    // Both read, then chosen: a select, not a branch that mispredicts.
    const int32_t other = a.ns_alias[bucket * a.ns_stride.alias];
    out[j] = coin < static_cast<double>(a.ns_prob[bucket * a.ns_stride.prob])
                 ? static_cast<int32_t>(bucket) : other;
  }
}

// The negatives of one sentence's predictions: add() the counters of each prediction's
// draws, then draw() them all; ids[j] is the negative at the j-th counter added.
struct SentenceNegatives {
  std::vector<uint64_t> index;
  std::vector<int32_t> ids;
  void clear() { index.clear(); }
  // count draws at counters first, first + 1, ...
  void add(uint64_t first, int count) {
    for (int k = 0; k < count; ++k) index.push_back(first + static_cast<uint64_t>(k));
  }
  void draw(const TrainParams& a) {
    ids.resize(index.size());
    draw_negatives_at(a, index.data(), static_cast<int64_t>(index.size()), ids.data());
  }
};

// Sentence s after subsampling: the kept ids, their global token counters and their
// effective half-windows (subsample first, then window over the survivors, as word2vec.c
// and gensim do).
struct KeptSentence {
  std::vector<int32_t> ids;
  std::vector<uint64_t> counter;
  std::vector<int> win;
  std::vector<uint32_t> words;  // [4, raw tokens] the tokens' Philox words

  // The tokens' draws come first, eight lanes of AVX-512 at a time where the CPU has them;
  // then the survivors are kept without a branch on the coin, which mispredicted on the
  // words that subsampling may drop. CBOW, one thread: 295-304 -> 281-282 ns a kept word.
  FS_ALWAYS_INLINE void fill(const TrainParams& a, int64_t s) {
    const int64_t begin = s == 0 ? 0 : a.sentence_ends[s - 1], end = a.sentence_ends[s];
    const int64_t n = end - begin;
    const uint64_t first = a.first_token + static_cast<uint64_t>(begin);
    words.resize(4 * n);
    ids.resize(n);
    counter.resize(n);
    win.resize(n);
    int64_t j = 0;
    if (alias_simd_supported()) {
      j = n & ~int64_t{7};
      philox_words_avx512(a.seed, kStreamW2vToken, first, j, words.data(), n);
    }
    for (; j < n; ++j) {
      const Philox4 r = philox_at(a.seed, kStreamW2vToken, first + static_cast<uint64_t>(j));
      for (int q = 0; q < 4; ++q) words[q * n + j] = r.x[q];
    }
    int kept = 0;
    for (j = 0; j < n; ++j) {
      const Philox4 r{{words[j], words[n + j], words[2 * n + j], words[3 * n + j]}};
      const int32_t w = a.tokens[begin + j];
      ids[kept] = w;
      counter[kept] = first + static_cast<uint64_t>(j);
      win[kept] = effective_window(r, a.window, a.shrink);
      kept += keep_token(r, a.keep_prob[w]) ? 1 : 0;
    }
    ids.resize(kept);
    counter.resize(kept);
    win.resize(kept);
  }
  int size() const { return static_cast<int>(ids.size()); }
  // Centre i's window [lo, hi) (i itself excluded from its contexts); returns the contexts.
  FS_ALWAYS_INLINE int span(int i, int& lo, int& hi) const {
    lo = std::max(0, i - win[i]);
    hi = std::min(size(), i + win[i] + 1);
    return hi - lo - 1;
  }
};

// The learning rate of sentence s on the linear schedule.
FS_ALWAYS_INLINE float sentence_rate(const TrainParams& a, int64_t s) {
  return learning_rate(a.alpha, a.min_alpha, static_cast<double>(a.words_before[s]),
                       a.total_words);
}

// Runs work(0) .. work(workers - 1) on at most torch's thread count of threads (as
// parallel_for would: a thread takes a contiguous share of the workers, in order; the caller's
// thread the first), and rethrows the first exception once all have finished. Plain
// threads, not parallel_for's OpenMP pool: its threads spin while they wait (at a batch's
// end and between the training loop's calls), which on a shared machine took CPU from the
// other worker and the reader thread (WikiText-2, CBOW, 2 workers: 0.59 -> 0.49 CPU s an
// epoch, the same as OMP_WAIT_POLICY=passive gave). A thread costs tens of microseconds; a
// call trains ~10^5 words.
template <class Work>
void run_workers(int64_t workers, const Work& work) {
  const int64_t threads =
      std::max<int64_t>(1, std::min<int64_t>(workers, torch::stable::get_num_threads()));
  const int64_t share = (workers + threads - 1) / threads;
  std::vector<std::exception_ptr> errors(threads);
  auto run_share = [&](int64_t t) {
    try {
      for (int64_t w = t * share; w < std::min(workers, (t + 1) * share); ++w) work(w);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> started;
  started.reserve(threads - 1);
  try {
    for (int64_t t = 1; t < threads; ++t) started.emplace_back(run_share, t);
  } catch (...) {  // no more threads to be had: the caller's takes the shares left
    for (int64_t t = static_cast<int64_t>(started.size()) + 1; t < threads; ++t) run_share(t);
  }
  run_share(0);
  for (std::thread& t : started) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// Trains the batch with num_workers threads, Hogwild, by train(a, s_begin, s_end, Stats&,
// WorkerRows&) on runs of whole sentences; returns float64 [3] = (loss, positive
// predictions, tokens kept). The runs are of about kChunkTokens tokens (more runs than
// workers), which the workers take in order from a shared counter: a worker that the OS
// descheduled (the machine may be shared) delays only its current run, not a fixed half of
// the batch. With one worker the runs are trained in batch order.
template <class Train>
Tensor train_hogwild(const TrainParams& a, int64_t num_workers, const Tensor& tokens,
                     const Train& train) {
  constexpr int64_t kChunkTokens = 2048;
  const int64_t S = a.S, N = a.N;
  const int64_t workers = std::max<int64_t>(1, std::min(num_workers, S));
  const int64_t runs = std::max<int64_t>(1, std::min(S, (N + kChunkTokens - 1) / kChunkTokens));
  std::vector<int64_t> cut(runs + 1, S);
  cut[0] = 0;
  for (int64_t r = 1; r < runs; ++r) {
    const int64_t target = N * r / runs;
    cut[r] = std::lower_bound(a.sentence_ends, a.sentence_ends + S, target) - a.sentence_ends;
    cut[r] = std::max(cut[r], cut[r - 1]);
  }
  std::vector<Stats> stats(workers);
  std::atomic<int64_t> next{0};
  std::mutex merge_lock;  // with one worker there are no private rows to merge
  run_workers(workers, [&](int64_t w) {
    // Each worker counts on its own stack: the workers' entries of `stats` share a cache
    // line, and every logistic step adds to the loss, so counting there directly made two
    // threads slower than one on the hierarchical softmax (false sharing).
    Stats mine;
    WorkerRows rows(a, workers > 1 ? &merge_lock : nullptr, workers);
    for (int64_t r = next++; r < runs; r = next++) train(a, cut[r], cut[r + 1], mine, rows);
    rows.merge();
    stats[w] = mine;
  });
  Tensor out = zeros({3}, kDouble, tokens.device());
  double* o = data<double>(out);
  for (const Stats& s : stats) {
    o[0] += s.loss;
    o[1] += static_cast<double>(s.examples);
    o[2] += static_cast<double>(s.kept);
  }
  return out;
}

}  // namespace w2v
}  // namespace fastsoftmax
