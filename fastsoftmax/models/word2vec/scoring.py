"""gensim's ``Word2Vec.score``: the log-probability of each sentence under a model trained
with hierarchical softmax (Taddy, "Document Classification by Inversion of Distributed
Language Representations", 2015), for skip-gram and CBOW, in numpy."""

from __future__ import annotations

import numpy as np


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _path_log_prob(model, word: int, h: np.ndarray, syn1: np.ndarray) -> float:
    """log p(word | h): the sum over the word's root-first path of log sigma(+-syn1 . h),
    + for branch code 0 and - for code 1 (the trainer's target 1 - code)."""
    code = model.wv.expandos["code"][word]
    point = model.wv.expandos["point"][word]
    x = syn1[point] @ h
    return float(_log_sigmoid(np.where(code == 0, x, -x)).sum())


def score_sentences(model, sentences, total_sentences: int) -> np.ndarray:
    """float32 [n]: one log-probability per sentence (at most total_sentences of them).
    Unknown words are dropped first; every word within `window` of a position counts (no
    window shrinking, no subsampling), as in gensim."""
    if not model.hs:
        raise RuntimeError("score needs hierarchical softmax (hs=1): it is the log-probability "
                           "of the sentence under the Huffman tree, as in gensim")
    vectors, syn1, window = model.wv.vectors, model.syn1, model.window
    scores = []
    for sentence in sentences:
        if len(scores) >= total_sentences:
            break
        ids = [model.wv.key_to_index[w] for w in sentence if w in model.wv.key_to_index]
        total = 0.0
        for pos, word in enumerate(ids):
            lo, hi = max(0, pos - window), min(len(ids), pos + window + 1)
            context = [ids[p] for p in range(lo, hi) if p != pos]
            if model.sg:  # each context word's vector predicts the center word
                total += sum(_path_log_prob(model, word, vectors[c], syn1) for c in context)
            elif context:
                h = vectors[context].sum(axis=0)
                if model.cbow_mean:
                    h = h / len(context)
                total += _path_log_prob(model, word, h, syn1)
        scores.append(total)
    return np.asarray(scores, dtype=np.float32)
