"""word2vec (skip-gram and CBOW with negative sampling) with gensim's API and semantics.

The training hot loop is the native op ``fastsoftmax::word2vec_train`` (csrc/cpu/word2vec.cpp,
csrc/cuda/word2vec.cu): Hogwild SGD over a batch of sentences, multi-threaded on CPU and one
warp per sentence on CUDA. Python only scans the vocabulary, maps words to ids and feeds
batches; a reader thread does that while the native op (which releases the GIL) trains. A
corpus given as a list or tuple is encoded once (int32 ids) and the ids reused by later
epochs; any other iterable, and corpus_file, is streamed and re-encoded every epoch.

Semantics, as word2vec.c and gensim 4:
  * vocabulary: words with count >= min_count, sorted by decreasing count (ties: the word
    seen later first, as gensim); ``max_vocab_size`` prunes during the scan as gensim does
    (drop words with count < r, r = 1, 2, ... each time the dictionary grows past the cap);
  * subsampling: a word of count c is kept with probability (sqrt(c / (s T)) + 1) (s T) / c,
    capped at 1, where T is the number of retained corpus words and s = ``sample``;
    subsampled tokens are removed before windows are formed;
  * windows: per center word the half-window is drawn uniformly from 1..window
    (``shrink_windows=True``), else it is ``window``;
  * skip-gram: each context word's input vector predicts the center word; CBOW: the mean
    (``cbow_mean=1``) or sum (0) of the context vectors predicts it, and every context word
    receives the same gradient (divided by the number of context words for the sum, as
    gensim does);
  * negatives: drawn from counts ** ns_exponent (Walker alias table, ``UnigramSampler``); a
    negative equal to the target is skipped, not redrawn (as word2vec.c and gensim);
  * learning rate: linear from ``alpha`` to ``min_alpha`` over the raw words (OOV words
    included, as gensim counts them) of all epochs; each sentence uses the rate of the
    progress made before it (gensim updates it per job of 10,000 words, word2vec.c every
    10,000 words per thread).

Deviations, on purpose:
  * the logistic is computed exactly; word2vec.c and gensim look it up in a 1000-entry table
    on [-6, 6] and gensim skips a prediction whose score is outside that range (its gradient
    is below 0.25% of the learning rate there);
  * sentences longer than 10,000 words are split into pieces of 10,000 (gensim's
    corpus_iterable path drops the words after the 10,000th);
  * random numbers come from Philox keyed by ``seed`` and the token position, so one worker
    reproduces a run exactly and CPU and CUDA draw the same samples; the numbers themselves
    differ from gensim's (which also cannot reproduce runs with more than one worker).
  * ``evaluate_word_pairs`` returns plain floats (pearson, spearman, oov %) without p-values,
    so that fastsoftmax needs no scipy.
"""

from __future__ import annotations

import io
import json
import math
import os
import queue
import threading
import time
from collections import defaultdict
from itertools import chain, repeat
from typing import Callable, List, Optional

import numpy as np
import torch

from .. import ops
from ..samplers import UnigramSampler

MAX_SENTENCE_WORDS = 10000
_FORMAT_VERSION = 1


# ---------------------------------------------------------------------------------------
# Corpus reading
# ---------------------------------------------------------------------------------------


class LineSentence:
    """Streams a whitespace-tokenised text file, one sentence per line, re-readable.
    Lines longer than MAX_SENTENCE_WORDS words are split into pieces of that length."""

    def __init__(self, path: str, encoding: str = "utf8"):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"corpus_file {path!r} does not exist")
        self.path = path
        self.encoding = encoding

    def __iter__(self):
        with open(self.path, encoding=self.encoding, errors="strict") as f:
            for line in f:
                words = line.split()
                for start in range(0, max(len(words), 1), MAX_SENTENCE_WORDS):
                    yield words[start : start + MAX_SENTENCE_WORDS]


def _pieces(sentence):
    """A sentence as lists of at most MAX_SENTENCE_WORDS words."""
    if isinstance(sentence, str):
        raise TypeError(
            "sentences must be an iterable of token lists, got a str; split it into words first"
        )
    words = sentence if isinstance(sentence, list) else list(sentence)
    if len(words) <= MAX_SENTENCE_WORDS:
        yield words
    else:
        for start in range(0, len(words), MAX_SENTENCE_WORDS):
            yield words[start : start + MAX_SENTENCE_WORDS]


# ---------------------------------------------------------------------------------------
# KeyedVectors
# ---------------------------------------------------------------------------------------


def _unit_rows(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


def _rank(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (as scipy.stats.rankdata)."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    xs = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    den = math.sqrt(float((a * a).sum()) * float((b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else float("nan")


class KeyedVectors:
    """Words and their vectors: ``index_to_key`` (list), ``key_to_index`` (dict) and
    ``vectors`` (float32 numpy [V, D]), with gensim's query and evaluation methods."""

    def __init__(self, vector_size: int, count: int = 0):
        self.vector_size = int(vector_size)
        self.index_to_key: List[str] = []
        self.key_to_index: dict = {}
        self.vectors = np.zeros((count, self.vector_size), dtype=np.float32)
        self.counts = np.zeros(count, dtype=np.int64)
        self._norms = None  # cached unit vectors, dropped whenever vectors may have changed

    # -- lookup ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.index_to_key)

    def __contains__(self, key) -> bool:
        return key in self.key_to_index

    def has_index_for(self, key) -> bool:
        return key in self.key_to_index

    def get_index(self, key) -> int:
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if 0 <= key < len(self.index_to_key):
                return int(key)
            raise KeyError(f"index {key} out of range for {len(self.index_to_key)} words")
        try:
            return self.key_to_index[key]
        except KeyError:
            raise KeyError(f"Key '{key}' not present in vocabulary") from None

    def get_vector(self, key, norm: bool = False) -> np.ndarray:
        i = self.get_index(key)
        return self._unit()[i] if norm else self.vectors[i]

    def __getitem__(self, keys):
        if isinstance(keys, (str, int, np.integer)):
            return self.get_vector(keys)
        return np.vstack([self.get_vector(k) for k in keys])

    def _unit(self) -> np.ndarray:
        if self._norms is None or self._norms.shape != self.vectors.shape:
            self._norms = _unit_rows(self.vectors)
        return self._norms

    def fill_norms(self, force: bool = False) -> None:
        if force:
            self._norms = None
        self._unit()

    # -- similarity -----------------------------------------------------------------------
    def similarity(self, w1, w2) -> float:
        u = self._unit()
        return float(np.dot(u[self.get_index(w1)], u[self.get_index(w2)]))

    def most_similar(self, positive=(), negative=(), topn: Optional[int] = 10,
                     restrict_vocab: Optional[int] = None):
        """3CosAdd: the words whose unit vectors have the largest cosine with the mean of the
        unit vectors of `positive` minus those of `negative`; the query words themselves are
        excluded. Returns [(word, cosine)], best first (all cosines when topn is None)."""
        if isinstance(positive, (str, int, np.integer)):
            positive = [positive]
        if isinstance(negative, (str, int, np.integer)):
            negative = [negative]
        keys = [(k, 1.0) for k in positive] + [(k, -1.0) for k in negative]
        if not keys:
            raise ValueError("cannot compute similarity with no input")
        u = self._unit()
        ids = [self.get_index(k) for k, _ in keys]
        mean = np.mean([w * u[i] for i, (_, w) in zip(ids, keys)], axis=0)
        norm = np.linalg.norm(mean)
        if norm > 0:
            mean = mean / norm
        limit = len(u) if restrict_vocab is None else min(int(restrict_vocab), len(u))
        dists = u[:limit] @ mean.astype(np.float32)
        if topn is None:
            return dists
        exclude = set(ids)
        k = min(topn + len(exclude), limit)
        if k <= 0:
            return []
        best = np.argpartition(-dists, k - 1)[:k] if k < limit else np.arange(limit)
        best = best[np.argsort(-dists[best], kind="stable")]
        return [(self.index_to_key[i], float(dists[i])) for i in best if i not in exclude][:topn]

    def _restricted(self, restrict_vocab: int, case_insensitive: bool) -> dict:
        """key -> index over the first restrict_vocab words; upper-cased keys map to the most
        frequent spelling when case_insensitive (gensim's rule)."""
        keys = self.index_to_key[:restrict_vocab]
        if case_insensitive:
            return {k.upper(): i for i, k in reversed(list(enumerate(keys)))}
        return {k: i for i, k in enumerate(keys)}

    def evaluate_word_pairs(self, pairs, delimiter: str = "\t", restrict_vocab: int = 300000,
                            case_insensitive: bool = True):
        """Correlation of cosine similarities with human scores on a file of
        `word1<delimiter>word2<delimiter>score` lines ('#' lines are comments). Pairs with a
        word outside the first `restrict_vocab` words are skipped and counted as OOV.
        Returns (pearson, spearman, oov_percent)."""
        vocab = self._restricted(restrict_vocab, case_insensitive)
        u = self._unit()
        gold, model, oov = [], [], 0
        with open(pairs, encoding="utf8") as f:
            for line_no, line in enumerate(f, 1):
                if line.startswith("#") or not line.strip():
                    continue
                fields = line.rstrip("\n").split(delimiter)
                if len(fields) != 3:
                    raise ValueError(
                        f"{pairs}, line {line_no}: expected 3 fields separated by "
                        f"{delimiter!r}, got {len(fields)}: {line.rstrip()!r}"
                    )
                a, b = fields[0].strip(), fields[1].strip()
                try:
                    score = float(fields[2])
                except ValueError:
                    raise ValueError(
                        f"{pairs}, line {line_no}: score {fields[2].strip()!r} is not a number"
                    ) from None
                if case_insensitive:
                    a, b = a.upper(), b.upper()
                if a not in vocab or b not in vocab:
                    oov += 1
                    continue
                gold.append(score)
                model.append(float(np.dot(u[vocab[a]], u[vocab[b]])))
        total = len(gold) + oov
        oov_percent = 100.0 * oov / total if total else 0.0
        if len(gold) < 2:
            return float("nan"), float("nan"), oov_percent
        g, m = np.array(gold), np.array(model)
        return _pearson(g, m), _pearson(_rank(g), _rank(m)), oov_percent

    def evaluate_word_analogies(self, analogies, restrict_vocab: int = 300000,
                                case_insensitive: bool = True):
        """Accuracy on a questions-words.txt file (': section' headers, then `a b c d` lines
        meaning a:b = c:d). The answer is the best 3CosAdd word for b - a + c among the first
        `restrict_vocab` words, excluding a, b and c; questions with a word outside them are
        skipped. Returns (accuracy, sections) with sections as gensim's: a list of
        {'section', 'correct', 'incorrect'} dicts ending with 'Total accuracy'."""
        vocab = self._restricted(restrict_vocab, case_insensitive)
        u = self._unit()[:restrict_vocab]
        sections, section = [], None
        with open(analogies, encoding="utf8") as f:
            for line_no, line in enumerate(f, 1):
                if line.startswith(": "):
                    if section is not None:
                        sections.append(section)
                    section = {"section": line[2:].strip(), "correct": [], "incorrect": []}
                    continue
                if not line.strip():
                    continue
                if section is None:
                    raise ValueError(
                        f"{analogies}, line {line_no}: question before any ': section' header"
                    )
                words = line.upper().split() if case_insensitive else line.split()
                if len(words) != 4:
                    raise ValueError(
                        f"{analogies}, line {line_no}: expected 4 words, got {len(words)}: "
                        f"{line.rstrip()!r}"
                    )
                a, b, c, expected = words
                if any(w not in vocab for w in words):
                    continue
                ia, ib, ic = vocab[a], vocab[b], vocab[c]
                query = u[ib] - u[ia] + u[ic]
                dists = u @ (query / max(np.linalg.norm(query), 1e-30))
                dists[[ia, ib, ic]] = -np.inf
                # The best word that is not a question word; with case_insensitive a
                # different spelling of a question word does not count either (gensim).
                guess = None
                k = min(64, len(dists))
                top = np.argpartition(-dists, k - 1)[:k]
                for best in top[np.argsort(-dists[top], kind="stable")].tolist():
                    guess = self.index_to_key[best]
                    guess = guess.upper() if case_insensitive else guess
                    if guess not in (a, b, c):
                        break
                (section["correct"] if guess == expected else section["incorrect"]).append(
                    (a, b, c, expected)
                )
        if section is not None:
            sections.append(section)
        total = {
            "section": "Total accuracy",
            "correct": [q for s in sections for q in s["correct"]],
            "incorrect": [q for s in sections for q in s["incorrect"]],
        }
        sections.append(total)
        n = len(total["correct"]) + len(total["incorrect"])
        return (len(total["correct"]) / n if n else 0.0), sections

    # -- word2vec.c formats ---------------------------------------------------------------
    def save_word2vec_format(self, path: str, binary: bool = False) -> None:
        """word2vec.c's format: a `V D` header line, then per word the word, a space and its
        D floats: as text (9 significant digits, which round-trips float32) or as raw
        little-endian float32 followed by a newline (binary)."""
        V, D = self.vectors.shape
        for w in self.index_to_key:
            if not w or any(ch.isspace() for ch in w):
                raise ValueError(f"cannot save word {w!r}: words must be non-empty, no spaces")
        vectors = np.ascontiguousarray(self.vectors, dtype="<f4")
        with open(path, "wb") as f:
            f.write(f"{V} {D}\n".encode("utf8"))
            if binary:
                for w, row in zip(self.index_to_key, vectors):
                    f.write(w.encode("utf8") + b" " + row.tobytes() + b"\n")
            else:
                buf = io.StringIO()
                for w, row in zip(self.index_to_key, vectors):
                    buf.write(w + " " + " ".join("%.9g" % x for x in row.tolist()) + "\n")
                f.write(buf.getvalue().encode("utf8"))

    @classmethod
    def load_word2vec_format(cls, path: str, binary: bool = False, encoding: str = "utf8"):
        """Reads word2vec.c's text or binary format (also gensim's binary variant without
        the newline after each vector). A malformed file raises ValueError naming the line
        (text) or the entry (binary)."""
        with open(path, "rb") as f:
            header = f.readline()
            try:
                V, D = (int(x) for x in header.split())
                if V < 0 or D <= 0:
                    raise ValueError
            except ValueError:
                raise ValueError(
                    f"{path}, line 1: expected a header 'vocab_size vector_size', got "
                    f"{header[:80]!r}"
                ) from None
            kv = cls(D, V)
            keys = []
            if binary:
                data = f.read()
                pos, width = 0, 4 * D
                for i in range(V):
                    while pos < len(data) and data[pos : pos + 1] in (b"\n", b"\r"):
                        pos += 1
                    space = data.find(b" ", pos)
                    if space < 0 or space + 1 + width > len(data):
                        raise ValueError(
                            f"{path}: entry {i + 1} of {V} (line {i + 2} counting the header) "
                            "is truncated: expected a word, a space and "
                            f"{D} float32 values"
                        )
                    try:
                        keys.append(data[pos:space].decode(encoding))
                    except UnicodeDecodeError as e:
                        raise ValueError(
                            f"{path}: entry {i + 1} of {V}: word is not {encoding}: {e}"
                        ) from None
                    kv.vectors[i] = np.frombuffer(data, dtype="<f4", count=D, offset=space + 1)
                    pos = space + 1 + width
                if data[pos:].strip():
                    raise ValueError(f"{path}: data after the {V} entries the header announces")
            else:
                for i in range(V):
                    raw = f.readline()
                    line_no = i + 2
                    if not raw:
                        raise ValueError(
                            f"{path}, line {line_no}: file ends after {i} of the {V} words "
                            "the header announces"
                        )
                    try:
                        text = raw.decode(encoding)
                    except UnicodeDecodeError as e:
                        raise ValueError(f"{path}, line {line_no}: not {encoding}: {e}") from None
                    fields = text.rstrip("\r\n").rstrip(" ").split(" ")
                    if len(fields) != D + 1:
                        raise ValueError(
                            f"{path}, line {line_no}: expected a word and {D} numbers, got "
                            f"{len(fields)} fields"
                        )
                    try:
                        kv.vectors[i] = np.array(fields[1:], dtype=np.float32)
                    except ValueError:
                        raise ValueError(
                            f"{path}, line {line_no}: a vector value is not a number"
                        ) from None
                    keys.append(fields[0])
                if f.read().strip():
                    raise ValueError(f"{path}: lines after the {V} words the header announces")
        if len(set(keys)) != len(keys):
            dup = next(k for k in keys if keys.count(k) > 1)
            raise ValueError(f"{path}: word {dup!r} appears more than once")
        kv.index_to_key = keys
        kv.key_to_index = {k: i for i, k in enumerate(keys)}
        return kv

    # -- safe persistence -----------------------------------------------------------------
    def _arrays(self, prefix: str = "") -> dict:
        return {
            prefix + "vectors": np.ascontiguousarray(self.vectors, dtype=np.float32),
            prefix + "counts": self.counts.astype(np.int64),
            prefix + "keys": _encode_json(self.index_to_key),
        }

    @classmethod
    def _from_arrays(cls, arrays, prefix: str = ""):
        vectors = np.array(arrays[prefix + "vectors"], dtype=np.float32)
        kv = cls(vectors.shape[1], 0)
        kv.vectors = vectors
        kv.counts = np.array(arrays[prefix + "counts"], dtype=np.int64)
        kv.index_to_key = _decode_json(arrays[prefix + "keys"])
        kv.key_to_index = {k: i for i, k in enumerate(kv.index_to_key)}
        if len(kv.index_to_key) != len(vectors):
            raise ValueError("corrupt file: number of words and of vectors differ")
        return kv

    def save(self, path: str) -> None:
        """numpy .npz of plain arrays and JSON (loaded with allow_pickle=False)."""
        arrays = self._arrays()
        arrays["meta"] = _encode_json({"format": _FORMAT_VERSION, "class": "KeyedVectors"})
        _savez(path, arrays)

    @classmethod
    def load(cls, path: str):
        with np.load(path, allow_pickle=False) as z:
            meta = _decode_json(z["meta"])
            if meta.get("class") not in ("KeyedVectors", "Word2Vec"):
                raise ValueError(f"{path} does not hold fastsoftmax word vectors")
            return cls._from_arrays(z, "wv_" if meta["class"] == "Word2Vec" else "")


def _encode_json(obj) -> np.ndarray:
    return np.frombuffer(json.dumps(obj).encode("utf8"), dtype=np.uint8)


def _decode_json(arr) -> object:
    return json.loads(bytes(np.asarray(arr, dtype=np.uint8)).decode("utf8"))


def _savez(path: str, arrays: dict) -> None:
    # Write to the exact path given (np.savez would append .npz to a path without it).
    with open(path, "wb") as f:
        np.savez(f, **arrays)


# ---------------------------------------------------------------------------------------
# Word2Vec
# ---------------------------------------------------------------------------------------


class Word2Vec:
    """Skip-gram (sg=1) or CBOW (sg=0) with negative sampling; gensim's arguments and
    meaning (see the module docstring for the exact semantics and the deviations)."""

    def __init__(self, sentences=None, *, corpus_file=None, vector_size=100, window=5,
                 min_count=5, sg=0, negative=5, ns_exponent=0.75, cbow_mean=1, sample=1e-3,
                 alpha=0.025, min_alpha=1e-4, epochs=5, seed=1, workers=None, device="cpu",
                 max_vocab_size=None, shrink_windows=True, callbacks=()):
        if sentences is not None and corpus_file is not None:
            raise ValueError("give either sentences or corpus_file, not both")
        if vector_size <= 0 or window <= 0 or negative <= 0 or epochs < 0 or min_count < 0:
            raise ValueError(
                "vector_size, window and negative must be positive, epochs and min_count "
                "non-negative"
            )
        if not 0 <= min_alpha <= alpha:
            raise ValueError(f"need 0 <= min_alpha <= alpha, got {min_alpha} and {alpha}")
        self.vector_size = int(vector_size)
        self.window = int(window)
        self.min_count = int(min_count)
        self.sg = int(bool(sg))
        self.negative = int(negative)
        self.ns_exponent = float(ns_exponent)
        self.cbow_mean = int(bool(cbow_mean))
        self.sample = float(sample)
        self.alpha = float(alpha)
        self.min_alpha = float(min_alpha)
        self.epochs = int(epochs)
        self.seed = int(seed)
        self.workers = int(workers) if workers else (os.cpu_count() or 1)
        self.device = torch.device(device)
        self.max_vocab_size = max_vocab_size
        self.shrink_windows = bool(shrink_windows)
        self.callbacks = tuple(callbacks)
        self.wv = KeyedVectors(self.vector_size)
        self.corpus_count = 0          # sentences in the corpus
        self.corpus_total_words = 0    # raw words in the corpus (OOV included)
        self.running_training_loss = 0.0
        self.progress: Optional[Callable[[dict], None]] = None
        self._tokens_trained = 0       # in-vocabulary tokens fed so far: the Philox counter
        self._syn0 = self._syn1neg = None
        if sentences is not None or corpus_file is not None:
            self.build_vocab(sentences, corpus_file=corpus_file)
            self.train(sentences, corpus_file=corpus_file, total_examples=self.corpus_count,
                       total_words=self.corpus_total_words, epochs=self.epochs)

    # -- vocabulary -----------------------------------------------------------------------
    @staticmethod
    def _corpus(corpus_iterable, corpus_file):
        if (corpus_iterable is None) == (corpus_file is None):
            raise ValueError("give exactly one of corpus_iterable (sentences) or corpus_file")
        if corpus_file is not None:
            return LineSentence(corpus_file)
        if isinstance(corpus_iterable, str):
            raise TypeError("sentences must be an iterable of token lists, not a str "
                            "(use corpus_file= for a file path)")
        if iter(corpus_iterable) is corpus_iterable:
            raise TypeError("sentences must be re-iterable (a list or a class with __iter__), "
                            "not a one-shot generator: training reads it once per epoch")
        return corpus_iterable

    def build_vocab(self, corpus_iterable=None, corpus_file=None, **_ignored):
        """Scans the corpus: counts words, applies max_vocab_size pruning and min_count, sorts
        by decreasing count, computes subsampling keep probabilities, negative-sampling table
        and initial vectors."""
        corpus = self._corpus(corpus_iterable, corpus_file)
        counts: dict = defaultdict(int)
        sentences = words = 0
        min_reduce = 1
        for sentence in corpus:
            for piece in _pieces(sentence):
                sentences += 1
                words += len(piece)
                for w in piece:
                    counts[w] += 1
                if self.max_vocab_size and len(counts) > self.max_vocab_size:
                    for w in [w for w, c in counts.items() if c < min_reduce]:
                        del counts[w]
                    min_reduce += 1
        self.corpus_count, self.corpus_total_words = sentences, words
        if words == 0:
            raise ValueError("the corpus is empty: no words to build a vocabulary from")
        kept = [(w, c) for w, c in counts.items() if c >= self.min_count]
        if not kept:
            raise ValueError(
                f"no word occurs at least min_count={self.min_count} times in the corpus of "
                f"{words} words; lower min_count"
            )
        # Decreasing count; ties put the later-seen word first (gensim's stable order).
        order = sorted(range(len(kept)), key=lambda i: (-kept[i][1], -i))
        keys = [kept[i][0] for i in order]
        cnt = np.array([kept[i][1] for i in order], dtype=np.int64)
        self.wv = KeyedVectors(self.vector_size, len(keys))
        self.wv.index_to_key = keys
        self.wv.key_to_index = {k: i for i, k in enumerate(keys)}
        self.wv.counts = cnt
        self._prepare_weights()

    def keep_probabilities(self) -> np.ndarray:
        """float32 [V]: word2vec.c's subsampling keep probability per word, capped at 1."""
        c = self.wv.counts.astype(np.float64)
        total = float(c.sum())
        if not self.sample:
            return np.ones(len(c), dtype=np.float32)
        # gensim reads a sample >= 1 as an absolute count threshold.
        threshold = self.sample * total if self.sample < 1.0 else self.sample
        p = (np.sqrt(c / threshold) + 1.0) * (threshold / c)
        return np.minimum(p, 1.0).astype(np.float32)

    def _prepare_weights(self) -> None:
        V, D = len(self.wv), self.vector_size
        rng = np.random.default_rng(self.seed)
        # word2vec.c's initialisation: input vectors uniform in [-0.5/D, 0.5/D), outputs zero.
        syn0 = ((rng.random((V, D), dtype=np.float32) - 0.5) / D).astype(np.float32)
        self._syn0 = torch.from_numpy(syn0).to(self.device)
        self._syn1neg = torch.zeros(V, D, dtype=torch.float32, device=self.device)
        self._sync_vectors()
        self._tables()

    def _tables(self) -> None:
        self._keep = torch.from_numpy(self.keep_probabilities()).to(self.device)
        sampler = UnigramSampler(torch.from_numpy(self.wv.counts).double(), self.ns_exponent,
                                 device=self.device)
        self._ns_prob, self._ns_alias = sampler._table

    def _sync_vectors(self) -> None:
        # On CPU wv.vectors is a view of the training table (no copy); on CUDA, a copy.
        if self._syn0.device.type == "cpu":
            self.wv.vectors = self._syn0.numpy()
        else:
            self.wv.vectors = self._syn0.cpu().numpy()
        self.wv._norms = None

    @property
    def syn1neg(self) -> np.ndarray:
        return self._syn1neg.cpu().numpy()

    # -- training -------------------------------------------------------------------------
    def _encode(self, pieces: list, raw: int, offset: int):
        """A batch of sentences (word lists) as (tokens int32 [N] of in-vocabulary ids,
        sentence_ends int64 [S], words_before int64 [S] = raw words of the epoch before each
        sentence, raw words of the batch); `offset` is the raw words of the epoch before it."""
        get = self.wv.key_to_index.get
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        flat = list(chain.from_iterable(pieces))
        ids = np.fromiter(map(get, flat, repeat(-1)), dtype=np.int64, count=len(flat))
        known = ids >= 0
        in_vocab_before = np.concatenate(([0], np.cumsum(known)))
        raw_ends = np.cumsum(lengths)
        return (ids[known].astype(np.int32), in_vocab_before[raw_ends],
                offset + raw_ends - lengths, raw)

    def _batches(self, corpus, out: queue.Queue, stop: threading.Event):
        """Reader thread: cuts the corpus into batches and encodes them (see _encode); puts
        None at the end, or the exception raised."""
        # CPU: about 10,000 words per thread, as gensim's jobs. CUDA: a warp per sentence, so
        # a batch needs tens of thousands of sentences to fill the GPU.
        if self.device.type == "cpu":
            limit = MAX_SENTENCE_WORDS * max(1, self.workers)
        else:
            limit = 1 << 21
        pieces: list = []
        raw = offset = 0
        try:
            for sentence in corpus:
                if stop.is_set():
                    return
                for piece in _pieces(sentence):
                    pieces.append(piece)
                    raw += len(piece)
                    if raw >= limit:
                        out.put(self._encode(pieces, raw, offset))
                        offset += raw
                        pieces, raw = [], 0
            if pieces:
                out.put(self._encode(pieces, raw, offset))
            out.put(None)
        except BaseException as e:  # surfaced in the training thread
            out.put(e)

    def _epoch_batches(self, corpus, cache: Optional[list]):
        """Encoded batches of one pass. An in-memory corpus (list or tuple) is encoded once
        and the int32 ids reused by later epochs; any other iterable is re-read and encoded
        by a reader thread while the native op (which releases the GIL) trains."""
        if cache:
            yield from cache
            return
        q: queue.Queue = queue.Queue(maxsize=4)
        stop = threading.Event()
        reader = threading.Thread(target=self._batches, args=(corpus, q, stop), daemon=True)
        reader.start()
        try:
            while True:
                item = q.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                if cache is not None:
                    cache.append(item)
                yield item
        finally:
            stop.set()
            while reader.is_alive():
                try:
                    q.get_nowait()
                except queue.Empty:
                    reader.join(0.01)

    def train(self, corpus_iterable=None, corpus_file=None, total_examples=None,
              total_words=None, epochs=None, start_alpha=None, end_alpha=None,
              callbacks=(), **_ignored):
        """Trains `epochs` passes over the corpus, the rate decaying linearly from start_alpha
        (default alpha) to end_alpha (default min_alpha) over epochs x total_words raw words
        (default: the corpus size seen by build_vocab). Returns (trained words after
        subsampling, raw words)."""
        if self._syn0 is None:
            raise RuntimeError("build the vocabulary first (build_vocab) before train")
        corpus = self._corpus(corpus_iterable, corpus_file)
        epochs = self.epochs if epochs is None else int(epochs)
        alpha = self.alpha if start_alpha is None else float(start_alpha)
        min_alpha = self.min_alpha if end_alpha is None else float(end_alpha)
        words_per_epoch = int(total_words or self.corpus_total_words)
        total = float(max(1, epochs * words_per_epoch))
        callbacks = self.callbacks + tuple(callbacks)
        self.running_training_loss = 0.0
        trained = raw_total = 0
        cache = [] if isinstance(corpus, (list, tuple)) else None
        seed = self.seed & ((1 << 63) - 1)
        start = time.perf_counter()
        for cb in callbacks:
            getattr(cb, "on_train_begin", lambda m: None)(self)
        for epoch in range(epochs):
            for cb in callbacks:
                getattr(cb, "on_epoch_begin", lambda m: None)(self)
            epoch_loss = epoch_examples = 0.0
            epoch_start = epoch * words_per_epoch
            for tokens, ends, before, raw in self._epoch_batches(corpus, cache):
                before = before + epoch_start
                stats = ops.word2vec_train(
                    self._syn0, self._syn1neg, torch.from_numpy(tokens).to(self.device),
                    torch.from_numpy(ends).to(self.device),
                    torch.from_numpy(before).to(self.device), self._keep, self._ns_prob,
                    self._ns_alias, seed, self._tokens_trained, bool(self.sg),
                    bool(self.cbow_mean), self.window, self.negative, self.shrink_windows,
                    alpha, min_alpha, total, self.workers,
                ).tolist()
                self._tokens_trained += len(tokens)
                raw_total += raw
                trained += int(stats[2])
                epoch_loss += stats[0]
                epoch_examples += stats[1]
                self.running_training_loss += stats[0]
                if self.progress is not None and len(before):
                    done = int(before[0]) + raw  # raw words trained once this batch is done
                    self.progress({
                        "epoch": epoch, "epochs": epochs, "words_done": done,
                        "words_total": total, "raw_words": raw_total,
                        "seconds": time.perf_counter() - start,
                        "lr": ops_learning_rate(alpha, min_alpha, done, total),
                        "loss": epoch_loss / max(epoch_examples, 1.0),
                    })
            self._sync_vectors()
            for cb in callbacks:
                getattr(cb, "on_epoch_end", lambda m: None)(self)
        self.train_seconds = time.perf_counter() - start
        self._sync_vectors()
        for cb in callbacks:
            getattr(cb, "on_train_end", lambda m: None)(self)
        return trained, raw_total

    def get_latest_training_loss(self) -> float:
        return self.running_training_loss

    # -- persistence ----------------------------------------------------------------------
    _CONFIG = ("vector_size", "window", "min_count", "sg", "negative", "ns_exponent",
               "cbow_mean", "sample", "alpha", "min_alpha", "epochs", "seed", "workers",
               "max_vocab_size", "shrink_windows", "corpus_count", "corpus_total_words",
               "_tokens_trained")

    def save(self, path: str) -> None:
        """All state (vectors, output weights, vocabulary, settings) as a numpy .npz of plain
        arrays and JSON; loading never unpickles."""
        if self._syn0 is None:
            raise RuntimeError("nothing to save: the model has no vocabulary yet")
        self._sync_vectors()
        arrays = self.wv._arrays("wv_")
        arrays["syn1neg"] = self.syn1neg
        config = {k: getattr(self, k) for k in self._CONFIG}
        arrays["meta"] = _encode_json({"format": _FORMAT_VERSION, "class": "Word2Vec",
                                       "config": config})
        _savez(path, arrays)

    @classmethod
    def load(cls, path: str, device=None):
        with np.load(path, allow_pickle=False) as z:
            meta = _decode_json(z["meta"])
            if meta.get("class") != "Word2Vec":
                raise ValueError(f"{path} does not hold a fastsoftmax Word2Vec model")
            if meta.get("format") != _FORMAT_VERSION:
                raise ValueError(f"{path}: unsupported format version {meta.get('format')}")
            cfg = meta["config"]
            model = cls(vector_size=cfg["vector_size"], device=device or "cpu")
            for k in cls._CONFIG:
                setattr(model, k, cfg[k])
            model.wv = KeyedVectors._from_arrays(z, "wv_")
            model._syn0 = torch.from_numpy(model.wv.vectors.copy()).to(model.device)
            model._syn1neg = torch.from_numpy(np.array(z["syn1neg"], dtype=np.float32)).to(
                model.device)
        model._sync_vectors()
        model._tables()
        return model


def ops_learning_rate(alpha: float, min_alpha: float, words_done: float, total: float) -> float:
    """The schedule of csrc/common/word2vec.h: linear from alpha to min_alpha, clamped."""
    progress = words_done / total if total > 0 else 0.0
    return max(min_alpha, alpha - (alpha - min_alpha) * progress)
