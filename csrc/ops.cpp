// The one place every fastsoftmax op schema is declared, through LibTorch's stable ABI
// (STABLE_TORCH_LIBRARY). Each device file registers its own implementation
// (STABLE_TORCH_LIBRARY_IMPL, or TORCH_LIBRARY_IMPL until it is ported); Python adds fake
// (meta) kernels and autograd in fastsoftmax/ops/, one module per op family.
#include <torch/csrc/stable/library.h>

namespace {

void define_ops(torch::stable::detail::StableLibrary& m) {
  // Samplers. `seed` is an int64 tensor of one element on the sampler's device; `kind` is
  // 0 alias table, 1 uniform, 2 log-uniform (prob and alias are ignored unless 0).
  m.def("alias_build(Tensor weights) -> (Tensor prob, Tensor alias)");
  m.def(
      "sample(Tensor prob, Tensor alias, Tensor seed, int num_classes, int kind, SymInt[] size)"
      " -> Tensor");
  m.def(
      "sample_unique(Tensor prob, Tensor alias, Tensor seed, int num_classes, int kind,"
      " int num_sampled) -> (Tensor sampled, Tensor num_tries)");
  // The device checks' switch and counter (stable.h): defer_checks 1 defers the value checks
  // of device ids, 0 makes them read back at once, -1 leaves them; returns how many reads of
  // device data to the host this library's ops have made. `like` is any CPU tensor.
  m.def("device_reads(Tensor like, int defer_checks) -> int");

  // Losses. Forward and backward are separate ops, joined in Python by register_autograd;
  // the samples are inputs, never redrawn. input [N, D], weight [V, D], bias [V],
  // target [N, T] (a row of ignore_index is ignored). Per-row losses come back in the
  // accumulation dtype (float32, or float64 for float64 input); reduction happens in Python.
  // `sparse` is read by the backward only: grad_weight is then the touched rows [U, D] with
  // their ids [U] (ascending); otherwise the dense [V, D] gradient and an empty ids tensor.
  // A backward's `deterministic` is torch.are_deterministic_algorithms_enabled(), passed by
  // fastsoftmax/ops/ (a stable kernel cannot ask for it): CUDA then sums the weight
  // gradient in a fixed order instead of with atomics.
  //
  // A forward's `need_grad` says whether a backward will follow (fastsoftmax/ops passes
  // torch.is_grad_enabled() and an input requiring grad): when false the saved gradient
  // pieces are neither computed nor kept, and come back with 0 rows.
  //
  // Negative sampling: negatives [N, K] (per row) or [K] (shared); coef [N, T + K] holds
  // dloss/dscore of every (row, class) pair for the backward.
  m.def(
      "negative_sampling_forward(Tensor input, Tensor weight, Tensor target, Tensor negatives,"
      " int ignore_index, bool sparse, bool need_grad) -> (Tensor loss, Tensor coef)");
  m.def(
      "negative_sampling_backward(Tensor grad_loss, Tensor input, Tensor weight, Tensor target,"
      " Tensor negatives, Tensor coef, int ignore_index, bool sparse,"
      " bool deterministic=False) -> (Tensor grad_input, Tensor grad_weight,"
      " Tensor grad_weight_ids)");
  // Sampled softmax (mode 0) and NCE (mode 1) over one candidate set sampled [S] shared by
  // the batch, TensorFlow's _compute_sampled_logits: logits - log(expected count) - log_z,
  // accidental hits masked when asked. grad_logits [N, S] (input dtype) and grad_true [N, T]
  // are dloss/dlogit, kept for the backward.
  m.def(
      "sampled_logits_forward(Tensor input, Tensor weight, Tensor? bias, Tensor target,"
      " Tensor sampled, Tensor true_expected_count, Tensor sampled_expected_count,"
      " Tensor log_z, int mode, bool remove_accidental_hits, int ignore_index, bool sparse,"
      " bool need_grad) -> (Tensor loss, Tensor grad_logits, Tensor grad_true)");
  m.def(
      "sampled_logits_backward(Tensor grad_loss, Tensor input, Tensor weight, Tensor target,"
      " Tensor sampled, Tensor grad_logits, Tensor grad_true, bool has_bias, int ignore_index,"
      " bool sparse, bool deterministic=False) -> (Tensor grad_input, Tensor grad_weight,"
      " Tensor grad_bias, Tensor grad_weight_ids)");
  // Margin (hinge) losses over a block of scores made by torch's matmul (fastsoftmax/margin.py):
  // scores [N, C], target_score [N] (same dtype), target [N] (ignore_index allowed),
  // candidates [C] or [N, C], the class of each score column; a column equal to the row's
  // target is left out. mode 0: per row sum_j max(0, margin - s_y + s_j)^p (p 1 or 2; 0
  // counts the violators); mode 1: WARP, L(floor((V - 1) / trials)) times the hinge of the
  // first violating column (csrc/common/margin_math.h); V = num_classes. Per-row loss in the
  // accumulation dtype; the backward recomputes from the scores and returns dloss/dscores
  // and dloss/dtarget_score.
  m.def(
      "margin_rank_forward(Tensor scores, Tensor target_score, Tensor target,"
      " Tensor candidates, float margin, int p, int mode, int num_classes,"
      " int ignore_index) -> Tensor");
  m.def(
      "margin_rank_backward(Tensor grad_loss, Tensor scores, Tensor target_score,"
      " Tensor target, Tensor candidates, float margin, int p, int mode, int num_classes,"
      " int ignore_index) -> (Tensor grad_scores, Tensor grad_target_score)");
  // The scores of per-row candidates, s[n, k] = input[n].weight[ids[n, k]] + bias[ids[n, k]]
  // (ids int64 [N, K] in [0, V)), as fused gather-dots: no [N, K, D] block of gathered rows.
  // Scores in the accumulation dtype; the backward's `deterministic` as the losses'.
  m.def("row_scores_forward(Tensor input, Tensor weight, Tensor? bias, Tensor ids) -> Tensor");
  m.def(
      "row_scores_backward(Tensor grad_scores, Tensor input, Tensor weight, Tensor ids,"
      " bool has_bias, bool deterministic=False) -> (Tensor grad_input, Tensor grad_weight,"
      " Tensor grad_bias)");
  // word2vec: one SGD pass of skip-gram (sg) or CBOW over a batch of sentences with
  // negative sampling (negative > 0), hierarchical softmax (hs) or both, updating syn0 and
  // syn1neg [V, D] and syn1 [V - 1, D] in place.
  // tokens: int32 in-vocabulary ids of the batch, concatenated; sentence_ends: int64 [S]
  // exclusive end of each sentence in tokens; words_before: int64 [S] raw corpus words
  // trained before each sentence (all epochs), which sets its learning rate on the linear
  // schedule alpha -> min_alpha over total_words; keep_prob: float32 [V] subsampling keep
  // probabilities; (ns_prob, ns_alias): the alias table of the negative distribution;
  // first_token: global counter of tokens[0] (see csrc/common/word2vec_math.h).
  // hs: word w's Huffman path is hs_paths[hs_offsets[w] .. hs_offsets[w + 1]) (int32 steps
  // 2 * inner node + code, root first, word2vec.c's points and codes; hs_offsets int64
  // [V + 1]). With negative = 0 syn1neg and the alias table, and without hs syn1 and the
  // paths, are not read (may be empty). lockf: gensim's vectors_lockf, float32 [L]: word w's
  // input-vector updates are scaled by lockf[w % L] (empty: by 1).
  // The update order (word2vec_math.h): round_size 0 is word2vec.c's sequential order, run
  // by num_workers CPU threads Hogwild (more than one alerts under torch's deterministic
  // mode), or on CUDA by one warp (num_workers = 1 only); round_size R > 0 is lockstep rounds
  // of R centres, whose result does not depend on num_workers (CUDA warps at most; the CPU
  // replays it on one thread, num_workers = 1). deterministic: on CUDA, rounds sum their
  // updates in 64-bit fixed point, bit-identical from run to run (float atomics otherwise).
  // Returns float64 [3] = (summed loss, positive predictions, tokens kept after subsampling).
  m.def(
      "word2vec_train(Tensor(a!) syn0, Tensor(b!) syn1neg, Tensor tokens, Tensor sentence_ends,"
      " Tensor words_before, Tensor keep_prob, Tensor ns_prob, Tensor ns_alias, int seed,"
      " int first_token, bool sg, bool cbow_mean, int window, int negative,"
      " bool shrink_windows, float alpha, float min_alpha, float total_words,"
      " int num_workers, Tensor(c!) syn1, Tensor hs_paths, Tensor hs_offsets, Tensor lockf,"
      " bool hs, int round_size=0, bool deterministic=False)"
      " -> Tensor");
  // word2vec_train's negative sampling in minibatches of shared negatives
  // (csrc/cpu/word2vec_batched.cpp, CPU only): the kept centres of each sentence in groups of
  // `group`, one set of K negatives drawn per group, each group one step whose scores are a
  // small matrix product. The arguments up to num_workers and lockf are word2vec_train's
  // (no hierarchical softmax: negative > 0). Returns word2vec_train's float64 [3].
  m.def(
      "word2vec_train_batched(Tensor(a!) syn0, Tensor(b!) syn1neg, Tensor tokens,"
      " Tensor sentence_ends, Tensor words_before, Tensor keep_prob, Tensor ns_prob,"
      " Tensor ns_alias, int seed, int first_token, bool sg, bool cbow_mean, int window,"
      " int negative, bool shrink_windows, float alpha, float min_alpha, float total_words,"
      " int num_workers, Tensor lockf, int group=1) -> Tensor");

  // Hierarchical softmax. The tree is given as links int32 [2V - 1]: nodes
  // 0..V-1 are the classes (leaves), node V + i is inner node i, links[x] = 2 * (inner id of
  // x's parent) + (branch bit of x), -1 at the root (see csrc/cpu/huffman_tree.cpp).
  // huffman_tree builds word2vec.c's Huffman tree from class counts (int64 or float64 [V],
  // CPU): (links, code lengths int64 [V]); `sort` orders the classes by falling count first
  // (ties by rising id), as word2vec.c sorts its vocabulary.
  m.def("huffman_tree(Tensor counts, bool sort) -> (Tensor links, Tensor lengths)");
  // word2vec's corpus_file reader (a host op, CPU only): text uint8 [B], whole lines of a
  // UTF-8 file; the vocabulary's words as UTF-8 bytes vocab_bytes uint8 [sum of lengths],
  // word i ending at vocab_ends[i] (int64 [V], exclusive). Returns word2vec_train's tokens
  // (int32 in-vocabulary ids), sentence_ends (int64 [S], exclusive, in tokens), the raw
  // words of each sentence (int64 [S], out-of-vocabulary ones included) and the offset of
  // the first byte that is not UTF-8 (-1 if none; the scan stops there). Words split as
  // Python's str.split(); lines of more than max_sentence_words words are cut into pieces.
  m.def(
      "corpus_encode(Tensor text, Tensor vocab_bytes, Tensor vocab_ends,"
      " int max_sentence_words) -> (Tensor tokens, Tensor sentence_ends,"
      " Tensor sentence_words, int bad_offset)");
  // Its vocabulary scan: the distinct words of text (read as above) in first-seen order, as
  // UTF-8 bytes word_bytes uint8 with exclusive ends word_ends int64 [U], their counts int64
  // [U], the sentences and raw words of text, and the first bad byte's offset (or -1).
  m.def(
      "corpus_count(Tensor text, int max_sentence_words) -> (Tensor word_bytes,"
      " Tensor word_ends, Tensor counts, int sentences, int words, int bad_offset)");
  // input [N, D], weight [V - 1, D] (one row per inner node), target [N] (ignore_index
  // allowed). The loss of row n is -sum over the inner nodes i on its class's path of
  // log sigmoid((1 - 2 b) w_i.h), b the branch bit taken at i (word2vec.c: code 0 is the
  // sigmoid's side). max_depth is the longest code length: coef [N, max_depth] holds
  // dloss/d(w_i.h) and nodes [N, max_depth] the inner ids along the path from the class up
  // (padding: id V - 1 and coefficient 0), both kept for the backward. A path that does not
  // reach the root within max_depth (links not from one tree) raises on the CPU and gives a
  // NaN loss on CUDA. The backward's `deterministic` is torch.are_deterministic_algorithms_
  // enabled(), passed by fastsoftmax/ops/ (a stable kernel cannot ask for it): CUDA then
  // sums the weight gradient in a fixed order instead of with atomics.
  m.def(
      "hierarchical_softmax_forward(Tensor input, Tensor weight, Tensor target, Tensor links,"
      " int max_depth, int ignore_index, bool sparse) -> (Tensor loss, Tensor coef,"
      " Tensor nodes)");
  m.def(
      "hierarchical_softmax_backward(Tensor grad_loss, Tensor input, Tensor weight,"
      " Tensor nodes, Tensor coef, bool sparse, bool deterministic=False)"
      " -> (Tensor grad_input, Tensor grad_weight, Tensor grad_weight_ids)");
}

}  // namespace

// The emulated CUDA build (tests only; see csrc/cuda/runtime.cuh) declares the same schemas
// in a namespace of its own, whose CPU kernels are the CUDA sources run by the emulator.
#ifdef FASTSOFTMAX_EMULATE_CUDA
STABLE_TORCH_LIBRARY(fastsoftmax_emu, m) { define_ops(m); }
#else
STABLE_TORCH_LIBRARY(fastsoftmax, m) { define_ops(m); }
#endif
