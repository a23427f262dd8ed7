"""word2vec.c's text and binary files of word vectors, for ``KeyedVectors``: a `V D` header
line, then per key the key, a space and its D floats (as text, or as raw little-endian
float32). The Word2Vec model's own files are model_files.py (an .npz of plain arrays and
JSON, with .npy files beside it: persistence.py).

A hostile file (tools/fuzz_files/target_vectors.py) either loads or raises a ValueError that
names the file and the line or the entry, and is never trusted for an allocation: the rows
are allocated for what the file can hold (``_Rows``), not for what its header claims."""

from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass

import numpy as np

from ...atomic import atomic_open

MAX_VECTOR_SIZE = 1 << 40
logger = logging.getLogger(__name__)


class TruncatedFileError(EOFError, ValueError):
    """A vector file that ends before the entries its header announces: an EOFError as in
    gensim, and a ValueError as every other malformed file."""


# ------------------------------------------ writing -----------------------------------------


def save_word2vec_format(kv, path, fvocab=None, binary=False, total_vec=None,
                         write_header=True, prefix="", append=False, sort_attr="count"):
    """word2vec.c's format: a `V D` header line (V: total_vec, default the number of keys),
    then per key `prefix + str(key)`, a space and its D floats: as text (9 significant
    digits, which round-trips float32) or as raw little-endian float32 followed by a newline
    (binary). As gensim, keys go in decreasing order of the `sort_attr` attribute when the
    vectors have it (else in index order, with a warning), `fvocab` gets `key count` lines
    in the same order, and `append` adds to existing files instead of replacing them."""
    order = _save_order(kv, sort_attr, fvocab)
    words = [prefix + str(kv.index_to_key[i]) for i in order]
    for w in words:
        if not w or any(ch.isspace() for ch in w):
            raise ValueError(f"cannot save key {w!r}: keys must be non-empty, without spaces")
    vectors = np.ascontiguousarray(kv.vectors[order], dtype="<f4")

    def target(name):  # a new file appears whole; an appended one is written in place
        return open(name, "ab") if append else atomic_open(name, "wb")

    if fvocab is not None:
        counts = np.asarray(kv.expandos[sort_attr])[order].tolist()
        with target(fvocab) as f:
            f.write("".join(f"{w} {c}\n" for w, c in zip(words, counts)).encode("utf8"))
    with target(path) as f:
        if write_header:
            V, D = kv.vectors.shape
            f.write(f"{V if total_vec is None else int(total_vec)} {D}\n".encode("utf8"))
        _write_entries(f, words, vectors, binary)


def _save_order(kv, sort_attr: str, fvocab) -> np.ndarray:
    """The rows in the order they are written: by decreasing `sort_attr`, ties in index
    order, or in index order when the vectors lack it (a vocabulary file then cannot be)."""
    if sort_attr in kv.expandos:
        return np.argsort(-np.asarray(kv.expandos[sort_attr]), kind="stable")
    if fvocab is not None:
        raise ValueError(f"cannot write the vocabulary file: the vectors have no "
                         f"{sort_attr!r} attribute")
    logger.warning("attribute %s not present; keys are written in index order", sort_attr)
    return np.arange(len(kv.vectors))


def _write_entries(f, words: list, vectors: np.ndarray, binary: bool) -> None:
    """The entries after the header: per word the word, a space and its row."""
    if binary:
        for w, row in zip(words, vectors):
            f.write(w.encode("utf8") + b" " + row.tobytes() + b"\n")
    else:
        buf = io.StringIO()
        for w, row in zip(words, vectors):
            buf.write(w + " " + " ".join("%.9g" % x for x in row.tolist()) + "\n")
        f.write(buf.getvalue().encode("utf8"))


# ------------------------------------------ reading -----------------------------------------


def load_word2vec_format(cls, path, fvocab=None, binary=False, encoding="utf8",
                         unicode_errors="strict", limit=None, datatype=np.float32,
                         no_header=False):
    """Reads word2vec.c's text or binary format (also gensim's binary variant without the
    newline after each vector); at most `limit` vectors; `no_header` for a text file without
    the `V D` line; words decoded with `encoding` and `unicode_errors` ('strict', 'replace',
    'ignore'). A malformed file raises ValueError naming the line or the entry (a truncated
    one TruncatedFileError, also an EOFError; undecodable bytes UnicodeDecodeError). The
    `count` attribute comes from `fvocab` (a file of `word count` lines) or, without it, is
    gensim's placeholder V - index (decreasing, so a count-sorted save keeps the order)."""
    if limit is not None and (not isinstance(limit, (int, np.integer)) or limit < 0):
        raise ValueError(f"limit must be a non-negative int or None, got {limit!r}")
    if no_header and binary:
        raise ValueError("no_header=True is only possible for text files (binary=False)")
    source = _Source(path, encoding, unicode_errors)
    with open(path, "rb") as f:
        if no_header:
            full, D = _text_shape(source)
        else:
            full, D = _read_header(f, path)
        V = full if limit is None else min(full, int(limit))
        rows = _Rows(D, V, os.fstat(f.fileno()).st_size - f.tell(), 4 * D if binary else 2 * D)
        if binary:
            keys = _read_binary(f, source, rows, V, whole=limit is None, last=V == full)
        else:
            keys = _read_text(f, source, rows, V, no_header, last=V == full)
    _check_unique(path, keys)
    kv = cls(D, 0)
    kv.index_to_key = keys
    kv.key_to_index = {k: i for i, k in enumerate(keys)}
    kv.vectors = rows.array().astype(datatype)
    kv.counts = (np.arange(len(keys), 0, -1) if fvocab is None else
                 _vocab_counts(keys, _Source(fvocab, encoding, unicode_errors)))
    return kv


@dataclass(frozen=True)
class _Source:
    """A file being read, and how its words are decoded."""

    path: str
    encoding: str
    errors: str  # unicode_errors

    def decode(self, raw: bytes, where: str, *args) -> str:
        """`raw` decoded; on a UnicodeDecodeError (a ValueError, as gensim raises it) the
        error names the place (the path, then `where % args`) and the remedy."""
        try:
            return raw.decode(self.encoding, self.errors)
        except UnicodeDecodeError as e:
            raise UnicodeDecodeError(
                e.encoding, e.object, e.start, e.end,
                f"{e.reason}; {self.path}{where % args} is not {self.encoding}: pass "
                "unicode_errors='replace' to read it anyway") from None


def _read_header(f, path) -> tuple:
    """(V, D) of the `V D` first line."""
    header = f.readline()
    try:
        V, D = (int(x) for x in header.split())
        if V < 0 or D <= 0:
            raise ValueError
    except ValueError:
        raise ValueError(f"{path}, line 1: expected a header 'vocab_size "
                         f"vector_size', got {header[:80]!r}") from None
    if D >= MAX_VECTOR_SIZE:  # numpy cannot shape an array of such rows
        raise ValueError(f"{path}, line 1: a vector size of {D} (the header) is "
                         f"past {MAX_VECTOR_SIZE - 1}")
    return V, D


def _text_shape(source: _Source) -> tuple:
    """(lines, D) of a header-less text file: D from the first line."""
    lines, D = 0, None
    with open(source.path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            if D is None:
                D = len(source.decode(raw, ", line %d", number).rstrip().split(" ")) - 1
            lines += 1
    if not D:
        raise ValueError(f"{source.path}: no vectors found (no_header=True)")
    return lines, D


def _read_binary(f, source: _Source, rows: "_Rows", V: int, whole: bool, last: bool) -> list:
    """The keys of the V entries after the header (their vectors go to `rows`): a word, a
    space and D float32 values each, the newlines between entries optional. `whole`: read
    the rest of the file (else only what V entries of words of 256 bytes can take); `last`:
    the V entries are all the header announces, and nothing but space may follow them."""
    D = rows.buf.shape[1]
    width = 4 * D
    size = os.fstat(f.fileno()).st_size
    data = f.read() if whole else f.read(min(V * (width + 256 + 2), size))
    pos, keys = 0, []
    for i in range(V):
        while pos < len(data) and data[pos:pos + 1] in (b"\n", b"\r"):
            pos += 1
        space = data.find(b" ", pos)
        if space < 0 or space + 1 + width > len(data):
            raise TruncatedFileError(
                f"{source.path}: entry {i + 1} of {V} (line {i + 2} counting the header) is "
                f"truncated: expected a word, a space and {D} float32 values")
        keys.append(source.decode(data[pos:space], ": entry %d of %d: the word", i + 1, V))
        rows.append(np.frombuffer(data, dtype="<f4", count=D, offset=space + 1))
        pos = space + 1 + width
    if last and data[pos:].strip():
        raise ValueError(f"{source.path}: data after the {V} entries the header announces")
    return keys


def _read_text(f, source: _Source, rows: "_Rows", V: int, no_header: bool, last: bool) -> list:
    """The keys of the next V lines (their vectors go to `rows`): a word and D numbers
    each, separated by single spaces. Without a header blank lines are skipped; `last`: the
    V lines are all the header announces, and only blank lines may follow them."""
    D, first_line = rows.buf.shape[1], 1 if no_header else 2
    keys = []
    for i in range(V):
        raw = f.readline()
        while no_header and raw and not raw.strip():
            raw = f.readline()
        line_no = i + first_line
        if not raw:
            raise TruncatedFileError(f"{source.path}, line {line_no}: file ends after {i} of "
                                     f"the {V} words the header announces")
        fields = source.decode(raw, ", line %d", line_no).rstrip("\r\n").rstrip(" ").split(" ")
        if len(fields) != D + 1:
            raise ValueError(f"{source.path}, line {line_no}: expected a word and {D} "
                             f"numbers, got {len(fields)} fields")
        try:
            rows.append(np.array(fields[1:], dtype=np.float32))
        except ValueError:
            raise ValueError(f"{source.path}, line {line_no}: a vector value is not a number"
                             ) from None
        keys.append(fields[0])
    if last and f.read().strip():
        raise ValueError(f"{source.path}: lines after the {V} words the header announces")
    return keys


def _check_unique(path, keys: list) -> None:
    if len(set(keys)) != len(keys):
        seen = set()
        dup = next(k for k in keys if k in seen or seen.add(k))
        raise ValueError(f"{path}: word {dup!r} appears more than once")


def _vocab_counts(keys: list, vocab: _Source) -> np.ndarray:
    """The count of each key in a vocabulary file of `word count` lines (save_word2vec_format's
    fvocab, word2vec.c's -save-vocab); 0 for the keys it lacks (with a warning, as gensim)."""
    counts = {}
    with open(vocab.path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            fields = vocab.decode(raw, ", line %d", line_no).split()
            if not fields:
                continue
            if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
                raise ValueError(f"{vocab.path}, line {line_no}: expected 'word count', got "
                                 f"{raw[:80]!r}")
            counts[fields[0]] = int(fields[1])
    missing = [k for k in keys if k not in counts]
    if missing:  # gensim warns too (and leaves the count unset)
        logger.warning("vocabulary file %s lacks %i of the words, e.g. %r; their count "
                       "is 0", vocab.path, len(missing), missing[0])
    return np.array([counts.get(k, 0) for k in keys], dtype=np.int64)


class _Rows:
    """The [n, D] float32 rows read so far. Room is made for the rows the file can hold (each
    takes at least `row_bytes` of its `file_bytes`), never for the count the header claims
    alone: a header saying 10^12 vectors in a tiny file must not allocate them."""

    def __init__(self, D: int, claimed: int, file_bytes: int, row_bytes: int):
        self.n = 0
        self.buf = np.zeros((min(claimed, max(file_bytes, 0) // max(row_bytes, 1)), D),
                            dtype=np.float32)

    def append(self, row: np.ndarray) -> None:
        if self.n == len(self.buf):  # only if the bound above was wrong: grow by doubling
            grown = np.zeros((max(1, 2 * self.n), self.buf.shape[1]), dtype=np.float32)
            grown[:self.n] = self.buf
            self.buf = grown
        self.buf[self.n] = row
        self.n += 1

    def array(self) -> np.ndarray:
        return self.buf if self.n == len(self.buf) else self.buf[:self.n].copy()
