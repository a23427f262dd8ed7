"""The parts of gensim 4's ``KeyedVectors`` API kept out of keyedvectors.py (which holds the
storage and the core queries): a base class of ``KeyedVectors``, built on its methods only (a
method that makes a new ``KeyedVectors`` goes through ``cls``, or lives in keyedvectors.py)."""

from __future__ import annotations

import datetime
import logging
import platform
import sys
import warnings
from numbers import Integral

import numpy as np

logger = logging.getLogger(__name__)


def no_results(topn) -> bool:
    """gensim's rule for most_similar and most_similar_cosmul: any integer topn below 1
    (numpy integers included) asks for no keys, while None asks for every score."""
    return isinstance(topn, Integral) and topn < 1


class KeyedVectorsCompat:
    """gensim 4 methods of ``KeyedVectors`` built on its core ones."""

    def closer_than(self, key1, key2) -> list:
        """Keys closer to key1 than key2 is (key1 itself excluded)."""
        d = self.distances(key1)
        i1, i2 = self.get_index(key1), self.get_index(key2)
        return [self.index_to_key[i] for i in np.flatnonzero(d < d[i2]) if i != i1]

    def rank(self, key1, key2) -> int:
        return len(self.closer_than(key1, key2)) + 1

    def most_similar_to_given(self, key1, keys_list):
        """The key of keys_list nearest key1."""
        return keys_list[int(np.argmin(self.distances(key1, keys_list)))]

    def relative_cosine_similarity(self, wa, wb, topn: int = 10) -> float:
        """similarity(wa, wb) / the summed similarities of wa's topn nearest keys (gensim)."""
        sims = self.similar_by_word(wa, topn)
        if not sims:
            raise ValueError("relative_cosine_similarity: wa has no similar keys")
        return self.similarity(wa, wb) / sum(s for _, s in sims)

    @classmethod
    def from_gensim(cls, kv):
        """A copy of a gensim 4 ``KeyedVectors`` in memory (files gensim pickled are loaded by
        gensim, never here): keys, vectors, per-key attributes (counts included) and
        vectors_lockf; nothing is shared with `kv`."""
        out = cls(kv.vector_size, 0, dtype=kv.vectors.dtype)
        out.index_to_key, out.key_to_index = list(kv.index_to_key), dict(kv.key_to_index)
        out.next_index = getattr(kv, "next_index", len(out.index_to_key))
        out.vectors = np.array(kv.vectors)
        out.expandos = {attr: values.copy() for attr, values in kv.expandos.items()}
        out.vectors_lockf = np.array(getattr(kv, "vectors_lockf", 1.0), dtype=np.float32,
                                     ndmin=1)
        return out

    def add_vector(self, key, vector) -> int:
        """Adds one key and its vector; returns its row. As gensim: the preallocated slot at
        `next_index` (``KeyedVectors(vector_size, count)`` leaves `count` empty slots) is
        filled when free, otherwise the tables grow by one row (with gensim's warning that
        this is slow). A key already present has its vector replaced, so that
        ``vectors[result]`` is always `vector` and ``index_to_key[result]`` is `key`."""
        if key in self.key_to_index:
            row = self.key_to_index[key]
            self.vectors[row] = vector
        elif self.next_index < len(self.index_to_key) and (
                self.index_to_key[self.next_index] is None):
            row = self.next_index
            self.index_to_key[row], self.key_to_index[key] = key, row
            self.vectors[row] = vector
            self.next_index += 1
        else:
            warnings.warn("add_vector grows the vectors by one row, which copies them: add "
                          "keys in batches (add_vectors) or preallocate KeyedVectors(size, "
                          "count)", UserWarning, stacklevel=2)
            row = len(self.index_to_key)
            self.add_vectors([key], np.asarray(vector).reshape(1, -1))
            self.next_index = row + 1
        self.norms = None
        return row

    def add_lifecycle_event(self, event_name: str, log_level=logging.INFO, **event) -> None:
        """gensim's event log (gensim's own loaders call it): `event` with the time, the
        versions and the platform, appended to `lifecycle_events` (kept in memory only, not
        saved) and logged at log_level (a falsy level: not logged)."""
        from ... import __version__

        record = dict(event, datetime=datetime.datetime.now().isoformat(),
                      fastsoftmax=__version__, python=sys.version,
                      platform=platform.platform(), event=event_name)
        if not hasattr(self, "lifecycle_events"):
            self.lifecycle_events = []
        if log_level:
            logger.log(log_level, "%s lifecycle event %s", type(self).__name__, record)
        if self.lifecycle_events is not None:
            self.lifecycle_events.append(record)

    def unit_normalize_all(self) -> None:
        """Scales every vector to unit length in place, as gensim: `vectors` (a view of the
        training table in a model on the CPU) is overwritten and `norms` becomes ones, so
        training cannot sensibly continue. A zero vector becomes NaN, as in gensim."""
        self.fill_norms(force=True)
        self.vectors /= self.norms[:, None]
        self.norms = np.ones(len(self.vectors), dtype=self.vectors.dtype)
