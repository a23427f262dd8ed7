// CPU word2vec training: skip-gram and CBOW with hierarchical softmax, negative sampling or
// both, Hogwild SGD over a batch of sentences, as word2vec.c and gensim's inner loop do.
// Threads take runs of whole sentences from a shared counter and update the shared tables
// without locks, except their most used rows (WorkerRows, in word2vec_rows.h); with one
// worker the result is a pure function of the inputs and the seed.
//
// Shapes: V vocabulary, D vector size, N tokens in the batch, S sentences, W window,
// K negatives. syn0 [V, D] input vectors, syn1neg [V, D] output vectors of negative
// sampling, syn1 [V - 1, D] inner-node vectors of the hierarchical softmax.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "word2vec_cpu.h"
#include "word2vec_rounds.h"
#include "word2vec_rows.h"

namespace fastsoftmax {
namespace {

using w2v::KeptSentence;
using w2v::Stats;
using w2v::TrainParams;
using w2v::WorkerRows;
using w2v::axpy;
using w2v::dot;
using w2v::fast_neg_log_sigmoid;
using w2v::fast_sigmoid;
using w2v::prefetch_row;

// The two updates of one logistic unit in one pass over the output row:
// work += g * out (with out's old value), out += g * in.
FS_ALWAYS_INLINE void update_unit(float g, const float* __restrict in, float* __restrict out,
                        float* __restrict work, int64_t D) {
  int64_t d = 0;
  for (; d + 8 <= D; d += 8) {
    const vec::v8f o = vec::load8(out + d);
    *reinterpret_cast<vec::v8f*>(work + d) += g * o;
    *reinterpret_cast<vec::v8f*>(out + d) = o + g * vec::load8(in + d);
  }
  for (; d < D; ++d) {
    const float o = out[d];
    work[d] += g * o;
    out[d] = o + g * in[d];
  }
}

// One logistic unit: `in` should score `out` as `label` (1 or 0). A score outside (-6, 6)
// updates nothing (gensim's rule, w2v::prediction_error); its loss still counts. work
// accumulates the input side's update g * out, with g = alpha * (label - sigma(in . out))
// (the ascent direction of log sigma), and out moves by g * in.
FS_ALWAYS_INLINE void logistic_step(const float* in, float* out, float label, float alpha, float* work,
                          int64_t D, Stats& st) {
  const float f = dot(in, out, D);
  st.loss += fast_neg_log_sigmoid(label > 0.5f ? f : -f);
  if (w2v::outside_logistic_range(f)) return;  // gensim's rule, see word2vec_math.h
  update_unit((label - fast_sigmoid(f)) * alpha, in, out, work, D);
}

// in . a and in . b in one pass over `in`, each summed exactly as vec::dot sums it (four
// eight-float partial sums over 32-float blocks, their pairwise total, then the floats left
// one by one), so bit for bit the two dot() calls.
FS_ALWAYS_INLINE void dot_two(const float* in, const float* a, const float* b, float& fa,
                              float& fb, int64_t D) {
  using vec::load8;
  vec::v8f a0 = {}, a1 = {}, a2 = {}, a3 = {}, b0 = {}, b1 = {}, b2 = {}, b3 = {};
  int64_t d = 0;
  for (; d + 32 <= D; d += 32) {
    const vec::v8f x0 = load8(in + d), x1 = load8(in + d + 8);
    const vec::v8f x2 = load8(in + d + 16), x3 = load8(in + d + 24);
    a0 += x0 * load8(a + d);
    b0 += x0 * load8(b + d);
    a1 += x1 * load8(a + d + 8);
    b1 += x1 * load8(b + d + 8);
    a2 += x2 * load8(a + d + 16);
    b2 += x2 * load8(b + d + 16);
    a3 += x3 * load8(a + d + 24);
    b3 += x3 * load8(b + d + 24);
  }
  for (; d + 8 <= D; d += 8) {
    const vec::v8f x = load8(in + d);
    a0 += x * load8(a + d);
    b0 += x * load8(b + d);
  }
  float ra = vec::hsum((a0 + a1) + (a2 + a3)), rb = vec::hsum((b0 + b1) + (b2 + b3));
  for (; d < D; ++d) {
    ra += in[d] * a[d];
    rb += in[d] * b[d];
  }
  fa = ra;
  fb = rb;
}

// The negative-sampling steps of one prediction in one pass over their rows, when the rows
// are distinct: no step then reads a row that an earlier step wrote, so scoring all rows
// first and then updating them is word2vec.c's order exactly (the same dot products, work
// summed in the same order, each row moved by the same fused multiply-add), bit for bit.
// The pass reads `in` and `work` once for all steps instead of once a step, and each row
// once for both its updates (work += g out, out += g in). Returns false, having done
// nothing, when two of the rows are one (the same negative drawn twice); predict() then
// takes the steps one by one.
constexpr int kMaxFusedRows = 16;
FS_ALWAYS_INLINE bool fused_negative_steps(const TrainParams& a, const float* in, int32_t target,
                                           const int32_t* negs, float alpha, float* work,
                                           Stats& st, WorkerRows& rows) {
  const int K = a.negative;
  if (K + 1 > kMaxFusedRows) return false;
  int32_t id[kMaxFusedRows];
  int n = 0;
  id[n++] = target;
  for (int k = 0; k < K; ++k) {
    if (negs[k] == target) continue;  // skipped, as in the steps one by one
    for (int j = 1; j < n; ++j)
      if (id[j] == negs[k]) return false;
    id[n++] = negs[k];
  }
  const int64_t D = a.D;
  float* out[kMaxFusedRows];
  float g[kMaxFusedRows];
  float* row[kMaxFusedRows];
  float score[kMaxFusedRows];
  for (int j = 0; j < n; ++j) row[j] = rows.output(id[j]);
  int j = 0;
  for (; j + 2 <= n; j += 2) dot_two(in, row[j], row[j + 1], score[j], score[j + 1], D);
  if (j < n) score[j] = dot(in, row[j], D);
  int m = 0;  // the rows that move: scores outside the logistic range move nothing
  for (j = 0; j < n; ++j) {
    const float f = score[j];
    st.loss += fast_neg_log_sigmoid(j == 0 ? f : -f);
    if (w2v::outside_logistic_range(f)) continue;
    out[m] = row[j];
    g[m++] = ((j == 0 ? 1.0f : 0.0f) - fast_sigmoid(f)) * alpha;
  }
  int64_t d = 0;
  for (; d + 8 <= D; d += 8) {
    const vec::v8f x = vec::load8(in + d);
    vec::v8f acc = vec::load8(work + d);
    for (int j = 0; j < m; ++j) {
      const vec::v8f o = vec::load8(out[j] + d);
      acc += g[j] * o;
      *reinterpret_cast<vec::v8f*>(out[j] + d) = o + g[j] * x;
    }
    *reinterpret_cast<vec::v8f*>(work + d) = acc;
  }
  if (d + 4 <= D) {
    using vec::v4f;
    const v4f x = *reinterpret_cast<const v4f*>(in + d);
    v4f acc = *reinterpret_cast<const v4f*>(work + d);
    for (int j = 0; j < m; ++j) {
      const v4f o = *reinterpret_cast<const v4f*>(out[j] + d);
      acc += g[j] * o;
      *reinterpret_cast<v4f*>(out[j] + d) = o + g[j] * x;
    }
    *reinterpret_cast<v4f*>(work + d) = acc;
    d += 4;
  }
  for (; d < D; ++d) {
    float acc = work[d];
    for (int j = 0; j < m; ++j) {
      const float o = out[j][d];
      acc += g[j] * o;
      out[j][d] = o + g[j] * in[d];
    }
    work[d] = acc;
  }
  return true;
}

// One prediction of `target` from input vector `in`, word2vec.c's order: first the steps of
// target's Huffman path (hs; root first, label 1 - code on inner node point), then the
// target against its K negatives (a negative equal to the target is skipped, as in
// word2vec.c and gensim). The input vector is read unchanged throughout; its update
// accumulates in work.
FS_ALWAYS_INLINE void predict(const TrainParams& a, const float* in, int32_t target,
                              const int32_t* negs, float alpha, float* work, Stats& st,
                              WorkerRows& rows) {
  const int64_t D = a.D;
  if (a.hs) {
    for (int64_t p = a.hs_offsets[target]; p < a.hs_offsets[target + 1]; ++p) {
      const int32_t step = a.hs_paths[p];
      logistic_step(in, rows.node(w2v::hs_node(step)), w2v::hs_label(step), alpha, work,
                    D, st);
    }
  }
  if (a.negative == 0) return;
  if (fused_negative_steps(a, in, target, negs, alpha, work, st, rows)) return;
  logistic_step(in, rows.output(target), 1.0f, alpha, work, D, st);
  for (int k = 0; k < a.negative; ++k) {
    if (negs[k] == target) continue;
    logistic_step(in, rows.output(negs[k]), 0.0f, alpha, work, D, st);
  }
}

// The inner-node rows of word w's Huffman path, asked for ahead of its predictions. The top
// kHotDepth levels (at most 2^kHotDepth - 1 rows) lie on most paths and stay cached, so they
// are not asked for (each row is 7 prefetches at D = 100).
constexpr int kHotDepth = 8;
FS_ALWAYS_INLINE void prefetch_path(const TrainParams& a, int32_t w) {
  if (!a.hs) return;
  for (int64_t p = a.hs_offsets[w] + kHotDepth; p < a.hs_offsets[w + 1]; ++p)
    prefetch_row(a.syn1 + w2v::hs_node(a.hs_paths[p]) * a.D, a.D);
}

// Trains sentences [s_begin, s_end). Inlined, with every helper above (FS_ALWAYS_INLINE),
// into an AVX2+FMA and a baseline copy (vec::with_best_isa).
FS_ALWAYS_INLINE void train_sentences_body(const TrainParams& a, int64_t s_begin,
                                           int64_t s_end, Stats& st, WorkerRows& rows) {
  const int64_t D = a.D;
  const int W = a.window, K = a.negative;
  KeptSentence kept;
  w2v::SentenceNegatives drawn;
  std::vector<int64_t> first_negative;  // [L + 1] where centre i's negatives start in drawn
  std::vector<float> work(D), neu1(D);
  std::vector<const float*> context(2 * W);  // CBOW: the rows summed into neu1
  const std::vector<float> ones(2 * W, 1.0f);
  for (int64_t s = s_begin; s < s_end; ++s) {
    const float alpha = w2v::sentence_rate(a, s);
    kept.fill(a, s);
    const std::vector<int32_t>& sen = kept.ids;
    const std::vector<uint64_t>& gid = kept.counter;
    const int L = kept.size();
    st.kept += L;
    auto span = [&](int i, int& lo, int& hi) __attribute__((always_inline)) {
      return kept.span(i, lo, hi);
    };
    // The sentence's negatives, drawn at once: centre i's are at counters gid[i] K + k
    // (CBOW) or gid[i] 2W K + c K + k for its context c (skip-gram).
    drawn.clear();
    first_negative.assign(1, 0);
    for (int i = 0; i < L && K > 0; ++i) {
      int lo, hi;
      const int contexts = std::max(0, span(i, lo, hi));
      if (a.sg) drawn.add(gid[i] * static_cast<uint64_t>(2 * W) * K, contexts * K);
      else if (contexts > 0) drawn.add(gid[i] * static_cast<uint64_t>(K), K);
      first_negative.push_back(static_cast<int64_t>(drawn.index.size()));
    }
    if (K > 0) drawn.draw(a);
    // The rows of the next center's first prediction are prefetched, so that their cache
    // misses overlap the current center's arithmetic.
    auto prefetch_ahead = [&](int i) __attribute__((always_inline)) {
      int lo, hi;
      const int contexts = span(i, lo, hi);
      if (contexts <= 0) return;
      if (a.sg) {
        prefetch_row(a.syn0 + static_cast<int64_t>(sen[lo == i ? lo + 1 : lo]) * D, D);
      } else {
        // The context rows that were not the previous center's (whose are cached): the
        // ones that enter the (randomly shrunk) window, and the previous center itself.
        int plo = 0, phi = 0;
        if (i > 0) span(i - 1, plo, phi);
        for (int j = lo; j < hi; ++j)
          if (j != i && (j < plo || j >= phi || j == i - 1))
            prefetch_row(a.syn0 + static_cast<int64_t>(sen[j]) * D, D);
      }
      prefetch_path(a, sen[i]);
      if (K == 0) return;
      prefetch_row(rows.output(sen[i]), D);
      const int32_t* negs = drawn.ids.data() + first_negative[i];
      for (int k = 0; k < K; ++k) prefetch_row(rows.output(negs[k]), D);
    };
    if (L > 0) prefetch_ahead(0);
    for (int i = 0; i < L; ++i) {
      if (i + 1 < L) prefetch_ahead(i + 1);
      int lo, hi;
      const int contexts = span(i, lo, hi);
      const int32_t* negs = K > 0 ? drawn.ids.data() + first_negative[i] : nullptr;
      if (contexts > 0 && a.sg) {
        // Each context word's input vector predicts the center word (word2vec.c's order).
        int c = 0;
        for (int j = lo; j < hi; ++j) {
          if (j == i) continue;
          // Prefetch the rows of the next prediction (its input and its negatives).
          if (c + 1 < contexts) {
            const int jn = (j + 1 == i) ? j + 2 : j + 1;
            prefetch_row(a.syn0 + static_cast<int64_t>(sen[jn]) * D, D);
            for (int k = 0; k < K; ++k)
              prefetch_row(rows.output(negs[(c + 1) * K + k]), D);
          }
          float* in = a.syn0 + static_cast<int64_t>(sen[j]) * D;
          std::fill(work.begin(), work.end(), 0.0f);
          predict(a, in, sen[i], negs + c * K, alpha, work.data(), st, rows);
          axpy(w2v::lock_factor(a, sen[j]), work.data(), in, D);
          ++c;
          ++st.examples;
        }
      } else if (contexts > 0) {
        // h = sum (or mean) of the context input vectors predicts the center word; every
        // context vector receives the same input gradient (divided by the count for the sum,
        // as gensim does; for the mean the 1/count is folded into h only, as word2vec.c).
        int c = 0;
        for (int j = lo; j < hi; ++j)
          if (j != i) context[c++] = a.syn0 + static_cast<int64_t>(sen[j]) * D;
        const float inv = 1.0f / static_cast<float>(contexts);
        w2v::combine<false>(ones.data(), context.data(), contexts, a.cbow_mean ? inv : 1.0f,
                            neu1.data(), D);
        std::fill(work.begin(), work.end(), 0.0f);
        predict(a, neu1.data(), sen[i], negs, alpha, work.data(), st, rows);
        if (!a.cbow_mean)
          for (int64_t d = 0; d < D; ++d) work[d] *= inv;
        for (int j = lo; j < hi; ++j)
          if (j != i)
            axpy(w2v::lock_factor(a, sen[j]), work.data(), a.syn0 + static_cast<int64_t>(sen[j]) * D,
                 D);
        ++st.examples;
      }
      if (contexts > 0) {
        const int64_t path = a.hs ? a.hs_offsets[sen[i] + 1] - a.hs_offsets[sen[i]] : 0;
        rows.advance((a.sg ? contexts : 1) * (path + (K > 0 ? 1 + K : 0)));
      }
    }
  }
}

void train_sentences(const TrainParams& a, int64_t b, int64_t e, Stats& st, WorkerRows& rows) {
  vec::with_best_isa([&]() FS_INLINE_LAMBDA { train_sentences_body(a, b, e, st, rows); });
}

Tensor word2vec_train_cpu(const Tensor& syn0, const Tensor& syn1neg, const Tensor& tokens,
                          const Tensor& sentence_ends, const Tensor& words_before,
                          const Tensor& keep_prob, const Tensor& ns_prob, const Tensor& ns_alias,
                          int64_t seed, int64_t first_token, bool sg, bool cbow_mean,
                          int64_t window, int64_t negative, bool shrink_windows, double alpha,
                          double min_alpha, double total_words, int64_t num_workers,
                          const Tensor& syn1, const Tensor& hs_paths, const Tensor& hs_offsets,
                          const Tensor& lockf, bool hs, int64_t round_size,
                          bool /*deterministic: both orders are, on one thread*/) {
  const TrainParams a = w2v::prepare_train(
      syn0, syn1neg, tokens, sentence_ends, words_before, keep_prob, ns_prob, ns_alias, seed,
      first_token, sg, cbow_mean, window, negative, shrink_windows, alpha, min_alpha,
      total_words, num_workers, syn1, hs_paths, hs_offsets, lockf, hs, round_size);
  if (round_size > 0) {
    FS_CHECK_VALUE(num_workers == 1, "word2vec_train: the CPU replays lockstep rounds "
                   "(round_size > 0) on one thread: give num_workers = 1, got ", num_workers);
    Tensor out = zeros({3}, kDouble, tokens.device());
    w2v::train_rounds_cpu(a, data<double>(out));
    return out;
  }
  return w2v::train_hogwild(a, num_workers, tokens, train_sentences);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("word2vec_train", TORCH_BOX(&word2vec_train_cpu));
}

}  // namespace fastsoftmax
