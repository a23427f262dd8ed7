"""word2vec (skip-gram and CBOW with negative sampling, hierarchical softmax or both) with
gensim 4's API and semantics.

The training hot loop is the native op ``fastsoftmax::word2vec_train`` (csrc/cpu/word2vec.cpp,
csrc/cuda/word2vec.cu) over a batch of sentences: on CPU threads word2vec.c's sequential order,
Hogwild; on CUDA lockstep rounds, whose model does not depend on the warps' timing and which
the CPU can replay (``round_size``; docs/word2vec-gpu.md). A corpus given as a list or tuple
is encoded once and the ids reused by later epochs; any other iterable, and corpus_file, is
streamed and re-encoded every epoch.

The package, in the shape of every model of fastsoftmax:
  data.py          the corpus, gensim's vocabulary steps, the batches fed to the native op
  model.py         ``Word2Vec``: constructor, vocabulary, weights, prediction, save/load
  training.py      the epochs, the learning-rate schedule, callbacks and progress logs
  keyedvectors.py  ``KeyedVectors``: the vectors and gensim's queries on them
  evaluation.py    word-pair similarity and analogy scores
  formats.py       word2vec.c's text and binary vector files
  model_files.py   the Word2Vec model files
  persistence.py   the .npz of plain arrays and the .npy files beside it (mmap='r')
  settings.py      the constructor's keywords, checked
  ppmi_vectors.py  ``PPMIVectors``: count-based vectors (PPMI and a truncated SVD)
  compat.py, keyedvectors_compat.py  gensim 4 API kept out of model.py and keyedvectors.py
                   (prepare_vocab, from_gensim, add_vector, ...)
  errors.py        errors of misuse that are both gensim's exception type and ours
The command line is fastsoftmax/cli/word2vec.py.

Semantics, as gensim 4 (word2vec_inner.pyx) and word2vec.c:
  * vocabulary: words kept by min_count / trim_rule / max_final_vocab, sorted by decreasing
    count (ties: the word seen later first); ``build_vocab(..., update=True)`` adds the new
    words at the end, adds the new counts to the old, keeps every trained vector and grows
    syn1neg (zero rows) and the noise table; with hs=1 the Huffman tree is rebuilt from the
    new counts and syn1 grows by zero rows, as in gensim;
  * initial vectors: gensim 4's, uniform in [-1, 1) / vector_size from
    ``numpy.random.default_rng(seed)`` over the [V, D] table (so the same seed starts from the
    same vectors as gensim); syn1neg starts at zero;
  * subsampling: keep probability (sqrt(c / (s T)) + 1) (s T) / c capped at 1, T the retained
    corpus words; subsampled tokens are removed before windows are formed;
  * windows: the half-window is drawn uniformly from 1..window (``shrink_windows=True``);
  * skip-gram: each context word's input vector predicts the center word; CBOW: the mean
    (``cbow_mean=1``) or sum (0) of the context vectors predicts it and every context vector
    receives the same gradient (divided by the count for the sum);
  * negatives: drawn from counts ** ns_exponent; a negative equal to the target is skipped;
    a prediction whose score lies outside (-6, 6) updates nothing (gensim's MAX_EXP rule);
  * hierarchical softmax (hs=1): a Huffman tree of the vocabulary counts (``hs_tree``),
    gensim's by default (its heap: the same codes and inner-node ids) or, with
    ``huffman="word2vec.c"``, word2vec.c's CreateBinaryTree, which breaks ties between equal
    counts the other way (same code lengths, other groupings; on WikiText-2 it scored 0.02
    lower on WS-353 for skip-gram, see docs/benchmarks.md); syn1 [V, D] starting at zero
    (as gensim's; the last row belongs to no inner node and stays zero); each
    prediction walks the target's path root first, with
    g = (1 - code - sigma(syn1[point] . h)) alpha, before its negatives when negative > 0
    (word2vec.c's order; the input vector's update is applied after both);
  * learning rate: linear from alpha to min_alpha over the raw words (OOV included) of all
    epochs (or over sentences when train() gets total_examples but no total_words); each
    sentence uses the rate of the progress made before it.

Deviations, on purpose: the logistic is exact inside (-6, 6) (gensim reads a 1000-entry
table); sentences longer than 10,000 words are split, not truncated; random numbers come from
Philox keyed by ``seed`` and the token position, so one worker reproduces a run and CPU and
CUDA draw the same samples; the training loss (compute_loss) counts every prediction.
``wv.vectors_lockf`` is gensim's per-word factor on the input-vector updates (word w's by
``vectors_lockf[w % len]``; 0 locks a vector), applied by the native trainer on both devices.
"""

from ..textfiles import LineSentence
from .keyedvectors import KeyedVectors
from .model import Word2Vec
from .ppmi_vectors import PPMIVectors

__all__ = ["KeyedVectors", "LineSentence", "PPMIVectors", "Word2Vec"]
