// CPU word2vec with negative sampling in minibatches of shared negatives (HogBatch, Ji et al.;
// with groups of centres, the context combining of pSGNScc, Rengasamy et al.). The kept
// centres of a sentence are cut into groups of `group` consecutive centres; one set of K
// negatives, drawn once for the group, serves every prediction in it:
//   skip-gram: each (context, centre) pair of the group is one prediction, whose input is the
//     context's row of syn0 and whose outputs are the centre's row of syn1neg (label 1) and the
//     K negatives (label 0): word2vec.c's convention, input = context, output = centre;
//   CBOW: each centre is one prediction, its input the mean (or sum) of its contexts' rows.
// A group is one step: every score reads the tables as they were when the group began, so the
// scores are one small matrix product X Y^T (X the inputs, Y the targets and negatives), the
// output rows move by G^T X and the inputs by G Y, G the coefficients alpha (label - sigma),
// and each output row is written once. A negative equal to a prediction's own centre is
// skipped for that prediction, as word2vec.c and gensim skip it.
//
// Random draws: negative k of the group whose first centre is global token t is
// Philox(seed, kStreamW2vNegative, t * K + k) (CBOW's counter of one centre in the pairs
// order). tests/reference_word2vec.py (w2v_batched_reference) is the float64 definition.
// Workers run Hogwild as in the pairs order (w2v::train_hogwild); one worker is a pure
// function of the inputs and the seed.
#include <algorithm>
#include <vector>

#include "vec_math.h"
#include "word2vec_cpu.h"

namespace fastsoftmax {
namespace {

using vec::hsum;
using vec::load8;
using vec::v8f;
using w2v::KeptSentence;
using w2v::Stats;
using w2v::TrainParams;
using w2v::WorkerRows;
using w2v::combine;
using w2v::prefetch_row;

// out[p * M + m] = x[p] . y[m] for P inputs and M rows at once: each eight floats of x[p] are
// loaded once for M products and each of y[m] once for P. Each product is summed as with
// P = 1 (eight lanes, their pairwise sum, then the floats left one by one), so any P gives
// the same scores bit for bit; two inputs at once gave twelve independent sums where one gave
// six chains of twelve multiply-adds.
template <int M, int P>
FS_ALWAYS_INLINE void dots(const float* const* x, float* const* y, float* out, int64_t D) {
  v8f acc[P][M] = {};
  int64_t d = 0;
  for (; d + 8 <= D; d += 8) {
    v8f xv[P];
    for (int p = 0; p < P; ++p) xv[p] = load8(x[p] + d);
    for (int m = 0; m < M; ++m) {
      const v8f yv = load8(y[m] + d);
      for (int p = 0; p < P; ++p) acc[p][m] += xv[p] * yv;
    }
  }
  for (int p = 0; p < P; ++p)
    for (int m = 0; m < M; ++m) {
      float r = hsum(acc[p][m]);
      for (int64_t e = d; e < D; ++e) r += x[p][e] * y[m][e];
      out[p * M + m] = r;
    }
}

// out[p * n + m] = x[p] . y[m] for m < n (n <= 8) and P inputs.
template <int P>
FS_ALWAYS_INLINE void dot_rows(const float* const* x, float* const* y, int n, float* out,
                               int64_t D) {
  switch (n) {
    case 8: dots<8, P>(x, y, out, D); break;
    case 7: dots<7, P>(x, y, out, D); break;
    case 6: dots<6, P>(x, y, out, D); break;
    case 5: dots<5, P>(x, y, out, D); break;
    case 4: dots<4, P>(x, y, out, D); break;
    case 3: dots<3, P>(x, y, out, D); break;
    case 2: dots<2, P>(x, y, out, D); break;
    case 1: dots<1, P>(x, y, out, D); break;
    default: break;
  }
}

// s[r * M + m] = in[r] . y[m] for one prediction r (in blocks of eight rows), or for r and
// r + 1 at once when they score the same rows and M <= 8.
FS_ALWAYS_INLINE void score_rows(const float* const* in, float* const* y, int M, int pairs,
                                 float* s, int64_t D) {
  if (pairs == 2) {
    dot_rows<2>(in, y, M, s, D);
    return;
  }
  for (int m = 0; m < M; m += 8) {
    const int rows = std::min(8, M - m);
    float part[8];
    dot_rows<1>(in, y + m, rows, part, D);
    std::copy(part, part + rows, s + m);
  }
}

// One group's predictions and their coefficients. Columns: the group's centres' output rows
// (one per centre with contexts, its "slot"), then the K negatives.
struct Group {
  std::vector<const float*> in;  // [n] each prediction's input vector
  std::vector<int> slot;         // [n] its centre's column
  std::vector<float*> out;       // [slots + K] output rows
  std::vector<int32_t> word;     // [slots + K] their word ids
  // Per prediction: the columns it updates and their coefficients (for G Y).
  std::vector<float*> row_cols;  // [n, 1 + K]
  std::vector<float> row_coef;
  std::vector<int> row_used;     // [n]
  std::vector<float> score, softplus, sigma;  // [n, 1 + K] s, softplus(s), sigma(s)
  // Per column: the inputs that update it and their coefficients (for G^T X).
  std::vector<const float*> col_ins;  // [slots + K, n]
  std::vector<float> col_coef;
  std::vector<int> col_used;     // [slots + K]
  std::vector<float> dout;       // [slots + K, D] the output rows' updates
  std::vector<float> h, dh;      // CBOW: [slots, D] inputs and their updates
  std::vector<int> centre;       // [slots] the centre of each slot (sentence position)
  std::vector<float*> y;         // [1 + K] one prediction's columns
  std::vector<const float*> ctx; // CBOW: the rows summed into one h, or one dh
  std::vector<float> ones;       // 1.0 coefficients for those sums
  std::vector<int> lo, hi;       // CBOW: [slots] each centre's window

  // h and dh hold a whole group from the start: the predictions point into h.
  Group(const TrainParams& a, int group)
      : h(a.sg ? 0 : static_cast<size_t>(group) * a.D), dh(h.size()), y(1 + a.negative),
        ctx(std::max(2 * a.window, group)),
        ones(ctx.size(), 1.0f), lo(group), hi(group) {}
  // Room for n predictions over `cols` columns.
  void reserve(int n, int cols, int64_t D, int K) {
    if (static_cast<int>(row_used.size()) < n) {
      row_used.resize(n);
      row_cols.resize(static_cast<size_t>(n) * (1 + K));
      row_coef.resize(row_cols.size());
      score.resize(row_cols.size());
      softplus.resize(row_cols.size());
      sigma.resize(row_cols.size());
    }
    if (col_ins.size() < static_cast<size_t>(n) * cols) {
      col_ins.resize(static_cast<size_t>(n) * cols);
      col_coef.resize(col_ins.size());
    }
    if (static_cast<int>(col_used.size()) < cols) {
      col_used.resize(cols);
      dout.resize(static_cast<size_t>(cols) * D);
    }
  }
};

// Scores every prediction of the group against its centre's column and the negatives, adds
// the losses and fills the per-prediction and per-column coefficient lists. The logistic
// functions run on all the group's scores at once, eight at a time (vec_math.h): with
// s = f for a negative and -f for the centre, the loss is softplus(s) and the coefficient
// alpha (label - sigma(f)) is +-alpha sigma(s).
FS_ALWAYS_INLINE void score_group(const TrainParams& a, Group& g, int slots, float alpha,
                                  Stats& st) {
  const int K = a.negative, n = static_cast<int>(g.in.size()), cols = slots + K;
  const int M = 1 + K;
  std::fill(g.col_used.begin(), g.col_used.begin() + cols, 0);
  float* const* y = g.y.data();  // the prediction's columns: its centre's, then the negatives
  float* s = g.score.data();
  for (int k = 0; k < K; ++k) g.y[1 + k] = g.out[slots + k];
  for (int r = 0; r < n;) {
    g.y[0] = g.out[g.slot[r]];
    const int pairs = (M <= 8 && r + 1 < n && g.slot[r + 1] == g.slot[r]) ? 2 : 1;
    score_rows(&g.in[r], y, M, pairs, s + r * M, a.D);
    for (int p = 0; p < pairs; ++p, ++r) s[r * M] = -s[r * M];
  }
  vec::softplus_sigmoid(s, static_cast<int64_t>(n) * M, g.softplus.data(), g.sigma.data());
  float loss = 0.0f;
  for (int r = 0; r < n; ++r) {
    int used = 0;
    for (int c = 0; c < M; ++c) {
      const int col = c == 0 ? g.slot[r] : slots + c - 1;
      if (c > 0 && g.word[col] == g.word[g.slot[r]]) continue;  // the centre drawn as noise
      loss += g.softplus[r * M + c];
      if (w2v::outside_logistic_range(s[r * M + c])) continue;  // gensim's rule
      const float coef = (c == 0 ? alpha : -alpha) * g.sigma[r * M + c];
      g.row_cols[r * M + used] = g.out[col];
      g.row_coef[r * M + used] = coef;
      ++used;
      const int e = g.col_used[col]++;
      g.col_ins[col * n + e] = g.in[r];
      g.col_coef[col * n + e] = coef;
    }
    g.row_used[r] = used;
  }
  st.loss += loss;
}

// CBOW's input update: each context position of the group's centres moves once, by the sum
// of the dh of the centres whose window holds it (neighbouring centres share most of their
// contexts, so this writes each row once where the pairs order writes it once per centre).
FS_ALWAYS_INLINE void update_contexts(const TrainParams& a, Group& g, const KeptSentence& ks) {
  const int slots = static_cast<int>(g.centre.size());
  int first = ks.size(), last = 0;
  for (int t = 0; t < slots; ++t) {
    ks.span(g.centre[t], g.lo[t], g.hi[t]);
    first = std::min(first, g.lo[t]);
    last = std::max(last, g.hi[t]);
  }
  for (int p = first; p < last; ++p) {
    int n = 0;
    for (int t = 0; t < slots; ++t)
      if (p >= g.lo[t] && p < g.hi[t] && p != g.centre[t]) g.ctx[n++] = &g.dh[t * a.D];
    if (n == 0) continue;
    const int32_t w = ks.ids[p];
    combine<true>(g.ones.data(), g.ctx.data(), n, w2v::lock_factor(a, w),
                  a.syn0 + static_cast<int64_t>(w) * a.D, a.D);
  }
}

// The group's step once scored. Skip-gram: the output rows' updates G^T X from the inputs
// as they were (into dout), then the inputs' G Y in place from the output rows as they were,
// then the output rows. CBOW: the inputs' updates dh = G Y first (its inputs h are copies, so
// the output rows then move in place by G^T H), then the context rows (update_contexts; dh
// is divided by the count for a sum, as in the pairs order).
FS_ALWAYS_INLINE void update_group(const TrainParams& a, Group& g, const KeptSentence& ks,
                                   int slots, bool sg) {
  const int K = a.negative, n = static_cast<int>(g.in.size()), cols = slots + K;
  const int64_t D = a.D;
  if (sg) {
    for (int c = 0; c < cols; ++c)
      combine<false>(&g.col_coef[c * n], &g.col_ins[c * n], g.col_used[c], 1.0f,
                     &g.dout[c * D], D);
  }
  int lo, hi;
  for (int r = 0; r < n; ++r) {
    const float* coef = &g.row_coef[r * (1 + K)];
    float* const* rows = &g.row_cols[r * (1 + K)];
    if (sg) {
      // The input is the context's row itself.
      float* x = const_cast<float*>(g.in[r]);
      const int32_t w = static_cast<int32_t>((x - a.syn0) / D);
      combine<true>(coef, rows, g.row_used[r], w2v::lock_factor(a, w), x, D);
    } else {
      const int contexts = ks.span(g.centre[r], lo, hi);
      combine<false>(coef, rows, g.row_used[r],
                     a.cbow_mean ? 1.0f : 1.0f / static_cast<float>(contexts), &g.dh[r * D],
                     D);
    }
  }
  for (int c = 0; c < cols; ++c) {
    if (!g.col_used[c]) continue;
    if (sg) w2v::axpy(1.0f, &g.dout[c * D], g.out[c], D);
    else combine<true>(&g.col_coef[c * n], &g.col_ins[c * n], g.col_used[c], 1.0f, g.out[c], D);
  }
  if (!sg) update_contexts(a, g, ks);
}

// Builds the predictions of the centres [c0, c1) of the sentence (their negatives `negs`
// drawn), scores and updates them; returns the logistic steps taken.
FS_ALWAYS_INLINE int64_t train_group(const TrainParams& a, const KeptSentence& ks, int c0,
                                     int c1, const int32_t* negs, float alpha, Group& g,
                                     Stats& st, WorkerRows& rows) {
  const int K = a.negative;
  const int64_t D = a.D;
  g.in.clear();
  g.slot.clear();
  g.out.clear();
  g.word.clear();
  g.centre.clear();
  int slots = 0;
  for (int i = c0; i < c1; ++i) {
    int lo, hi;
    const int contexts = ks.span(i, lo, hi);
    if (contexts <= 0) continue;
    g.out.push_back(rows.output(ks.ids[i]));
    g.word.push_back(ks.ids[i]);
    g.centre.push_back(i);
    if (a.sg) {
      for (int j = lo; j < hi; ++j) {
        if (j == i) continue;
        g.in.push_back(a.syn0 + static_cast<int64_t>(ks.ids[j]) * D);
        g.slot.push_back(slots);
      }
    } else {
      // h = sum (or mean) of the context rows, as they are before the group's update: one
      // pass, the sum of each eight floats kept in a register.
      float* h = &g.h[slots * D];
      int c = 0;
      for (int j = lo; j < hi; ++j)
        if (j != i) g.ctx[c++] = a.syn0 + static_cast<int64_t>(ks.ids[j]) * D;
      combine<false>(g.ones.data(), g.ctx.data(), contexts,
                     a.cbow_mean ? 1.0f / static_cast<float>(contexts) : 1.0f, h, D);
      g.in.push_back(h);
      g.slot.push_back(slots);
    }
    ++slots;
  }
  const int n = static_cast<int>(g.in.size());
  if (n == 0) return 0;
  for (int k = 0; k < K; ++k) {
    g.out.push_back(rows.output(negs[k]));
    g.word.push_back(negs[k]);
  }
  g.reserve(n, slots + K, D, K);
  score_group(a, g, slots, alpha, st);
  update_group(a, g, ks, slots, a.sg);
  st.examples += n;
  return static_cast<int64_t>(n) * (1 + K);
}

// Trains sentences [s_begin, s_end), group after group. The sentence's negatives are drawn
// first, and the next group's rows prefetched before the current group trains, so that their
// cache misses overlap its arithmetic. Inlined into an AVX2+FMA and a baseline copy
// (vec::with_best_isa).
FS_ALWAYS_INLINE void train_batched_body(const TrainParams& a, int group, int64_t s_begin,
                                         int64_t s_end, Stats& st, WorkerRows& rows) {
  const int K = a.negative;
  const int64_t D = a.D;
  KeptSentence ks;
  Group g(a, group);
  w2v::SentenceNegatives drawn;
  for (int64_t s = s_begin; s < s_end; ++s) {
    const float alpha = w2v::sentence_rate(a, s);
    ks.fill(a, s);
    const int L = ks.size();
    st.kept += L;
    if (L <= 1) continue;
    // The sentence's negatives, drawn at once: the group starting at centre c0 has K of them.
    drawn.clear();
    for (int c0 = 0; c0 < L; c0 += group) drawn.add(ks.counter[c0] * static_cast<uint64_t>(K), K);
    drawn.draw(a);
    auto prefetch_ahead = [&](int c0) __attribute__((always_inline)) {
      const int32_t* negs = drawn.ids.data() + (c0 / group) * K;
      for (int k = 0; k < K; ++k) prefetch_row(rows.output(negs[k]), D);
      const int c1 = std::min(L, c0 + group);
      int lo, hi, lo_last, hi_last;
      ks.span(c0, lo, hi);
      ks.span(c1 - 1, lo_last, hi_last);
      for (int j = lo; j < hi_last; ++j)
        prefetch_row(a.syn0 + static_cast<int64_t>(ks.ids[j]) * D, D);
      for (int i = c0; i < c1; ++i) prefetch_row(rows.output(ks.ids[i]), D);
    };
    prefetch_ahead(0);
    for (int c0 = 0; c0 < L; c0 += group) {
      if (c0 + group < L) prefetch_ahead(c0 + group);
      rows.advance(train_group(a, ks, c0, std::min(L, c0 + group),
                               drawn.ids.data() + (c0 / group) * K, alpha, g, st, rows));
    }
  }
}

void train_batched(const TrainParams& a, int group, int64_t b, int64_t e, Stats& st,
                   WorkerRows& rows) {
  vec::with_best_isa([&]() FS_INLINE_LAMBDA { train_batched_body(a, group, b, e, st, rows); });
}

Tensor word2vec_train_batched_cpu(
    const Tensor& syn0, const Tensor& syn1neg, const Tensor& tokens,
    const Tensor& sentence_ends, const Tensor& words_before, const Tensor& keep_prob,
    const Tensor& ns_prob, const Tensor& ns_alias, int64_t seed, int64_t first_token, bool sg,
    bool cbow_mean, int64_t window, int64_t negative, bool shrink_windows, double alpha,
    double min_alpha, double total_words, int64_t num_workers, const Tensor& lockf,
    int64_t group) {
  FS_CHECK_VALUE(negative > 0, "word2vec_train_batched: shares negatives between "
                 "predictions, so it needs negative > 0, got ", negative);
  FS_CHECK_VALUE(group >= 1 && group <= 1024, "word2vec_train_batched: group (centres "
                 "sharing one set of negatives) must lie in [1, 1024], got ", group);
  // No hierarchical softmax: its tables are not read (syn1 and the paths stand in empty).
  const TrainParams a = w2v::prepare_train(
      syn0, syn1neg, tokens, sentence_ends, words_before, keep_prob, ns_prob, ns_alias, seed,
      first_token, sg, cbow_mean, window, negative, shrink_windows, alpha, min_alpha,
      total_words, num_workers, syn0, tokens, sentence_ends, lockf, /*hs=*/false,
      /*round_size=*/0);
  const int g = static_cast<int>(group);
  return w2v::train_hogwild(
      a, num_workers, tokens,
      [g](const TrainParams& p, int64_t b, int64_t e, Stats& st, WorkerRows& rows) {
        train_batched(p, g, b, e, st, rows);
      });
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("word2vec_train_batched", TORCH_BOX(&word2vec_train_batched_cpu));
}

}  // namespace fastsoftmax
