// The one place every fastsoftmax op schema is declared. Each device file registers its
// own implementation with TORCH_LIBRARY_IMPL; Python adds fake (meta) kernels and
// autograd in fastsoftmax/ops.py.
#include <torch/library.h>

TORCH_LIBRARY(fastsoftmax, m) {
  // Samplers. `seed` is an int64 tensor of one element on the sampler's device; `kind` is
  // 0 alias table, 1 uniform, 2 log-uniform (prob and alias are ignored unless 0).
  m.def("alias_build(Tensor weights) -> (Tensor prob, Tensor alias)");
  m.def(
      "sample(Tensor prob, Tensor alias, Tensor seed, int num_classes, int kind, SymInt[] size)"
      " -> Tensor");
  m.def(
      "sample_unique(Tensor prob, Tensor alias, Tensor seed, int num_classes, int kind,"
      " int num_sampled) -> (Tensor sampled, Tensor num_tries)");

  // word2vec (issue 4): one Hogwild SGD pass of skip-gram (sg) or CBOW with negative
  // sampling over a batch of sentences, updating syn0 and syn1neg [V, D] in place.
  // tokens: int32 in-vocabulary ids of the batch, concatenated; sentence_ends: int64 [S]
  // exclusive end of each sentence in tokens; words_before: int64 [S] raw corpus words
  // trained before each sentence (all epochs), which sets its learning rate on the linear
  // schedule alpha -> min_alpha over total_words; keep_prob: float32 [V] subsampling keep
  // probabilities; (ns_prob, ns_alias): the alias table of the negative distribution;
  // first_token: global counter of tokens[0] (see csrc/common/word2vec.h). Returns float64
  // [3] = (summed loss, positive predictions, tokens kept after subsampling).
  m.def(
      "word2vec_train(Tensor(a!) syn0, Tensor(b!) syn1neg, Tensor tokens, Tensor sentence_ends,"
      " Tensor words_before, Tensor keep_prob, Tensor ns_prob, Tensor ns_alias, int seed,"
      " int first_token, bool sg, bool cbow_mean, int window, int negative,"
      " bool shrink_windows, float alpha, float min_alpha, float total_words,"
      " int num_workers) -> Tensor");
}
