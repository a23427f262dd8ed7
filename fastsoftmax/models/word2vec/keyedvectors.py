"""Words (or any hashable keys) and their vectors, with gensim 4's query methods.

``KeyedVectors`` holds ``index_to_key`` (list), ``key_to_index`` (dict), ``vectors`` (float32
numpy [V, D]), ``norms`` (float32 [V], filled on demand by ``fill_norms``) and per-key
attributes (``get_vecattr``/``set_vecattr``; word2vec stores ``count`` there). The methods
keep gensim's meaning, argument names and return types; tests hold them equal to gensim on the
same vectors. Evaluation (word pairs, analogies: ``evaluation.py``) and the files (word2vec.c's
text and binary: ``formats.py``; .npz: ``persistence.py``) are exposed here as methods.

A key may be given as its integer index wherever gensim accepts one; ``most_similar`` and
``get_mean_vector`` also take raw vectors (numpy arrays) among the keys.
"""

from __future__ import annotations

import logging
from typing import List, Optional

import numpy as np

from . import evaluation, formats, persistence
from .keyedvectors_compat import KeyedVectorsCompat, no_results

logger = logging.getLogger(__name__)

_KEY_TYPES = (str, int, np.integer)


def _as_list(x) -> list:
    """gensim's convention: None -> [], one key or one vector -> [it], else a list."""
    if x is None:
        return []
    if isinstance(x, _KEY_TYPES) or (isinstance(x, np.ndarray) and x.ndim == 1):
        return [x]
    return list(x)


def _unit(v: np.ndarray) -> np.ndarray:
    """v at unit length as gensim's unitvec computes it (norm and scaling in float64, then
    rounded to v's type), so similarity(w, w) and n_similarity give gensim's exact floats."""
    v64 = np.asarray(v, dtype=np.float64)
    n = np.sqrt(np.dot(v64, v64))
    return (v64 * (1.0 / n)).astype(np.asarray(v).dtype) if n > 0 else v


def _top(scores: np.ndarray, topn: int, exclude: set, offset: int = 0) -> list:
    """Indices of the `topn` largest scores (best first), skipping those in `exclude`."""
    topn = int(topn)  # a numpy integer (np.uint8(255)) would wrap below
    k = min(topn + len(exclude), len(scores))
    if k <= 0:
        return []
    best = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    best = best[np.argsort(-scores[best], kind="stable")]
    return [int(i) + offset for i in best if int(i) + offset not in exclude][:topn]


class KeyedVectors(KeyedVectorsCompat):
    """Keys and their vectors (see the module docstring; gensim's more recent additions are
    in keyedvectors_compat.py): `vector_size` floats a key, `count` rows made ready for
    gensim's add_vector to fill, in `dtype` (float32)."""

    def __init__(self, vector_size: int, count: int = 0, dtype=np.float32):
        self.vector_size = int(vector_size)
        # count > 0 preallocates slots (key None) that add_vector fills in turn (gensim's)
        self.index_to_key: List = [None] * count
        self.next_index = 0
        self.key_to_index: dict = {}
        self.vectors = np.zeros((count, self.vector_size), dtype=dtype)
        self.norms: Optional[np.ndarray] = None
        self.expandos: dict = {}
        # gensim's per-key factor on the input-vector updates (word w: vectors_lockf[w % len])
        self.vectors_lockf = np.ones(1, dtype=np.float32)

    # -- lookup ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.index_to_key)

    def __contains__(self, key) -> bool:
        return self.has_index_for(key)

    def has_index_for(self, key) -> bool:
        return self.get_index(key, -1) >= 0

    def get_index(self, key, default=None) -> int:
        """The row of `key`; an int that is no key is read as a row index (gensim)."""
        i = self.key_to_index.get(key, -1) if not isinstance(key, np.ndarray) else -1
        if i >= 0:
            return i
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if 0 <= key < len(self.index_to_key):
                return int(key)
        if default is not None:
            return default
        raise KeyError(f"Key '{key}' not present in vocabulary")

    def get_vector(self, key, norm: bool = False) -> np.ndarray:
        i = self.get_index(key)
        if norm:
            self.fill_norms()
            return self.vectors[i] / self.norms[i]
        return self.vectors[i]

    def __getitem__(self, keys):
        if isinstance(keys, _KEY_TYPES):
            return self.get_vector(keys)
        return np.vstack([self.get_vector(k) for k in keys])

    def __setitem__(self, keys, weights):
        """kv[key] = vector or kv[keys] = vectors: adds new keys, replaces known ones."""
        single = isinstance(keys, _KEY_TYPES)
        self.add_vectors([keys] if single else list(keys), np.asarray(weights).reshape(
            1 if single else len(keys), -1), replace=True)

    @property
    def counts(self) -> np.ndarray:
        """int64 [V]: the `count` attribute (zeros when none was set)."""
        if "count" not in self.expandos:
            return np.zeros(len(self), dtype=np.int64)
        return self.expandos["count"]

    @counts.setter
    def counts(self, values) -> None:
        self.expandos["count"] = np.asarray(values, dtype=np.int64)

    # -- per-key attributes -----------------------------------------------------------------
    def _allocate_vecattr(self, attr: str, dtype) -> None:
        n = len(self.index_to_key)
        if attr not in self.expandos:
            self.expandos[attr] = np.zeros(n, dtype=dtype)
        elif len(self.expandos[attr]) < n:
            old = self.expandos[attr]
            grown = np.zeros(n, dtype=np.result_type(old.dtype, dtype))
            grown[: len(old)] = old
            self.expandos[attr] = grown

    def set_vecattr(self, key, attr: str, val) -> None:
        self._allocate_vecattr(attr, np.asarray(val).dtype)
        self.expandos[attr][self.get_index(key)] = val

    def get_vecattr(self, key, attr: str):
        return self.expandos[attr][self.get_index(key)]

    # -- norms ----------------------------------------------------------------------------
    def fill_norms(self, force: bool = False) -> None:
        """Computes `norms` (the L2 norm of every row) if missing, stale or `force`."""
        if force or self.norms is None or len(self.norms) != len(self.vectors):
            self.norms = np.linalg.norm(self.vectors, axis=1)

    def get_normed_vectors(self) -> np.ndarray:
        self.fill_norms()
        return self.vectors / self.norms[:, None]

    def _unit_rows(self) -> np.ndarray:
        """Unit rows, zero rows left zero (used by the evaluations)."""
        self.fill_norms()
        norms = np.where(self.norms > 0, self.norms, 1.0)
        return (self.vectors / norms[:, None]).astype(np.float32)

    # -- building -------------------------------------------------------------------------
    def add_vectors(self, keys, weights, extras: Optional[dict] = None, replace: bool = False):
        """Appends new keys with their vectors; keys already present keep their vector unless
        `replace`. `extras` maps attribute names to one value per key."""
        if isinstance(keys, _KEY_TYPES):
            keys, weights = [keys], np.asarray(weights).reshape(1, -1)
        weights = np.asarray(weights, dtype=self.vectors.dtype)
        if weights.shape != (len(keys), self.vector_size):
            raise ValueError(f"add_vectors: weights must be [{len(keys)}, {self.vector_size}], "
                             f"got {list(weights.shape)}")
        extras = {a: np.asarray(v) for a, v in (extras or {}).items()}
        for attr, values in extras.items():
            self._allocate_vecattr(attr, values.dtype)
        known = np.array([k in self.key_to_index for k in keys], dtype=bool)
        for i in np.flatnonzero(~known):
            self.key_to_index[keys[i]] = len(self.index_to_key)
            self.index_to_key.append(keys[i])
        self.vectors = np.vstack((self.vectors, weights[~known]))
        for attr in self.expandos:
            new = extras[attr][~known] if attr in extras else np.zeros(int((~known).sum()))
            self.expandos[attr] = np.concatenate((self.expandos[attr],
                                                  new.astype(self.expandos[attr].dtype)))
        if replace and known.any():
            rows = [self.key_to_index[keys[i]] for i in np.flatnonzero(known)]
            self.vectors[rows] = weights[known]
            for attr, values in extras.items():
                self.expandos[attr][rows] = values[known]
        self.norms = None

    def vectors_for_all(self, keys, allow_inference: bool = True, copy_vecattrs: bool = False):
        """A new ``KeyedVectors`` with the vectors of `keys`: duplicates dropped, the first
        occurrence's order kept, unknown keys left out (plain word vectors infer none, so
        allow_inference only decides whether an int is also read as a row index, as gensim's
        `key in self`). The counts are gensim's placeholder (n - index for n keys) unless
        copy_vecattrs, which copies every per-key attribute (counts included)."""
        known = self.has_index_for if allow_inference else self.key_to_index.__contains__
        vocab = list(dict.fromkeys(k for k in keys if known(k)))
        rows = np.array([self.get_index(k) for k in vocab], dtype=np.int64)
        out = KeyedVectors(self.vector_size, 0, dtype=self.vectors.dtype)
        out.index_to_key, out.key_to_index = vocab, {k: i for i, k in enumerate(vocab)}
        out.vectors = self.vectors[rows]  # fancy indexing: a copy
        out.counts = np.arange(len(vocab), 0, -1)
        if copy_vecattrs:
            for attr, values in self.expandos.items():
                out.expandos[attr] = values[rows]
        return out

    # -- similarity -----------------------------------------------------------------------
    def get_mean_vector(self, keys, weights=None, pre_normalize: bool = True,
                        post_normalize: bool = False, ignore_missing: bool = True):
        """Weighted mean of the keys' vectors (unit vectors when pre_normalize; raw arrays
        among the keys used as given), divided by the sum of `|weights|` used."""
        keys = _as_list(keys) if not (isinstance(keys, np.ndarray) and keys.ndim == 2) else keys
        if len(keys) == 0:
            raise ValueError("cannot compute mean with no input")
        if not isinstance(weights, np.ndarray):  # gensim: in the vectors' type (the mean too)
            weights = np.asarray(np.ones(len(keys)) if weights is None else weights,
                                 dtype=self.vectors.dtype)
        if len(weights) != len(keys):
            raise ValueError("keys and weights array must have same number of elements")
        mean = np.zeros(self.vector_size, dtype=self.vectors.dtype)
        total = 0.0
        for key, w in zip(keys, weights):
            if isinstance(key, np.ndarray):
                vec = key
            elif key in self:
                vec = self.get_vector(key, norm=pre_normalize)
            elif not ignore_missing:
                raise KeyError(f"Key '{key}' not present in vocabulary")
            else:
                continue
            mean += w * vec
            total += abs(w)
        if total > 0:
            mean = mean / total
        return _unit(mean).astype(np.float32) if post_normalize else mean

    def cosine_similarities(self, vector: np.ndarray, vectors_all: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(vectors_all, axis=1) * np.linalg.norm(vector)
        return vectors_all @ vector / norms

    def similarity(self, w1, w2) -> float:
        return float(np.dot(_unit(self.get_vector(w1)), _unit(self.get_vector(w2))))

    def distance(self, w1, w2) -> float:
        return 1.0 - self.similarity(w1, w2)

    def distances(self, word_or_vector, other_words=()) -> np.ndarray:
        """1 - cosine from a key (or vector) to `other_words` (default: every key)."""
        v = (self.get_vector(word_or_vector) if isinstance(word_or_vector, _KEY_TYPES)
             else np.asarray(word_or_vector))
        others = (self.vectors if len(other_words) == 0
                  else self.vectors[[self.get_index(w) for w in other_words]])
        return 1.0 - self.cosine_similarities(v, others)

    def n_similarity(self, ws1, ws2) -> float:
        """Cosine between the means of two key sets (raw vectors averaged, as gensim)."""
        if not (len(ws1) and len(ws2)):
            raise ZeroDivisionError("At least one of the passed list is empty.")
        m1 = self.get_mean_vector(ws1, pre_normalize=False)
        m2 = self.get_mean_vector(ws2, pre_normalize=False)
        return float(np.dot(_unit(m1), _unit(m2)))

    def _weighted(self, positive, negative):
        """(keys, weights): `+1`/`-1` per item, or the weight of a (key, weight) pair."""
        keys, weights = [], []
        for items, sign in ((_as_list(positive), 1.0), (_as_list(negative), -1.0)):
            for item in items:
                if isinstance(item, (*_KEY_TYPES, np.ndarray)):
                    keys.append(item)
                    weights.append(sign)
                else:
                    keys.append(item[0])
                    weights.append(float(item[1]))
        return keys, weights

    def most_similar(self, positive=None, negative=None, topn: Optional[int] = 10,
                     clip_start: int = 0, clip_end: Optional[int] = None,
                     restrict_vocab: Optional[int] = None, indexer=None):
        """3CosAdd: keys by cosine with the weighted mean of the unit vectors of `positive`
        (+1) and `negative` (-1); items may be keys, vectors or (key, weight) pairs. The query
        keys are excluded. Searches rows clip_start..clip_end (restrict_vocab: the first
        restrict_vocab rows). [(key, cosine)] best first; all cosines when topn is None;
        [] for any integer topn < 1 (numpy integers too), as gensim."""
        if indexer is not None:
            raise TypeError("most_similar: indexer is not supported")
        if no_results(topn):
            return []
        keys, weights = self._weighted(positive, negative)
        mean = self.get_mean_vector(keys, weights, pre_normalize=True, post_normalize=True,
                                    ignore_missing=False)
        if restrict_vocab:
            clip_start, clip_end = 0, int(restrict_vocab)
        clip_end = clip_end or len(self.vectors)
        self.fill_norms()
        dists = self.vectors[clip_start:clip_end] @ mean / self.norms[clip_start:clip_end]
        if not topn:
            return dists
        exclude = {self.get_index(k) for k in keys
                   if isinstance(k, _KEY_TYPES) and self.has_index_for(k)}
        return [(self.index_to_key[i], float(dists[i - clip_start]))
                for i in _top(dists, topn, exclude, clip_start)]

    def similar_by_word(self, word, topn: Optional[int] = 10, restrict_vocab=None):
        return self.most_similar(positive=[word], topn=topn, restrict_vocab=restrict_vocab)

    similar_by_key = similar_by_word

    def similar_by_vector(self, vector, topn: Optional[int] = 10, restrict_vocab=None):
        return self.most_similar(positive=[np.asarray(vector)], topn=topn,
                                 restrict_vocab=restrict_vocab)

    def most_similar_cosmul(self, positive=None, negative=None, topn: Optional[int] = 10,
                            restrict_vocab: Optional[int] = None):
        """3CosMul (Levy and Goldberg 2014, eq. 4, cosines shifted to [0, 1]): the product of
        the shifted cosines with `positive` over that with `negative` (+1e-6)."""
        if no_results(topn):
            return []
        positive, negative = _as_list(positive), _as_list(negative)
        if not positive:
            raise ValueError("cannot compute similarity with no input")
        exclude = {self.get_index(w) for w in positive + negative
                   if not isinstance(w, np.ndarray) and w in self}
        limit = len(self.vectors) if not restrict_vocab else int(restrict_vocab)
        self.fill_norms()
        rows, norms = self.vectors[:limit], self.norms[:limit]

        def shifted(term):
            v = term if isinstance(term, np.ndarray) else self.get_vector(term, norm=True)
            return (1.0 + rows @ v / norms) / 2.0

        num = np.prod([shifted(t) for t in positive], axis=0)
        den = np.prod([shifted(t) for t in negative], axis=0) if negative else 1.0
        dists = num / (den + 1e-6)
        if not topn:
            return dists
        return [(self.index_to_key[i], float(dists[i])) for i in _top(dists, topn, exclude)]

    def doesnt_match(self, words):
        """The key whose unit vector is farthest from the mean of the others' (unknown keys
        are ignored with a warning)."""
        words = list(words)
        used = [w for w in words if w in self]
        if len(used) != len(words):
            logger.warning("vectors for words %s are not present in the model, ignoring these "
                           "words", sorted(map(str, set(words) - set(used))))
        if not used:
            raise ValueError("cannot select a word from an empty list")
        unit = np.vstack([self.get_vector(w, norm=True) for w in used]).astype(np.float32)
        scores = unit @ self.get_mean_vector(unit, post_normalize=True)
        return min(zip(scores.tolist(), used))[1]

    # -- evaluation and files (evaluation.py, formats.py, persistence.py) -----------------
    def evaluate_word_pairs(self, pairs, delimiter: str = "\t", encoding: str = "utf8",
                            restrict_vocab: int = 300000, case_insensitive: bool = True,
                            dummy4unknown: bool = False):
        return evaluation.evaluate_word_pairs(self, pairs, delimiter, encoding, restrict_vocab,
                                              case_insensitive, dummy4unknown)

    def evaluate_word_analogies(self, analogies, restrict_vocab: int = 300000,
                                case_insensitive: bool = True, dummy4unknown: bool = False,
                                similarity_function: str = "most_similar"):
        return evaluation.evaluate_word_analogies(self, analogies, restrict_vocab,
                                                  case_insensitive, dummy4unknown,
                                                  similarity_function)

    def save_word2vec_format(self, fname: str, fvocab: Optional[str] = None,
                             binary: bool = False, total_vec: Optional[int] = None,
                             write_header: bool = True, prefix: str = "", append: bool = False,
                             sort_attr: str = "count"):
        formats.save_word2vec_format(self, fname, fvocab, binary, total_vec, write_header,
                                     prefix, append, sort_attr)

    @classmethod
    def load_word2vec_format(cls, fname: str, fvocab: Optional[str] = None,
                             binary: bool = False, encoding: str = "utf8",
                             unicode_errors: str = "strict", limit: Optional[int] = None,
                             datatype=np.float32, no_header: bool = False):
        return formats.load_word2vec_format(cls, fname, fvocab, binary, encoding,
                                            unicode_errors, limit, datatype, no_header)

    def save(self, path: str, separately=None, sep_limit=10 * 1024**2, ignore=frozenset(),
             pickle_protocol=None) -> None:
        """An .npz of plain arrays and JSON, loaded without unpickling. As gensim's, arrays of
        sep_limit bytes or more (or only those named in `separately`, e.g. ["vectors"]) go to
        .npy files beside it, which load(mmap='r') maps (persistence.py). pickle_protocol:
        no effect; ignore is refused."""
        persistence.save_keyed_vectors(self, path, separately, sep_limit, ignore)

    @classmethod
    def load(cls, path: str, mmap=None):
        """Vectors saved by save() (or the wv of a saved Word2Vec). mmap='r': vectors saved
        separately stay in their file, mapped read-only (a np.memmap, as gensim's)."""
        return persistence.load_keyed_vectors(cls, path, mmap)
