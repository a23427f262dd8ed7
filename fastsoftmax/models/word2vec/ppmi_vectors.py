"""Count-based word vectors: a windowed co-occurrence matrix, PPMI and a truncated SVD
(Levy, Goldberg and Dagan 2015, "Improving distributional similarity with lessons learned
from word embeddings").

  #(w, c)  co-occurrence counts within `window` words on either side (OOV words removed
           first, as word2vec does); with dynamic_window a pair at distance d counts
           (window - d + 1) / window, the expected weight of word2vec's shrinking window;
  PPMI     of those counts, with context smoothing `cds_alpha` and `shift` (models/ppmi.py);
  vectors  U_d S_d^eig from the rank-d SVD of PPMI (eig = 0.5 by default, as the paper
           recommends over 1); randomised SVD (models/ppmi.py) unless V is small or
           svd="full".

The matrix is built vectorised (numpy) and held as a coalesced torch sparse tensor; the vectors
land in a ``KeyedVectors`` so the same evaluation calls work as for word2vec.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import torch

from ..ppmi import ppmi_matrix, randomized_svd
from ..textfiles import pieces
from ..vocabulary import count_words
from . import data, persistence
from .keyedvectors import KeyedVectors

logger = logging.getLogger(__name__)

_SMALL_V = 2000  # below this a dense SVD is exact and fast


class PPMIVectors:
    """PPMI + SVD word vectors (see the module docstring). Give sentences (an iterable of
    token lists) or corpus_file to build at once, or call build() later.

    Args:
        vector_size: the dimensions kept of the SVD.
        window: the largest distance between a word and its context.
        min_count: words seen fewer times are left out.
        max_vocab_size: a cap on the words kept while scanning (None: no cap).
        cds_alpha: context-distribution smoothing, the power of the context counts (0.75).
        shift: k of shifted PPMI, max(PMI - log k, 0) (1: none).
        eig: the power of the singular values in the vectors (0.5: symmetric).
        dynamic_window: weight a context at distance d by (window - d + 1) / window.
        svd: "auto" (exact for a small vocabulary), "full" or "randomized".
        svd_iter, oversample: the randomized SVD's power iterations and extra columns.
        seed: the randomized SVD's seed."""

    def __init__(self, sentences=None, corpus_file=None, vector_size: int = 100,
                 window: int = 5, min_count: int = 5, max_vocab_size=None,
                 cds_alpha: float = 0.75, shift: float = 1.0, eig: float = 0.5,
                 dynamic_window: bool = True, svd: str = "auto", svd_iter: int = 4,
                 oversample: int = 10, seed: int = 1):
        if vector_size <= 0 or window <= 0 or min_count < 0:
            raise ValueError("vector_size and window must be positive, min_count >= 0")
        if svd not in ("auto", "full", "randomized"):
            raise ValueError(f"svd must be 'auto', 'full' or 'randomized', got {svd!r}")
        if not cds_alpha > 0 or not shift >= 1:
            raise ValueError(f"need cds_alpha > 0 and shift >= 1, got {cds_alpha}, {shift}")
        self.vector_size, self.window, self.min_count = int(vector_size), int(window), min_count
        self.max_vocab_size, self.cds_alpha, self.shift = max_vocab_size, cds_alpha, shift
        self.eig, self.dynamic_window, self.svd = float(eig), bool(dynamic_window), svd
        self.svd_iter, self.oversample, self.seed = int(svd_iter), int(oversample), int(seed)
        self.wv = KeyedVectors(self.vector_size)
        self.singular_values = np.zeros(0, dtype=np.float32)
        self.seconds: dict = {}
        if (sentences is None) != (corpus_file is None):
            self.build(sentences, corpus_file=corpus_file)
        elif sentences is not None:
            raise TypeError("give either sentences or corpus_file, not both")  # as gensim

    def build(self, corpus_iterable=None, corpus_file=None) -> "PPMIVectors":
        """Counts the vocabulary, builds co-occurrences, PPMI and the SVD vectors."""
        t0 = time.perf_counter()
        corpus = data.corpus_of(corpus_iterable, corpus_file, passes=2)  # counts, then pairs
        counts = count_words(corpus, self.max_vocab_size, log=logger)[0]
        keys, cnt = data.select(counts, self.min_count, None, True)
        if len(keys) < 2:
            raise ValueError(f"only {len(keys)} word(s) occur at least min_count="
                             f"{self.min_count} times; need at least 2")
        self.wv = KeyedVectors(self.vector_size, len(keys))
        self.wv.index_to_key, self.wv.counts = keys, cnt
        self.wv.key_to_index = {k: i for i, k in enumerate(keys)}
        self.cooccurrence = self._cooccurrence(corpus)
        t1 = time.perf_counter()
        self.ppmi = ppmi_matrix(self.cooccurrence, self.cds_alpha, self.shift)
        t2 = time.perf_counter()
        self.wv.vectors = self._svd(self.ppmi)
        self.wv.norms = None
        t3 = time.perf_counter()
        self.seconds = {"counts": t1 - t0, "ppmi": t2 - t1, "svd": t3 - t2, "total": t3 - t0}
        logger.info("PPMI vectors: %i words, %i non-zero PPMI entries, %s", len(keys),
                    self.ppmi._nnz(), {k: round(v, 2) for k, v in self.seconds.items()})
        return self

    def _ids(self, corpus):
        """(token ids int64 [N], sentence number int64 [N]) of the in-vocabulary tokens."""
        sents = [p for s in corpus for p in pieces(s)]
        ids, lengths = data.token_ids(self.wv.key_to_index, sents)
        sentence = np.repeat(np.arange(len(sents), dtype=np.int64), lengths)
        known = ids >= 0
        return ids[known], sentence[known]

    def _cooccurrence(self, corpus) -> torch.Tensor:
        """Symmetric float64 sparse [V, V] of (weighted) co-occurrence counts.

        Every pair at distance d becomes one int64 key (w V + c) * 8 + d, for (w, c) and for
        (c, w) since the window looks both ways; one np.sort of the keys groups equal pairs
        (a plain sort is ~20x faster than np.unique with return_inverse), and the weights of
        each group, read from the low bits, are summed with np.add.reduceat."""
        ids, sentence = self._ids(corpus)
        V, W = len(self.wv), self.window
        if V * V * 8 >= 2**63:
            raise ValueError(f"vocabulary of {V} words is too large for the pair keys")
        keys = []
        for d in range(1, W + 1):
            same = sentence[:-d] == sentence[d:]
            w, c = ids[:-d][same], ids[d:][same]
            keys += [((w * V + c) << 3) | d, ((c * V + w) << 3) | d]
        key = np.sort(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
        weight = np.array([0.0] + [(W - d + 1) / W if self.dynamic_window else 1.0
                                   for d in range(1, 8)])
        pair = key >> 3
        starts = np.flatnonzero(np.concatenate(([True], pair[1:] != pair[:-1]))) if len(
            key) else np.zeros(0, dtype=np.int64)
        values = np.add.reduceat(weight[key & 7], starts) if len(key) else np.zeros(0)
        unique = pair[starts]
        index = torch.from_numpy(np.stack((unique // V, unique % V)))
        return torch.sparse_coo_tensor(index, torch.from_numpy(values), (V, V),
                                       is_coalesced=True, check_invariants=False)

    def _svd(self, m: torch.Tensor) -> np.ndarray:
        V, d = m.shape[0], min(self.vector_size, m.shape[0])
        full = self.svd == "full" or (self.svd == "auto" and V <= _SMALL_V)
        if full:
            u, s, _ = torch.linalg.svd(m.to_dense(), full_matrices=False)
        else:
            u, s = randomized_svd(m, d + self.oversample, self.svd_iter, self.seed)
        u, s = u[:, :d].double(), s[:d].double()
        # SVD signs are arbitrary: make each column's largest-magnitude entry positive, so
        # that runs (and the dense and randomised paths) agree.
        sign = torch.sign(u.gather(0, u.abs().argmax(0, keepdim=True)))
        u = u * torch.where(sign == 0, torch.ones_like(sign), sign)
        self.singular_values = s.float().numpy()
        vectors = np.zeros((V, self.vector_size), dtype=np.float32)
        vectors[:, :d] = (u * s.pow(self.eig)).float().numpy()
        return vectors

    # -- persistence ----------------------------------------------------------------------
    _CONFIG = ("vector_size", "window", "min_count", "max_vocab_size", "cds_alpha", "shift",
               "eig", "dynamic_window", "svd", "svd_iter", "oversample", "seed")

    def save(self, path: str) -> None:
        """Vectors, vocabulary and settings as .npz (the matrices are not kept)."""
        arrays = persistence.keyed_vectors_arrays(self.wv, "wv_")
        arrays["singular_values"] = self.singular_values
        persistence.save_npz(path, arrays, {"class": "PPMIVectors",
                                            "config": {k: getattr(self, k) for k in
                                                       self._CONFIG}})

    @classmethod
    def load(cls, path: str) -> "PPMIVectors":
        arrays, meta = persistence.load_npz(path, ("PPMIVectors",))
        model = cls(**meta["config"])
        model.wv = persistence.keyed_vectors_from_arrays(KeyedVectors, arrays, "wv_")
        model.singular_values = arrays["singular_values"]
        return model
