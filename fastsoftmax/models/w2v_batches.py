"""Feeding word2vec's native trainer: a corpus cut into batches of sentences, each encoded as
int32 ids of its in-vocabulary words with per-sentence offsets and progress counters. A reader
thread encodes while the native op (which releases the GIL) trains."""

from __future__ import annotations

import queue
import threading
from itertools import chain, repeat
from typing import Optional

import numpy as np

from .text import pieces as sentence_pieces


def encode(key_to_index: dict, pieces: list, raw: int, offset: int, first_sentence: int):
    """A batch of sentences (word lists) as a dict: tokens int32 [N] (in-vocabulary ids),
    ends int64 [S] (sentence ends in tokens), words_before / sentences_before int64 [S] (raw
    words / sentences of the epoch before each sentence), raw (raw words of the batch)."""
    get = key_to_index.get
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    flat = list(chain.from_iterable(pieces))
    ids = np.fromiter(map(get, flat, repeat(-1)), dtype=np.int64, count=len(flat))
    known = ids >= 0
    in_vocab_before = np.concatenate(([0], np.cumsum(known)))
    raw_ends = np.cumsum(lengths)
    return {
        "tokens": ids[known].astype(np.int32),
        "ends": in_vocab_before[raw_ends],
        "words_before": offset + raw_ends - lengths,
        "sentences_before": first_sentence + np.arange(len(pieces), dtype=np.int64),
        "raw": raw,
    }


def _reader(key_to_index, corpus, limit: int, out: queue.Queue, stop: threading.Event):
    """Reader thread: cuts the corpus into batches of about `limit` raw words and encodes
    them; puts None at the end, or the exception raised."""
    pieces: list = []
    raw = offset = sentences = 0
    try:
        for sentence in corpus:
            if stop.is_set():
                return
            for piece in sentence_pieces(sentence):
                pieces.append(piece)
                raw += len(piece)
                if raw >= limit:
                    out.put(encode(key_to_index, pieces, raw, offset, sentences))
                    offset += raw
                    sentences += len(pieces)
                    pieces, raw = [], 0
        if pieces:
            out.put(encode(key_to_index, pieces, raw, offset, sentences))
        out.put(None)
    except BaseException as e:  # surfaced in the training thread
        out.put(e)


def epoch_batches(key_to_index, corpus, limit: int, queue_size: int, cache: Optional[list]):
    """Encoded batches of one pass. With a `cache` list (an in-memory corpus) the batches of
    the first pass are kept and replayed by later epochs; otherwise the corpus is re-read."""
    if cache:
        yield from cache
        return
    q: queue.Queue = queue.Queue(maxsize=max(1, queue_size))
    stop = threading.Event()
    reader = threading.Thread(target=_reader, args=(key_to_index, corpus, limit, q, stop),
                              daemon=True)
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
