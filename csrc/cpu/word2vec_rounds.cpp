// word2vec in lockstep rounds on the CPU: the CUDA trainer's update order
// (csrc/cuda/word2vec_rounds.cuh, defined in word2vec_math.h), replayed on one thread. CI
// checks the emulated CUDA kernels against this replay, and this replay is what measures the
// GPU's quality on a CPU (bench/word2vec_gpu_quality.py). The two differ only in the order of
// float sums: the GPU adds a round's updates of a row in whatever order its warps arrive.
//
// A round reads the tables as they were when it began and writes nothing into them: every
// update goes to a delta row, created on the row's first update of the round, with the sum of
// the row's bounds (L of word2vec_math.h). At the end of the round each touched row moves by
// round_damping(L) times its delta.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../common/philox.h"
#include "../common/word2vec_host.h"
#include "vec.h"
#include "word2vec_rounds.h"

namespace fastsoftmax {
namespace w2v {
namespace {

// The kept stream of a batch: subsampling and window shrink of every token, as the
// sequential trainer draws them; the survivors of all sentences in order.
struct KeptStream {
  std::vector<int32_t> ids, win;
  std::vector<uint64_t> gid;  // global token counter (the Philox counter)
  std::vector<int64_t> end;   // [S] kept tokens through each sentence
};

KeptStream keep_tokens(const TrainParams& a) {
  KeptStream k;
  k.end.resize(a.S);
  for (int64_t s = 0, i = 0; s < a.S; ++s) {
    for (; i < a.sentence_ends[s]; ++i) {
      const uint64_t t = a.first_token + static_cast<uint64_t>(i);
      const Philox4 r = philox_at(a.seed, kStreamW2vToken, t);
      if (!keep_token(r, a.keep_prob[a.tokens[i]])) continue;
      k.ids.push_back(a.tokens[i]);
      k.gid.push_back(t);
      k.win.push_back(effective_window(r, a.window, a.shrink));
    }
    k.end[s] = static_cast<int64_t>(k.ids.size());
  }
  return k;
}

// The updates of one [rows, D] table during a round. Delta rows are handed out in order of
// first touch from a pool that only grows (a round touches at most a few rows per centre), so
// memory follows the rows touched, not the vocabulary.
class RoundDelta {
 public:
  void init(float* table, int64_t rows, int64_t D) {
    table_ = table;
    D_ = D;
    slot_.assign(rows, -1);
  }
  // Row `row`'s delta, to add into; its bound grows by `bound`.
  FS_ALWAYS_INLINE float* add(int64_t row, float bound) {
    int64_t& slot = slot_[row];
    if (slot < 0) {
      slot = static_cast<int64_t>(touched_.size());
      touched_.push_back(row);
      bound_.push_back(0.0f);
      if (pool_.size() < touched_.size() * D_) pool_.resize(touched_.size() * D_);
      std::fill_n(pool_.data() + slot * D_, D_, 0.0f);
    }
    bound_[slot] += bound;
    return pool_.data() + slot * D_;
  }
  // Ends the round: each touched row += round_damping(L) * delta.
  void apply() {
    for (size_t k = 0; k < touched_.size(); ++k) {
      vec::axpy<float, float>(table_ + touched_[k] * D_, round_damping(bound_[k]),
                              pool_.data() + k * D_, D_);
      slot_[touched_[k]] = -1;
    }
    touched_.clear();
    bound_.clear();
  }

 private:
  float* table_ = nullptr;
  int64_t D_ = 0;
  std::vector<int64_t> slot_;   // [rows] the row's delta in the pool, -1: untouched
  std::vector<int64_t> touched_;
  std::vector<float> bound_, pool_;
};

// work += g * out and delta += g * in, one pass.
FS_ALWAYS_INLINE void update_unit(float g, const float* __restrict in,
                                  const float* __restrict out, float* __restrict delta,
                                  float* __restrict work, int64_t D) {
  int64_t d = 0;
  for (; d + 8 <= D; d += 8) {
    *reinterpret_cast<vec::v8f*>(work + d) += g * vec::load8(out + d);
    *reinterpret_cast<vec::v8f*>(delta + d) += g * vec::load8(in + d);
  }
  for (; d < D; ++d) {
    work[d] += g * out[d];
    delta[d] += g * in[d];
  }
}

struct RoundTrainer {
  const TrainParams& a;
  RoundDelta syn0, syn1neg, syn1;
  double loss = 0;
  int64_t examples = 0;

  // One logistic unit at the snapshot: `in` (|in|^2 = in_sq) should score row `row` of
  // `table` as `label`. The row's delta takes g * in, work takes g * out, and in_bound the
  // input's share of the bound (alpha |out|^2). Outside (-6, 6) nothing moves (gensim's rule).
  FS_ALWAYS_INLINE void unit(const float* in, float in_sq, const float* table,
                             RoundDelta& delta, int64_t row, float label, float alpha,
                             float* work, float& in_bound) {
    const float* out = table + row * a.D;
    const float f = vec::dot<float, float>(in, out, a.D);
    loss += neg_log_sigmoid(label > 0.5f ? f : -f);
    if (outside_logistic_range(f)) return;
    const float g = (label - sigmoid(f)) * alpha;
    in_bound += round_bound(alpha, vec::dot<float, float>(out, out, a.D));
    update_unit(g, in, out, delta.add(row, round_bound(alpha, in_sq)), work, a.D);
  }

  // One prediction of `target` from `in`, in the sequential trainer's order of units.
  FS_ALWAYS_INLINE void predict(const float* in, int32_t target, const int32_t* negs,
                                float alpha, float* work, float& in_bound) {
    const float in_sq = vec::dot<float, float>(in, in, a.D);
    if (a.hs)
      for (int64_t q = a.hs_offsets[target]; q < a.hs_offsets[target + 1]; ++q) {
        const int32_t step = a.hs_paths[q];
        unit(in, in_sq, a.syn1, syn1, hs_node(step), hs_label(step), alpha, work, in_bound);
      }
    if (a.negative == 0) return;
    unit(in, in_sq, a.syn1neg, syn1neg, target, 1.0f, alpha, work, in_bound);
    for (int k = 0; k < a.negative; ++k)
      if (negs[k] != target)
        unit(in, in_sq, a.syn1neg, syn1neg, negs[k], 0.0f, alpha, work, in_bound);
  }

  FS_ALWAYS_INLINE void draw(uint64_t counter, int count, int32_t* out) const {
    for (int j = 0; j < count; ++j) {
      const Philox4 r = philox_at(a.seed, kStreamW2vNegative, counter + j);
      out[j] = static_cast<int32_t>(alias_draw(r, a.ns_prob, a.ns_alias, a.V, a.ns_stride));
    }
  }

  // The predictions of centre i of a sentence of kept ids sen[0 .. L).
  FS_ALWAYS_INLINE void centre(const int32_t* sen, int L, int i, int win, uint64_t gid, float alpha,
              std::vector<float>& work, std::vector<float>& h, std::vector<int32_t>& negs) {
    const int64_t D = a.D;
    const int W = a.window, K = a.negative;
    const int lo = std::max(0, i - win), hi = std::min(L, i + win + 1);
    const int contexts = hi - lo - 1;
    if (contexts <= 0) return;
    if (a.sg) {
      if (K > 0) draw(gid * static_cast<uint64_t>(2 * W) * K, contexts * K, negs.data());
      for (int k = 0; k < contexts; ++k) {
        const int j = lo + k + (lo + k >= i ? 1 : 0);
        std::fill(work.begin(), work.end(), 0.0f);
        float bound = 0.0f;
        predict(a.syn0 + static_cast<int64_t>(sen[j]) * D, sen[i], negs.data() + k * K, alpha,
                work.data(), bound);
        vec::axpy<float, float>(syn0.add(sen[j], bound), lock_factor(a, sen[j]), work.data(),
                                D);
        ++examples;
      }
      return;
    }
    if (K > 0) draw(gid * static_cast<uint64_t>(K), K, negs.data());
    std::fill(h.begin(), h.end(), 0.0f);
    for (int j = lo; j < hi; ++j)
      if (j != i) vec::axpy<float, float>(h.data(), 1.0f, a.syn0 + int64_t{sen[j]} * D, D);
    const float inv = 1.0f / static_cast<float>(contexts);
    if (a.cbow_mean)
      for (float& x : h) x *= inv;
    std::fill(work.begin(), work.end(), 0.0f);
    float bound = 0.0f;
    predict(h.data(), sen[i], negs.data(), alpha, work.data(), bound);
    // Each context row takes work (mean: the 1/count is in h), or work / count (sum), as the
    // sequential trainer; its bound is the input's over the count.
    const float scale = a.cbow_mean ? 1.0f : inv;
    for (int j = lo; j < hi; ++j)
      if (j != i)
        vec::axpy<float, float>(syn0.add(sen[j], bound * inv), scale * lock_factor(a, sen[j]),
                                work.data(), D);
    ++examples;
  }

  void end_round() {
    syn0.apply();
    if (a.negative > 0) syn1neg.apply();
    if (a.hs) syn1.apply();
  }
};

FS_ALWAYS_INLINE void train(const TrainParams& a, double* stats) {
  const KeptStream kept = keep_tokens(a);
  RoundTrainer t{a, {}, {}, {}};
  t.syn0.init(a.syn0, a.V, a.D);
  if (a.negative > 0) t.syn1neg.init(a.syn1neg, a.V, a.D);
  if (a.hs) t.syn1.init(a.syn1, a.V - 1, a.D);
  std::vector<float> work(a.D), h(a.D);
  std::vector<int32_t> negs(static_cast<size_t>(2 * a.window) * std::max(a.negative, 1));
  const int64_t total = static_cast<int64_t>(kept.ids.size());
  int64_t s = 0;
  for (int64_t c = 0; c < total; ++c) {
    while (kept.end[s] <= c) ++s;  // empty sentences have no kept positions
    const int64_t begin = s == 0 ? 0 : kept.end[s - 1];
    const float alpha = learning_rate(a.alpha, a.min_alpha,
                                      static_cast<double>(a.words_before[s]), a.total_words);
    t.centre(kept.ids.data() + begin, static_cast<int>(kept.end[s] - begin),
             static_cast<int>(c - begin), kept.win[c], kept.gid[c], alpha, work, h, negs);
    if ((c + 1) % a.round_size == 0 || c + 1 == total) t.end_round();
  }
  stats[0] = t.loss;
  stats[1] = static_cast<double>(t.examples);
  stats[2] = static_cast<double>(total);
}

}  // namespace

void train_rounds_cpu(const TrainParams& a, double* stats) {
  vec::with_best_isa([&]() FS_INLINE_LAMBDA { train(a, stats); });
}

}  // namespace w2v
}  // namespace fastsoftmax
