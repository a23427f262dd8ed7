"""The Word2Vec model: gensim 4's constructor and keywords, the vocabulary (fresh and online
update), the weights and the tables the native trainer reads, prediction and persistence.
Training runs in training.py; the semantics are those of the package docstring."""

from __future__ import annotations

import logging
from typing import Callable, Optional

import numpy as np
import torch

from ... import ops
from ...samplers import UnigramSampler
from ...tree import ClassTree
from ..textfiles import MAX_SENTENCE_WORDS
from . import compat, data, model_files, scoring, settings, training
from .errors import EmptyVocabularyError, NotTrainableError
from .keyedvectors import KeyedVectors

logger = logging.getLogger(__name__)


def _refuse(name: str, why: str):
    raise TypeError(f"Word2Vec: {name} {why}")


class Word2Vec:
    """word2vec: skip-gram or CBOW with negative sampling, the hierarchical softmax or both,
    with gensim 4's keywords, meanings and defaults (the package docstring gives the
    semantics). Given a corpus, the constructor builds the vocabulary and trains, as gensim's.

    Args:
        sentences: an iterable of token lists (a list is encoded once and replayed), or None.
        corpus_file: a text file, one sentence a line, read natively (not with sentences).
        vector_size: D, the size of the word vectors.
        alpha, min_alpha: the learning rate, decaying linearly from alpha to min_alpha.
        window: the largest distance between a word and its context.
        min_count: words seen fewer times are left out of the vocabulary.
        max_vocab_size: a cap on the words kept while scanning (None: no cap).
        max_final_vocab: a cap on the vocabulary, raising min_count to meet it.
        sample: the subsampling threshold of frequent words (0: none).
        seed: the seed of the initial vectors and of every random draw.
        workers: CPU threads (word2vec.c's sequential order, Hogwild).
        sg: 1 skip-gram, 0 CBOW.
        hs: 1 trains the hierarchical softmax (a Huffman tree of the counts).
        negative: noise words a prediction (0: none, with hs=1).
        ns_exponent: the power of the counts that the noise is drawn from (0.75).
        cbow_mean: 1 averages the context vectors in CBOW, 0 sums them.
        hashfxn: only Python's hash (gensim 4 ignores it too).
        epochs: passes over the corpus.
        null_word: 1 adds gensim's padding word.
        trim_rule: gensim's vocabulary rule (only with a corpus).
        sorted_vocab: 1 sorts the vocabulary by falling count.
        batch_words: words a job (also the longest sentence, as gensim's).
        compute_loss: keep the training loss (get_latest_training_loss).
        callbacks: gensim callbacks for this constructor's training (only with a corpus).
        comment: free text kept with the model.
        shrink_windows: draw each window's size uniformly in 1..window (word2vec.c's).
        device: "cpu" or "cuda".
        huffman: "gensim" or "word2vec.c": whose Huffman tree hs=1 uses.
        alpha_schedule: "linear" (word2vec.c's) or "gensim-corpus_file" (the slower decay of
            gensim's corpus_file workers).
        round_size: the update order: 0 word2vec.c's sequential one, R > 0 lockstep rounds of
            R centres (the same model whatever the threads or warps), "auto" rounds sized to
            the run; None is 0 on the CPU and "auto" on CUDA (docs/word2vec-gpu.md).
        update: the order of negative sampling's updates: "pairs" word2vec.c's, one
            prediction after another; "batched" minibatches of shared negatives on the CPU
            (each centre's, in CBOW each group's, K negatives shared by its predictions; one
            step of small matrix products); "auto" (the default) batched for skip-gram and
            pairs for CBOW, the faster order that held gensim's quality in each
            (docs/word2vec-quality.md). hs=1, lockstep rounds and CUDA keep the pairs order.
        gpu_warps: removed (refused with its replacement, round_size).

    As in gensim 4, callbacks fire during the constructor's own training only. Without a
    corpus they, like trim_rule, would do nothing, so they are refused (gensim only warns)."""

    def __init__(self, sentences=None, corpus_file=None, vector_size=100, alpha=0.025,
                 window=5, min_count=5, max_vocab_size=None, sample=1e-3, seed=1, workers=3,
                 min_alpha=0.0001, sg=0, hs=0, negative=5, ns_exponent=0.75, cbow_mean=1,
                 hashfxn=hash, epochs=5, null_word=0, trim_rule=None, sorted_vocab=1,
                 batch_words=MAX_SENTENCE_WORDS, compute_loss=False, callbacks=(),
                 comment=None, max_final_vocab=None, shrink_windows=True, *, device="cpu",
                 huffman="gensim", alpha_schedule="linear", round_size=None, update="auto",
                 gpu_warps=None):
        if sentences is not None and corpus_file is not None:
            raise TypeError("give either sentences or corpus_file, not both")  # as gensim
        settings.refuse_removed(hashfxn, gpu_warps)
        self.vector_size = self.layer1_size = settings.positive_int("vector_size", vector_size)
        self.window = settings.positive_int("window", window)
        self.batch_words = settings.positive_int("batch_words", batch_words)
        self.sg, self.hs = int(bool(sg)), settings.flag("hs", hs)
        self.huffman = settings.choice("huffman", huffman, ("gensim", "word2vec.c"))
        self.alpha_schedule = settings.choice("alpha_schedule", alpha_schedule,
                                              ("linear", "gensim-corpus_file"), got="not")
        self.round_size = training.checked_round_size(round_size)
        self.update = settings.choice("update", update, settings.UPDATES)
        self.negative = settings.negatives(negative, self.hs)
        self.epochs, self.min_count = settings.counts(epochs, min_count)
        self.alpha, self.min_alpha = settings.rates(alpha, min_alpha)
        self.ns_exponent, self.cbow_mean = float(ns_exponent), int(bool(cbow_mean))
        self.sample, self.seed = float(sample), int(seed)
        self.workers = settings.worker_count(workers)
        self.device = settings.device_of(device)
        self.max_vocab_size, self.max_final_vocab = max_vocab_size, max_final_vocab
        self.null_word, self.sorted_vocab = int(bool(null_word)), int(bool(sorted_vocab))
        self.compute_loss, self.shrink_windows = bool(compute_loss), bool(shrink_windows)
        self.comment = comment
        self.wv = KeyedVectors(self.vector_size)
        self.raw_vocab: dict = {}
        self.effective_min_count = self.min_count
        self.corpus_count = 0          # sentences in the corpus of the last build_vocab
        self.corpus_total_words = 0    # its raw words (OOV included)
        self.running_training_loss = 0.0
        self.min_alpha_yet_reached = self.alpha  # the lowest rate trained with (gensim's)
        self.train_seconds = 0.0
        self.progress: Optional[Callable[[dict], None]] = None  # called after every batch
        self._tokens_trained = 0       # in-vocabulary tokens fed so far: the Philox counter
        self._syn0 = self._syn1neg = self._syn1 = None
        self.hs_tree: Optional[ClassTree] = None  # the Huffman tree of hs=1 (see huffman)
        self._keep_np = np.zeros(0, dtype=np.float32)
        if sentences is not None or corpus_file is not None:
            self.build_vocab(sentences, corpus_file=corpus_file, trim_rule=trim_rule)
            self.train(sentences, corpus_file=corpus_file, total_examples=self.corpus_count,
                       total_words=self.corpus_total_words, epochs=self.epochs,
                       compute_loss=self.compute_loss, callbacks=callbacks)
        elif trim_rule is not None:
            _refuse("trim_rule", "given without a corpus would be lost: pass it to "
                    "build_vocab instead")
        elif callbacks:  # gensim 4 keeps no callbacks: each train() call fires its own
            _refuse("callbacks", "given without a corpus would never fire: pass them to "
                    "train() instead")

    # -- vocabulary -----------------------------------------------------------------------
    def build_vocab(self, corpus_iterable=None, corpus_file=None, update=False,
                    progress_per=10000, keep_raw_vocab=False, trim_rule=None, min_count=None,
                    sample=None, dry_run=False):
        """Scans the corpus and builds (or, with update=True, extends) the vocabulary, the
        subsampling probabilities, the noise table and the weights (see the package
        docstring)."""
        if dry_run:
            _refuse("dry_run=True", "is not supported: call build_vocab on a copy instead")
        corpus = data.corpus_of(corpus_iterable, corpus_file, passes=1)
        counts, sentences, words = data.scan(corpus, self.max_vocab_size, progress_per, logger)
        self.corpus_count, self.corpus_total_words = sentences, words
        self._prepare_vocab(counts, update, keep_raw_vocab, trim_rule, min_count, sample)

    def scan_vocab(self, corpus_iterable=None, corpus_file=None, progress_per=10000,
                   workers=None, trim_rule=None):
        """gensim's corpus scan alone (raw_vocab, corpus sizes): (total words, sentences)."""
        return compat.scan_vocab(self, corpus_iterable, corpus_file, progress_per, trim_rule)

    def prepare_vocab(self, update=False, keep_raw_vocab=False, trim_rule=None,
                      min_count=None, sample=None, dry_run=False) -> dict:
        """gensim's second step of build_vocab: the vocabulary from raw_vocab (left by
        scan_vocab) under min_count, max_final_vocab, trim_rule and sample, and gensim's
        report (drop_unique, retain_total, downsample_unique, downsample_total,
        num_retained_words). Here it also resets the weights (gensim's prepare_weights);
        dry_run=True only reports, changing nothing."""
        report = compat.vocab_report(self, update, trim_rule, min_count, sample)
        if not dry_run:
            self._prepare_vocab(dict(self.raw_vocab), update, keep_raw_vocab, trim_rule,
                                min_count, sample)
        return report

    @classmethod
    def from_gensim(cls, model, device="cpu"):
        """A fastsoftmax model from a gensim 4 ``Word2Vec`` in memory (models gensim pickled
        are loaded by gensim, never here): settings, vocabulary, counts, keep probabilities,
        vectors and output weights (syn1neg; syn1 with hs=1, the Huffman tree being gensim's),
        ready to query, save or train on (compat.py)."""
        return compat.from_gensim(cls, model, device)

    def reset_from(self, other_model) -> None:
        """other_model's vocabulary and corpus sizes, fresh weights (gensim's; compat.py)."""
        compat.reset_from(self, other_model)

    def build_vocab_from_freq(self, word_freq: dict, keep_raw_vocab=False, corpus_count=None,
                              trim_rule=None, update=False):
        """As build_vocab, from a {word: count} dict instead of a corpus."""
        logger.info("Processing provided word frequencies")
        counts = {w: int(c) for w, c in word_freq.items()}
        self.corpus_count = int(corpus_count or 0)
        self.corpus_total_words = int(sum(counts.values()))
        self._prepare_vocab(counts, update, keep_raw_vocab, trim_rule, None, None)

    def _prepare_vocab(self, counts, update, keep_raw_vocab, trim_rule, min_count, sample):
        if sum(counts.values()) == 0:
            raise EmptyVocabularyError("the corpus is empty: no words to build a vocabulary")
        if update and self._syn0 is None:
            raise RuntimeError("build_vocab(update=True) needs a model that already has a "
                               "vocabulary: build it once without update first")
        if not update:
            self.min_count = self.min_count if min_count is None else int(min_count)
            self.sample = self.sample if sample is None else float(sample)
        mc = data.effective_min_count(counts, self.min_count, self.max_final_vocab)
        self.effective_min_count = mc
        if update:
            compat.update_vocab(self, counts, mc, trim_rule)
        else:
            keys, cnt = data.select(counts, mc, trim_rule, self.sorted_vocab)
            if not keys:
                raise EmptyVocabularyError(f"no word occurs at least min_count={mc} times "
                                           f"in the {sum(counts.values())} words; lower it")
            self._keep_np = data.keep_probabilities(cnt, int(cnt.sum()), self.sample)
            logger.info("sample=%g downsamples %i most-common words", self.sample,
                        int((self._keep_np < 1).sum()))
            if self.null_word:  # padding word, never in a sentence (keep 0 as gensim's)
                keys, cnt = keys + ["\0"], np.append(cnt, 1)
                self._keep_np = np.append(self._keep_np, np.float32(0))
            self.wv = KeyedVectors(self.vector_size, len(keys))
            self.wv.index_to_key = keys
            self.wv.key_to_index = {k: i for i, k in enumerate(keys)}
            self.wv.counts = cnt
            self.estimate_memory()
            logger.info("resetting layer weights")
            self._syn0 = torch.from_numpy(self._initial_vectors(len(keys))).to(self.device)
            self._syn1neg = torch.zeros_like(self._syn0) if self.negative else None
            self._syn1 = (self._syn0.new_zeros(len(keys) - 1, self.vector_size) if self.hs
                          else None)
        self.raw_vocab = counts if keep_raw_vocab else {}
        self._sync_vectors()
        self._tables()

    def _initial_vectors(self, rows: int) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        v = rng.random((rows, self.vector_size), dtype=np.float32)
        return (v * 2.0 - 1.0) / self.vector_size

    def keep_probabilities(self) -> np.ndarray:
        """float32 [V]: the subsampling keep probability of every word."""
        return self._keep_np.copy()

    def _tables(self, tree: Optional[ClassTree] = None) -> None:
        """The tables training reads: keep probabilities, the noise distribution's alias
        table (negative > 0), and the Huffman tree with its paths (hs=1; `tree` when given,
        e.g. by load, otherwise built from the counts)."""
        self._keep = torch.from_numpy(self._keep_np).to(self.device)
        self._ns_prob = self._ns_alias = torch.empty(0, device=self.device)
        if self.negative:
            counts, power = torch.from_numpy(self.wv.counts).double(), self.ns_exponent
            if power < 0:  # gensim allows it (rare words drawn more); the sampler takes >= 0
                counts, power = counts.clamp(min=1) ** power, 1.0
            sampler = UnigramSampler(counts, power, device=self.device)
            self._ns_prob, self._ns_alias = sampler.alias_table
        if self.hs:
            if len(self.wv) < 2:
                raise ValueError("hs=1 needs a vocabulary of at least 2 words, got "
                                 f"{len(self.wv)}")
            build = ClassTree.huffman_heap if self.huffman == "gensim" else ClassTree.huffman
            self.hs_tree = tree or build(torch.from_numpy(self.wv.counts))
            paths, offsets = ops.huffman_paths(self.hs_tree.links, self.hs_tree.lengths)
            self._hs_paths, self._hs_offsets = paths.to(self.device), offsets.to(self.device)
            # gensim's per-word attributes: the root-first branch bits and inner-node ids
            steps = np.split(paths.numpy(), offsets.numpy()[1:-1])
            for attr, part, dtype in (("code", 1, np.uint8), ("point", None, np.int32)):
                values = np.empty(len(steps), dtype=object)
                values[:] = [(s & 1 if part else s >> 1).astype(dtype) for s in steps]
                self.wv.expandos[attr] = values

    def _sync_vectors(self) -> None:
        # On CPU wv.vectors is a view of the training table (no copy); on CUDA, a copy.
        if self._syn0.device.type == "cpu":
            self.wv.vectors = self._syn0.numpy()
        else:
            self.wv.vectors = self._syn0.cpu().numpy()
        self.wv.norms = None

    @property
    def syn1neg(self) -> np.ndarray:
        """float32 [V, D]: the output vectors of negative sampling (negative > 0)."""
        if self._syn1neg is None:
            raise AttributeError("syn1neg: this model has no negative sampling (negative=0)")
        return self._syn1neg.cpu().numpy()

    @property
    def syn1(self) -> np.ndarray:
        """float32 [V, D], gensim's shape: the inner-node vectors of the hierarchical softmax
        (hs=1); row i belongs to inner node i of ``hs_tree`` (word2vec.c's point, the
        ``point`` attribute of wv). A tree of V words has V - 1 inner nodes: the last row,
        which gensim allocates and never uses either, is zero. A copy: writing to it does
        not change the model."""
        if self._syn1 is None:
            raise AttributeError("syn1: this model has no hierarchical softmax (hs=0)")
        return np.vstack((self._syn1.cpu().numpy(),
                          np.zeros((1, self._syn1.shape[1]), dtype=np.float32)))

    def estimate_memory(self, vocab_size=None, report=None) -> dict:
        """Bytes needed by the model, per part, as gensim estimates them."""
        return compat.estimate_memory(self, vocab_size, report)

    # -- training -------------------------------------------------------------------------
    def train(self, corpus_iterable=None, corpus_file=None, total_examples=None,
              total_words=None, epochs=None, start_alpha=None, end_alpha=None, word_count=0,
              queue_factor=2, report_delay=1.0, compute_loss=False, callbacks=()):
        """Trains `epochs` passes, the rate decaying linearly from start_alpha (default alpha)
        to end_alpha (default min_alpha) over epochs x total_examples sentences when that is
        given (gensim's precedence, also when total_words is given too), else over epochs x
        total_words raw words (word2vec.c's unit). As in gensim, the corpus, its size
        (total_examples or total_words: model.corpus_count after build_vocab on the same
        corpus) and epochs must be given, and only this call's `callbacks` fire (those given
        to the constructor served its own training only). The call's rates (when non-zero) and
        epochs replace the model's alpha, min_alpha and epochs, as in gensim. Logs progress every report_delay
        seconds in gensim's format. Returns (words trained after subsampling, raw words)."""
        if self._syn0 is None:
            raise NotTrainableError(compat.untrainable_reason(self))
        if word_count:
            _refuse("word_count", "(words already trained) must be 0")
        if corpus_iterable is None and corpus_file is None:
            raise TypeError("train() needs the corpus: give corpus_iterable (sentences) or "
                            "corpus_file")
        if total_examples is None and total_words is None:
            raise ValueError("train() needs the corpus size for the learning-rate schedule: "
                             "give total_examples or total_words (after build_vocab on the "
                             "same corpus, total_examples=model.corpus_count)")
        if epochs is None or epochs <= 0:
            raise ValueError(f"train() needs a positive epochs count, got {epochs!r} (the "
                             "usual value is epochs=model.epochs)")
        epochs = int(epochs)
        corpus = data.corpus_of(corpus_iterable, corpus_file, passes=epochs)
        # As gensim, the call's rates and epochs stay on the model (a rate of 0 or None
        # keeps the model's), so a later train() or a saved model reports what ran last.
        self.alpha = alpha = float(start_alpha or self.alpha)
        self.min_alpha = min_alpha = float(end_alpha or self.min_alpha)
        self.epochs = epochs
        by_sentence = bool(total_examples)  # gensim: examples first, words otherwise
        per_epoch = int(total_examples if by_sentence else (total_words or 0))
        self.compute_loss = bool(compute_loss)  # per call, as gensim
        callbacks = tuple(callbacks)
        # gensim's warnings (its tests look for these words in the log)
        if self.hs and self.negative:
            logger.warning("Both hierarchical softmax and negative sampling are activated. "
                           "Each prediction trains both output layers, as word2vec.c does; "
                           "set hs=0 or negative=0 if only one was meant.")
        if alpha > self.min_alpha_yet_reached:
            logger.warning("Effective 'alpha' higher than previous training cycles: %g > %g",
                           alpha, self.min_alpha_yet_reached)
        result = training.train_epochs(self, corpus, epochs, alpha, min_alpha, by_sentence,
                                       per_epoch, queue_factor, report_delay, callbacks,
                                       self.alpha_schedule)
        self.min_alpha_yet_reached = min_alpha  # where the linear schedule ends
        return result

    def get_latest_training_loss(self) -> float:
        """Sum of -log sigma over every prediction of the last train() call (0 unless
        compute_loss was set)."""
        return self.running_training_loss

    def predict_output_word(self, context_words_list, topn: int = 10):
        """The topn most probable center words given the context (the mean, or sum with
        cbow_mean=0, of the known context vectors) under a full softmax over syn1neg, as
        gensim; None (with a warning) when no context word is known. Like gensim, it needs
        negative sampling: a model with hs=1 and negative=0 raises RuntimeError."""
        return compat.predict_output_word(self, context_words_list, topn)

    def score(self, sentences, total_sentences=int(1e6), chunksize=100, queue_factor=2,
              report_delay=1):
        """float32 [n]: each sentence's log-probability under the hierarchical softmax (hs=1;
        scoring.py); chunksize, queue_factor, report_delay (gensim's threads): unused."""
        return scoring.score_sentences(self, sentences, int(total_sentences))

    # -- persistence ----------------------------------------------------------------------
    _CONFIG = ("vector_size", "window", "min_count", "sg", "hs", "huffman", "negative",
               "ns_exponent", "cbow_mean", "sample", "alpha", "min_alpha", "epochs", "seed",
               "workers", "max_vocab_size", "max_final_vocab", "null_word", "sorted_vocab",
               "batch_words", "compute_loss", "comment", "shrink_windows", "corpus_count",
               "corpus_total_words", "_tokens_trained", "min_alpha_yet_reached", "alpha_schedule",
               "round_size", "update")

    def save(self, path: str, separately=None, sep_limit=10 * 1024**2, ignore=frozenset(),
             pickle_protocol=None) -> None:
        """All state (vectors, syn1neg and/or syn1 with its Huffman tree, vocabulary, keep
        probabilities, settings) as an .npz of plain arrays and JSON, never unpickled. As
        gensim's, arrays of sep_limit bytes or more, or only those named in `separately`
        (e.g. ["wv_vectors"]), go to .npy files beside it (persistence.py). pickle_protocol:
        no effect; ignore (would leave parts out) is refused."""
        if ignore:
            _refuse("save(ignore=...)", "is not supported: every part of the model is saved")
        model_files.save_model(self, path, separately, sep_limit)

    @model_files.class_only
    def load(cls, path: str, device=None, mmap=None):
        """A model saved by save(), called on the class (as gensim's). mmap='r' maps the .npy
        files: wv.vectors is a read-only np.memmap; training copies the pages it writes."""
        return model_files.load_model(cls, path, device, mmap)
