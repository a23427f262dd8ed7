"""word2vec's data: the corpus (sentences or a file), gensim 4's vocabulary steps on top of
the shared counting scan (the words kept by min_count, trim_rule and max_final_vocab, their
order, the subsampling keep probabilities), and the batches that feed the native trainer.

A batch is a run of sentences encoded as int32 ids of their in-vocabulary words with
per-sentence offsets and progress counters. A reader thread encodes while the native op (which
releases the GIL) trains:

    corpus -> sentences cut into pieces of <= 10,000 words -> batches of ~limit raw words
    reader thread: python_batches -> queue -> training thread: ops.word2vec_train(batch)

A UTF-8 corpus file is encoded natively instead (corpus_file.py), to the same batches.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from itertools import chain, repeat
from typing import Callable, Optional

import numpy as np

from ..textfiles import LineSentence
from ..textfiles import pieces as sentence_pieces
from ..vocabulary import count_words, rank_by_count
from ...ops.word2vec import lookup_words
from . import corpus_file

logger = logging.getLogger(__name__)

# trim_rule return values (gensim.utils.RULE_*).
RULE_DEFAULT, RULE_DISCARD, RULE_KEEP = 0, 1, 2


def corpus_of(corpus_iterable, corpus_file, passes: int):
    """The corpus to read `passes` times: `corpus_iterable` (sentences: token lists) or a
    LineSentence over `corpus_file`; exactly one must be given (TypeError, as gensim)."""
    if (corpus_iterable is None) == (corpus_file is None):
        raise TypeError("give exactly one of corpus_iterable (sentences) or corpus_file")
    if corpus_file is not None:
        return LineSentence(corpus_file)
    if isinstance(corpus_iterable, str):
        raise TypeError("sentences must be an iterable of token lists, not a str "
                        "(use corpus_file= for a file path)")
    if passes > 1 and iter(corpus_iterable) is corpus_iterable:
        raise TypeError("sentences must be re-iterable (a list or a class with __iter__), "
                        "not a one-shot generator: training reads it once per epoch")
    return corpus_iterable


def scan(corpus, max_vocab_size, progress_per: int, log: logging.Logger):
    """count_words over the corpus: natively for a file the native reader reads, unless
    max_vocab_size asks for gensim's pruning during the scan (whose timing is per sentence)."""
    if corpus_file.native(corpus) and not max_vocab_size:
        return corpus_file.count(corpus, progress_per, log)
    return count_words(corpus, max_vocab_size, progress_per=progress_per, log=log)


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
    kept = {w: c for w, c in counts.items() if keep_word(w, c, min_count, trim_rule)}
    logger.info("effective_min_count=%d retains %i unique words (%.2f%% of original %i, drops "
                "%i)", min_count, len(kept), 100.0 * len(kept) / max(len(counts), 1),
                len(counts), len(counts) - len(kept))
    words = rank_by_count(kept, ties="last") if sorted_vocab else list(kept)
    return words, np.array([kept[w] for w in words], dtype=np.int64)


def token_ids(key_to_index: dict, pieces: list):
    """(ids int64 [N]: every word of `pieces` (word lists), -1 where out of vocabulary;
    lengths int64 [S]: the words of each piece)."""
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    flat = list(chain.from_iterable(pieces))
    ids = np.fromiter(map(key_to_index.get, flat, repeat(-1)), dtype=np.int64,
                      count=len(flat))
    return ids, lengths


def encoded(ids: list, lengths: list, offset: int, first_sentence: int):
    """A batch of sentences as the trainer's dict (corpus_file.batch_of), from the ids of
    their words (int64 arrays, -1: out of vocabulary) and their lengths: `offset` raw words
    and `first_sentence` sentences of the epoch come before it."""
    ids_np = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    lengths_np = np.fromiter(lengths, dtype=np.int64, count=len(lengths))
    known = ids_np >= 0
    in_vocab_before = np.concatenate(([0], np.cumsum(known)))
    return corpus_file.batch_of(ids_np[known], in_vocab_before[np.cumsum(lengths_np)],
                                lengths_np, offset, first_sentence)


# The reader thread holds the GIL while it looks words up. A thread that asks for the GIL
# gets it when the holder blocks, or else after sys.getswitchinterval() (5 ms): the training
# thread, back from the native op, waited that long. So the reader looks words up in units of
# about PAUSE_WORDS (under 1 ms of work) and after each, while a batch waits in the queue (the
# trainer will want the GIL to take it), calls time.sleep(0), which lets a waiting thread
# take the GIL. With the queue empty it does not: then the trainer waits for the reader, and a
# sleep can cost the reader its turn on a CPU that the training threads keep busy.
PAUSE_WORDS = 8192


def gil_pauses(q: queue.Queue):
    """python_batches's `pause` for a reader that feeds `q`."""
    def pause():
        if q.qsize():
            time.sleep(0)
    return pause


def python_batches(key_to_index, corpus, limit: int,
                   pause: Optional[Callable[[], None]] = None):
    """The corpus cut into batches of about `limit` raw words, encoded: a batch closes after
    the sentence piece that brings its raw words to `limit` or more. `pause()`, if given, is
    called after every PAUSE_WORDS words or so looked up, and after every batch."""
    done: list = []  # the batch's ids so far, as int64 arrays
    pending: list = []  # and the pieces not yet looked up
    pending_words = 0
    lengths: list = []
    raw = offset = sentences = 0
    for sentence in corpus:
        for piece in sentence_pieces(sentence):
            pending.append(piece)
            pending_words += len(piece)
            lengths.append(len(piece))
            raw += len(piece)
            if raw < limit and pending_words < PAUSE_WORDS:
                continue
            done.append(lookup_words(key_to_index, pending))
            pending, pending_words = [], 0
            if raw >= limit:
                yield encoded(done, lengths, offset, sentences)
                offset += raw
                sentences += len(lengths)
                done, lengths, raw = [], [], 0
            if pause is not None:
                pause()
    if lengths:
        done.append(lookup_words(key_to_index, pending))
        yield encoded(done, lengths, offset, sentences)


def _reader(batches, out: queue.Queue, stop: threading.Event):
    """Reader thread: puts the batches, then None at the end, or the exception raised."""
    try:
        for batch in batches:
            if stop.is_set():
                return
            out.put(batch)
        out.put(None)
    except BaseException as e:  # surfaced in the training thread
        out.put(e)


def replayable(corpus) -> bool:
    """Whether a train() call keeps its first pass's batches for the later epochs: an
    in-memory corpus, or a file the native reader reads (corpus_file.native)."""
    return isinstance(corpus, (list, tuple)) or corpus_file.native(corpus)


def epoch_batches(key_to_index, corpus, limit: int, queue_size: int, cache: Optional[list]):
    """Encoded batches of one pass, made by a reader thread (corpus_file.batches for a file
    it reads natively, python_batches otherwise). With a `cache` list the batches of the
    first pass are kept and replayed by later epochs; otherwise the corpus is re-read."""
    if cache:
        yield from cache
        return
    q: queue.Queue = queue.Queue(maxsize=max(1, queue_size))
    if corpus_file.native(corpus):
        made = corpus_file.batches(corpus, key_to_index, limit)
    else:
        made = python_batches(key_to_index, corpus, limit, gil_pauses(q))
    stop = threading.Event()
    reader = threading.Thread(target=_reader, args=(made, q, stop), daemon=True)
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
