"""word2vec's native corpus_file path: a UTF-8 LineSentence file is read in chunks of whole
lines, each turned by the op ``fastsoftmax::corpus_encode`` (csrc/cpu/corpus_encode.cpp) into
int32 token ids, sentence ends and raw word counts, and cut into the same batches as the
Python path (data.python_batches over LineSentence) gives, array for array. The batches are kept, so
a train() call reads the file once and every later epoch replays the int32 buffer.

    file --(whole lines: 256 KiB, 512 KiB, ... up to 16 MiB)--> corpus_encode --> sentences
         --(~limit raw words)--> batches

The chunks start small so that the first batch is ready a few ms into train(), not after the
first 16 MiB is encoded (the batches do not depend on where the chunks end).

The vocabulary scan reads the file the same way with ``fastsoftmax::corpus_count`` (`count`).

Other encodings, and errors= other than "strict", take the Python path.
"""

from __future__ import annotations

import codecs
import logging
from collections import Counter
from typing import Iterator, List, Optional, Tuple

import numpy as np
import torch

from ... import ops
from ..textfiles import MAX_SENTENCE_WORDS, LineSentence, decode_error

CHUNK_BYTES = 1 << 24
FIRST_CHUNK_BYTES = 1 << 18  # the first chunk's size, doubled up to CHUNK_BYTES


def native(corpus) -> bool:
    """Whether `corpus` is a file the native reader reads exactly as LineSentence does."""
    return (isinstance(corpus, LineSentence) and corpus.errors == "strict"
            and codecs.lookup(corpus.encoding).name == "utf-8")


def vocabulary_bytes(key_to_index: dict) -> Tuple[torch.Tensor, torch.Tensor]:
    """(uint8 bytes, int64 exclusive ends) of the words in id order, UTF-8. A key that is not
    a str (a corpus of other tokens) cannot occur in a text file: it becomes an empty word,
    which no split ever produces."""
    words = _encoded_in_id_order(key_to_index)
    if words is None:
        words = [b""] * len(key_to_index)
        for key, index in key_to_index.items():
            if isinstance(key, str):
                words[index] = key.encode("utf-8", "surrogatepass")
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    text = np.frombuffer(b"".join(words), dtype=np.uint8)
    return torch.from_numpy(text.copy()), torch.from_numpy(np.cumsum(lengths))


def _encoded_in_id_order(key_to_index: dict) -> Optional[List[bytes]]:
    """The words as UTF-8 with no Python step a word, for the usual vocabulary: str keys in
    id order, none with a lone surrogate; None for any other. It runs before the first batch:
    3 ms for WikiText-2's 23k words where the loop above took 5 to 11 ms."""
    n = len(key_to_index)
    if not np.array_equal(np.fromiter(key_to_index.values(), dtype=np.int64, count=n),
                          np.arange(n)):
        return None
    try:
        return list(map(str.encode, key_to_index))
    except (TypeError, UnicodeEncodeError):  # a key that is not a str, or a lone surrogate
        return None


def _chunks(path: str) -> Iterator[Tuple[int, memoryview]]:
    """(file offset, bytes) of runs of whole lines, of about FIRST_CHUNK_BYTES, then twice as
    many each time up to CHUNK_BYTES (a longer line is one run of its own). Each run is read
    in place into a new bytearray (the op reads it there) and not copied: a copy would hold
    the GIL, which the training thread then waits for."""
    with open(path, "rb") as f:
        offset, rest, size = 0, bytearray(), min(FIRST_CHUNK_BYTES, CHUNK_BYTES)
        while True:
            buf = bytearray(len(rest) + size)
            buf[:len(rest)] = rest
            end = len(rest) + f.readinto(memoryview(buf)[len(rest):])
            size = min(2 * size, CHUNK_BYTES)
            if end == len(rest):  # the end of the file
                if rest:
                    yield offset, memoryview(buf)[:end]
                return
            cut = buf.rfind(b"\n", 0, end) + 1
            if cut:
                yield offset, memoryview(buf)[:cut]
                offset, rest = offset + cut, buf[cut:end]
            else:
                rest = buf[:end]


def _raise_bad_byte(corpus: LineSentence, file_offset: int, chunk: memoryview, bad: int):
    """LineSentence's error for the byte at chunk[bad]: the file, line and byte in line."""
    chunk = bytes(chunk)
    line_start = chunk.rfind(b"\n", 0, bad) + 1
    line_end = chunk.find(b"\n", bad)
    line = chunk[line_start:] if line_end < 0 else chunk[line_start:line_end + 1]
    number = chunk.count(b"\n", 0, line_start) + 1
    with open(corpus.path, "rb") as f:  # the lines before the chunk, counted block by block
        left = file_offset
        while left:
            block = f.read(min(left, CHUNK_BYTES))
            number += block.count(b"\n")
            left -= len(block)
    raise decode_error(corpus.path, number, corpus.encoding, line, bad - line_start,
                       LineSentence.HINT)


def _sentences(corpus: LineSentence, key_to_index: dict):
    """Per chunk: (tokens int32, in-vocabulary tokens per sentence, raw words per sentence)."""
    vocab, ends = vocabulary_bytes(key_to_index)
    for file_offset, chunk in _chunks(corpus.path):
        text = torch.frombuffer(chunk, dtype=torch.uint8)
        tokens, sentence_ends, words, bad = ops.corpus_encode(text, vocab, ends,
                                                              MAX_SENTENCE_WORDS)
        if bad >= 0:
            _raise_bad_byte(corpus, file_offset, chunk, bad)
        ends_np = sentence_ends.numpy()
        in_vocab = np.diff(ends_np, prepend=0)
        yield tokens.numpy(), in_vocab, words.numpy()


def count(corpus: LineSentence, progress_per: int = 10000,
          log: Optional[logging.Logger] = None):
    """vocabulary.count_words over the file, natively: (Counter word -> count in first-seen
    order, sentences, raw words), with count_words's log lines (progress once per run of
    lines that passes a multiple of progress_per sentences)."""
    if log:
        log.info("collecting all words and their counts")
    counts: Counter = Counter()
    sentences = words = 0
    for file_offset, chunk in _chunks(corpus.path):
        text = torch.frombuffer(chunk, dtype=torch.uint8)
        blob, ends, found, s, w, bad = ops.corpus_count(text, MAX_SENTENCE_WORDS)
        if bad >= 0:
            _raise_bad_byte(corpus, file_offset, chunk, bad)
        raw, stops = blob.numpy().tobytes(), ends.tolist()
        keys = [raw[a:b].decode("utf-8") for a, b in zip([0] + stops[:-1], stops)]
        counts.update(dict(zip(keys, found.tolist())))  # merged in order: first-seen order
        if log and progress_per and (sentences + s) // progress_per > sentences // progress_per:
            log.info("PROGRESS: at sentence #%i, processed %i words, keeping %i word types",
                     sentences + s, words + w, len(counts))
        sentences, words = sentences + s, words + w
    if log:
        log.info("collected %i word types from a corpus of %i raw words and %i sentences",
                 len(counts), words, sentences)
    return counts, sentences, words


def batches(corpus: LineSentence, key_to_index: dict, limit: int) -> Iterator[dict]:
    """data.python_batches's batches of one pass over the file: a batch closes after the
    sentence that brings its raw words to `limit` or more."""
    parts: list = []  # (tokens, in-vocabulary counts, raw counts) not yet in a batch
    pending = offset = sentences = 0
    for tokens, in_vocab, words in _sentences(corpus, key_to_index):
        raw_ends = np.cumsum(words)
        token_ends = np.cumsum(in_vocab)
        start = 0  # first sentence of this chunk not yet in a batch
        while start < len(words):
            before = raw_ends[start - 1] if start else 0
            last = int(np.searchsorted(raw_ends, before + limit - pending, side="left"))
            if last >= len(words):
                break
            t0 = token_ends[start - 1] if start else 0
            parts.append((tokens[t0:token_ends[last]], in_vocab[start:last + 1],
                          words[start:last + 1]))
            batch = _batch(parts, offset, sentences)
            offset += batch["raw"]
            sentences += len(batch["ends"])
            yield batch
            parts, pending, start = [], 0, last + 1
        if start < len(words):
            t0 = token_ends[start - 1] if start else 0
            parts.append((tokens[t0:], in_vocab[start:], words[start:]))
            pending += int(raw_ends[-1] - (raw_ends[start - 1] if start else 0))
    if parts:
        yield _batch(parts, offset, sentences)


def _batch(parts: list, offset: int, sentences: int) -> dict:
    in_vocab = np.concatenate([p[1] for p in parts])
    return batch_of(np.concatenate([p[0] for p in parts]), np.cumsum(in_vocab),
                    np.concatenate([p[2] for p in parts]), offset, sentences)


def batch_of(tokens: np.ndarray, ends: np.ndarray, words: np.ndarray, offset: int,
             sentences: int) -> dict:
    """The trainer's batch (both readers make it): tokens int32 [N] (in-vocabulary ids), ends
    int64 [S] (sentence ends in tokens), words_before / sentences_before int64 [S] (raw words
    / sentences of the epoch before each sentence, `offset` / `sentences` before the batch),
    raw (its raw words); `words` int64 [S] is each sentence's raw words."""
    raw_ends = np.cumsum(words)
    return {
        "tokens": tokens.astype(np.int32, copy=False),
        "ends": ends,
        "words_before": offset + raw_ends - words,
        "sentences_before": sentences + np.arange(len(words), dtype=np.int64),
        "raw": int(raw_ends[-1]) if len(words) else 0,
    }
