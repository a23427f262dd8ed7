"""Files of word vectors and models: word2vec.c's text and binary formats for
``KeyedVectors``, and the Word2Vec model (vectors, syn1neg and/or syn1 with its Huffman tree,
vocabulary, keep probabilities, settings) in fastsoftmax's own .npz of plain arrays and JSON,
with .npy files beside it for arrays saved separately (written atomically, read without
unpickling, mapped with mmap='r': persistence.py)."""

from __future__ import annotations

import io
import logging
import os

import numpy as np
import torch

from ..._atomic import atomic_open
from ...tree import ClassTree
from .data import keep_probabilities
from .training import checked_round_size
from .persistence import (checked_mmap, choose_separate, file_contents, load_npz, read_only,
                          save_npz)
# Where the .npz layer lived before persistence.py: PPMIVectors and the fuzzers import these.
from .persistence import FORMAT_VERSION, decode_json, encode_json  # noqa: F401

MAX_VECTOR_SIZE = 1 << 40
logger = logging.getLogger(__name__)


class TruncatedFileError(EOFError, ValueError):
    """A vector file that ends before the entries its header announces: an EOFError as in
    gensim, and a ValueError as every other malformed file."""


def _decode_error(exc: UnicodeDecodeError, where: str, encoding: str) -> UnicodeDecodeError:
    """The decode error (a ValueError, as gensim raises it) with the place and the remedy."""
    return UnicodeDecodeError(exc.encoding, exc.object, exc.start, exc.end,
                              f"{exc.reason}; {where} is not {encoding}: pass "
                              "unicode_errors='replace' to read it anyway")


# ----------------------------------- word2vec.c formats ----------------------------------


def save_word2vec_format(kv, path, fvocab=None, binary=False, total_vec=None,
                         write_header=True, prefix="", append=False, sort_attr="count"):
    """word2vec.c's format: a `V D` header line (V: total_vec, default the number of keys),
    then per key `prefix + str(key)`, a space and its D floats: as text (9 significant
    digits, which round-trips float32) or as raw little-endian float32 followed by a newline
    (binary). As gensim, keys go in decreasing order of the `sort_attr` attribute when the
    vectors have it (else in index order, with a warning), `fvocab` gets `key count` lines
    in the same order, and `append` adds to existing files instead of replacing them."""
    V, D = kv.vectors.shape
    if sort_attr in kv.expandos:
        order = np.argsort(-np.asarray(kv.expandos[sort_attr]), kind="stable")
    else:
        if fvocab is not None:
            raise ValueError(f"cannot write the vocabulary file: the vectors have no "
                             f"{sort_attr!r} attribute")
        logger.warning("attribute %s not present; keys are written in index order", sort_attr)
        order = np.arange(V)
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
            f.write(f"{V if total_vec is None else int(total_vec)} {D}\n".encode("utf8"))
        if binary:
            for w, row in zip(words, vectors):
                f.write(w.encode("utf8") + b" " + row.tobytes() + b"\n")
        else:
            buf = io.StringIO()
            for w, row in zip(words, vectors):
                buf.write(w + " " + " ".join("%.9g" % x for x in row.tolist()) + "\n")
            f.write(buf.getvalue().encode("utf8"))


def _read_vocab(path, encoding, unicode_errors) -> dict:
    """{word: count} of a vocabulary file of `word count` lines (save_word2vec_format's
    fvocab, word2vec.c's -save-vocab)."""
    counts = {}
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            try:
                fields = raw.decode(encoding, unicode_errors).split()
            except UnicodeDecodeError as e:
                raise _decode_error(e, f"{path}, line {line_no}", encoding) from None
            if not fields:
                continue
            if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
                raise ValueError(f"{path}, line {line_no}: expected 'word count', got "
                                 f"{raw[:80]!r}")
            counts[fields[0]] = int(fields[1])
    return counts


def _text_shape(path, encoding, unicode_errors):
    """(lines, D) of a header-less text file: D from the first line."""
    lines, D = 0, None
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            if D is None:
                try:
                    D = len(raw.decode(encoding, unicode_errors).rstrip().split(" ")) - 1
                except UnicodeDecodeError as e:
                    raise _decode_error(e, f"{path}, line {number}", encoding) from None
            lines += 1
    if not D:
        raise ValueError(f"{path}: no vectors found (no_header=True)")
    return lines, D


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
    with open(path, "rb") as f:
        if no_header:
            V, D = _text_shape(path, encoding, unicode_errors)
            first_line = 1
        else:
            header = f.readline()
            first_line = 2
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
        full = V
        if limit is not None:
            V = min(V, int(limit))
        rows = _Rows(D, V, os.fstat(f.fileno()).st_size - f.tell(), 4 * D if binary else 2 * D)
        keys = []
        if binary:
            width = 4 * D
            size = os.fstat(f.fileno()).st_size
            data = f.read() if limit is None else f.read(min(V * (width + 256 + 2), size))
            pos = 0
            for i in range(V):
                while pos < len(data) and data[pos:pos + 1] in (b"\n", b"\r"):
                    pos += 1
                space = data.find(b" ", pos)
                if space < 0 or space + 1 + width > len(data):
                    raise TruncatedFileError(
                        f"{path}: entry {i + 1} of {V} (line {i + 2} counting the header) is "
                        f"truncated: expected a word, a space and {D} float32 values")
                try:
                    keys.append(data[pos:space].decode(encoding, unicode_errors))
                except UnicodeDecodeError as e:
                    raise _decode_error(e, f"{path}: entry {i + 1} of {V}: the word",
                                        encoding) from None
                rows.append(np.frombuffer(data, dtype="<f4", count=D, offset=space + 1))
                pos = space + 1 + width
            if V == full and data[pos:].strip():
                raise ValueError(f"{path}: data after the {V} entries the header announces")
        else:
            for i in range(V):
                raw = f.readline()
                while no_header and raw and not raw.strip():
                    raw = f.readline()
                line_no = i + first_line
                if not raw:
                    raise TruncatedFileError(f"{path}, line {line_no}: file ends after {i} of "
                                             f"the {V} words the header announces")
                try:
                    text = raw.decode(encoding, unicode_errors)
                except UnicodeDecodeError as e:
                    raise _decode_error(e, f"{path}, line {line_no}", encoding) from None
                fields = text.rstrip("\r\n").rstrip(" ").split(" ")
                if len(fields) != D + 1:
                    raise ValueError(f"{path}, line {line_no}: expected a word and {D} "
                                     f"numbers, got {len(fields)} fields")
                try:
                    rows.append(np.array(fields[1:], dtype=np.float32))
                except ValueError:
                    raise ValueError(f"{path}, line {line_no}: a vector value is not a number"
                                     ) from None
                keys.append(fields[0])
            if V == full and f.read().strip():
                raise ValueError(f"{path}: lines after the {V} words the header announces")
    if len(set(keys)) != len(keys):
        seen = set()
        dup = next(k for k in keys if k in seen or seen.add(k))
        raise ValueError(f"{path}: word {dup!r} appears more than once")
    kv = cls(D, 0)
    kv.index_to_key = keys
    kv.key_to_index = {k: i for i, k in enumerate(keys)}
    kv.vectors = rows.array().astype(datatype)
    if fvocab is None:
        kv.counts = np.arange(len(keys), 0, -1)
    else:
        counts = _read_vocab(fvocab, encoding, unicode_errors)
        missing = [k for k in keys if k not in counts]
        if missing:  # gensim warns too (and leaves the count unset)
            logger.warning("vocabulary file %s lacks %i of the words, e.g. %r; their count "
                           "is 0", fvocab, len(missing), missing[0])
        kv.counts = np.array([counts.get(k, 0) for k in keys], dtype=np.int64)
    return kv


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


# ---------------------------------------------------------------------------------------
# the whole Word2Vec model
# ---------------------------------------------------------------------------------------


class class_only(classmethod):
    """A classmethod that refuses to be called on an instance (AttributeError, as gensim's
    load): `model.load(path)` would suggest it loads into `model`, and it does not."""

    def __get__(self, instance, owner=None):
        if instance is not None:
            raise AttributeError(f"{self.__func__.__name__} is a class method: call it on the "
                                 "class, e.g. Word2Vec.load(path); it returns a new model")
        return super().__get__(instance, owner)



def save_model(model, path: str, separately=None, sep_limit=None) -> None:
    if model._syn0 is None:
        raise RuntimeError("nothing to save: the model has no vocabulary yet")
    arrays = model.wv._arrays("wv_")
    # The training table, which load restores (wv.vectors may be a copy of it on CUDA, or a
    # read-only map): taken as it is, leaving wv as the caller had it.
    arrays["wv_vectors"] = model._syn0.cpu().numpy()
    if model.negative:
        arrays["syn1neg"] = model._syn1neg.cpu().numpy()
    if model.hs:
        arrays["syn1"] = model._syn1.cpu().numpy()  # the V - 1 rows of the inner nodes
        arrays["hs_links"] = model.hs_tree.links.cpu().numpy()
    arrays["keep"] = model._keep_np
    config = {k: getattr(model, k) for k in model._CONFIG}
    save_npz(path, arrays, {"class": "Word2Vec", "config": config},
             choose_separate(arrays, separately, sep_limit))


def _check_shape(name: str, array, shape: tuple) -> None:
    if tuple(array.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(array.shape)}, expected {shape}")


# With mmap='r' the training tables are copy-on-write maps of their .npy files: training
# writes private copies of the pages it changes, in this process's memory, so it neither
# crashes on a read-only page nor writes the file (which other processes may be mapping), and
# save() writes what it learned to new files. Pages never written stay shared with the file.
# Refusing train() would only make users reload to go on, for no safety gained.
MAPPED_TABLES = {"wv_vectors": "c", "syn1neg": "c", "syn1": "c"}


def load_model(cls, path: str, device=None, mmap=None):
    checked_mmap(mmap)
    arrays, meta = load_npz(path, ("Word2Vec",), mmap, MAPPED_TABLES)
    with file_contents(path, "Word2Vec model"):
        return _model(cls, path, arrays, meta, device)


def _tensor(array, device) -> torch.Tensor:
    """A float32 table on `device`: a copy-on-write map is used in place on the CPU (copied
    to a GPU); an array read into memory is copied, as the model owns its tables."""
    if isinstance(array, np.memmap) and array.dtype == np.float32 and array.flags.writeable:
        return torch.from_numpy(array).to(device)
    return torch.from_numpy(np.array(array, dtype=np.float32)).to(device)


def _model(cls, path: str, arrays: dict, meta: dict, device):
    cfg = meta["config"]
    model = cls(vector_size=cfg["vector_size"], hs=cfg.get("hs", 0),
                negative=cfg.get("negative", 5), device=device or "cpu")
    for k in cls._CONFIG:
        if k in cfg:
            setattr(model, k, cfg[k])
    checked_round_size(model.round_size)
    model.wv = type(model.wv)._from_arrays(arrays, "wv_")
    mapped = model.wv.vectors if isinstance(model.wv.vectors, np.memmap) else None
    model._syn0 = _tensor(model.wv.vectors, model.device)
    model._syn1neg = model._syn1 = tree = None
    needed = (("syn1neg",) if model.negative else ()) + (("syn1", "hs_links") if model.hs else ())
    for name in needed:
        if name not in arrays:
            raise ValueError(f"{path}: the model file lacks {name!r} (hs={model.hs}, "
                             f"negative={model.negative})")
    if model.negative:
        model._syn1neg = _tensor(arrays["syn1neg"], model.device)
    if model.hs:
        model._syn1 = _tensor(arrays["syn1"], model.device)
        tree = ClassTree(torch.from_numpy(arrays["hs_links"]))  # checks it is one tree
        if tree.num_classes != len(model.wv) or model._syn1.shape[0] != len(model.wv) - 1:
            raise ValueError(f"{path}: the Huffman tree or syn1 does not match the "
                             f"vocabulary of {len(model.wv)} words")
    counts = model.wv.counts
    model._keep_np = (arrays["keep"].astype(np.float32) if "keep" in arrays else
                      keep_probabilities(counts, int(counts.sum()), model.sample))
    # Every table has a row per word (syn1 one per inner node): otherwise the model would
    # load and fail only when trained (word2vec_train checks the shapes), far from the file.
    V, D = len(model.wv), model.vector_size
    _check_shape("the vectors", model.wv.vectors, (V, D))
    _check_shape("the counts", counts, (V,))
    _check_shape("the keep probabilities", model._keep_np, (V,))
    if model.negative:
        _check_shape("syn1neg", model._syn1neg, (V, D))
    if model.hs:
        _check_shape("syn1", model._syn1, (V - 1, D))
    model._sync_vectors()
    if mapped is not None:  # queries read the map, read-only as gensim's (training syncs)
        model.wv.vectors = read_only(mapped)
    model._tables(tree)
    return model
