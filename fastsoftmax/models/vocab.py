"""word2vec's vocabulary steps, as gensim 4 defines them: the counting scan (with
max_vocab_size pruning), the choice of the words to keep (min_count, trim_rule,
max_final_vocab), their order, and the subsampling keep probabilities."""

from __future__ import annotations

import logging
from collections import defaultdict

import numpy as np

from .text import pieces

logger = logging.getLogger("fastsoftmax.models.word2vec")

# trim_rule return values (gensim.utils.RULE_*).
RULE_DEFAULT, RULE_DISCARD, RULE_KEEP = 0, 1, 2


def scan(corpus, max_vocab_size=None, progress_per=10000):
    """(counts: dict word -> count in first-seen order, sentences, raw words). When the
    dictionary grows past max_vocab_size, words with count < r are dropped, r = 1, 2, ...
    (gensim's pruning)."""
    logger.info("collecting all words and their counts")
    counts: dict = defaultdict(int)
    sentences = words = 0
    min_reduce = 1
    for sentence in corpus:
        if progress_per and sentences % progress_per == 0 and sentences:
            logger.info("PROGRESS: at sentence #%i, processed %i words, keeping %i word types",
                        sentences, words, len(counts))
        for piece in pieces(sentence):
            sentences += 1
            words += len(piece)
            for w in piece:
                counts[w] += 1
            if max_vocab_size and len(counts) > max_vocab_size:
                for w in [w for w, c in counts.items() if c < min_reduce]:
                    del counts[w]
                min_reduce += 1
    logger.info("collected %i word types from a corpus of %i raw words and %i sentences",
                len(counts), words, sentences)
    return counts, sentences, words


def keep_word(word, count, min_count, trim_rule) -> bool:
    if trim_rule is not None:
        rule = trim_rule(word, count, min_count)
        if rule == RULE_DISCARD:
            return False
        if rule == RULE_KEEP:
            return True
    return count >= min_count


def effective_min_count(counts: dict, min_count: int, max_final_vocab) -> int:
    """min_count, raised so that at most max_final_vocab words survive (gensim: one more
    than the count of the (max_final_vocab + 1)-th most frequent word)."""
    if not max_final_vocab or max_final_vocab >= len(counts):
        return min_count
    ranked = sorted(counts.values(), reverse=True)
    return max(min_count, ranked[max_final_vocab] + 1)


def keep_probabilities(counts: np.ndarray, retained_total: int, sample: float) -> np.ndarray:
    """float32: word2vec.c's keep probability (sqrt(c / t) + 1) t / c capped at 1, with
    t = sample x retained words (sample < 1) or gensim's absolute threshold for sample >= 1."""
    c = np.asarray(counts, dtype=np.float64)
    if not sample:
        return np.ones(len(c), dtype=np.float32)
    t = sample * retained_total if sample < 1.0 else int(sample * (3 + np.sqrt(5)) / 2)
    p = (np.sqrt(c / t) + 1.0) * (t / c)
    return np.minimum(p, 1.0).astype(np.float32)


def select(counts: dict, min_count: int, trim_rule, sorted_vocab: bool):
    """(kept words, their counts as int64) of a fresh vocabulary; by decreasing count (ties:
    the word seen later first, as gensim) when sorted_vocab, else in first-seen order."""
    kept = [(w, c) for w, c in counts.items() if keep_word(w, c, min_count, trim_rule)]
    dropped = len(counts) - len(kept)
    logger.info("effective_min_count=%d retains %i unique words (%.2f%% of original %i, drops "
                "%i)", min_count, len(kept), 100.0 * len(kept) / max(len(counts), 1),
                len(counts), dropped)
    if sorted_vocab:
        order = sorted(range(len(kept)), key=lambda i: (-kept[i][1], -i))
        kept = [kept[i] for i in order]
    return [w for w, _ in kept], np.array([c for _, c in kept], dtype=np.int64)
