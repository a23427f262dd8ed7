"""Evaluation and files for ``KeyedVectors``: word-pair similarity and analogy scores, the
word2vec.c text/binary formats, and fastsoftmax's own .npz (plain arrays and JSON, never
unpickled)."""

from __future__ import annotations

import io
import json
import math
import zipfile

import numpy as np

from .._atomic import atomic_open

FORMAT_VERSION = 1


# ---------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------


def rank_average(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (as scipy.stats.rankdata)."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts = np.flatnonzero(np.concatenate(([True], xs[1:] != xs[:-1])))
    ends = np.concatenate((starts[1:], [len(x)]))
    ranks = np.empty(len(x), dtype=np.float64)
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e - 1) / 2.0 + 1.0
    return ranks


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    den = math.sqrt(float((a * a).sum()) * float((b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else float("nan")


def _restricted(kv, restrict_vocab: int, case_insensitive: bool) -> dict:
    """key -> index over the first restrict_vocab keys; upper-cased keys map to the most
    frequent spelling when case_insensitive (gensim's rule)."""
    keys = [str(k) for k in kv.index_to_key[:restrict_vocab]]
    if case_insensitive:
        return {k.upper(): i for i, k in reversed(list(enumerate(keys)))}
    return {k: i for i, k in enumerate(keys)}


def evaluate_word_pairs(kv, pairs, delimiter="\t", restrict_vocab=300000,
                        case_insensitive=True):
    """Correlation of cosine similarities with human scores on a file of
    `word1<delimiter>word2<delimiter>score` lines ('#' lines are comments). Pairs with a word
    outside the first `restrict_vocab` words are skipped and counted as OOV. Returns
    (pearson, spearman, oov_percent) as floats (gensim adds p-values; no scipy needed here)."""
    vocab = _restricted(kv, restrict_vocab, case_insensitive)
    u = kv._unit_rows()
    gold, model, oov = [], [], 0
    with open(pairs, encoding="utf8") as f:
        for line_no, line in enumerate(f, 1):
            if line.startswith("#") or not line.strip():
                continue
            fields = line.rstrip("\n").split(delimiter)
            if len(fields) != 3:
                raise ValueError(f"{pairs}, line {line_no}: expected 3 fields separated by "
                                 f"{delimiter!r}, got {len(fields)}: {line.rstrip()!r}")
            a, b = fields[0].strip(), fields[1].strip()
            try:
                score = float(fields[2])
            except ValueError:
                raise ValueError(f"{pairs}, line {line_no}: score {fields[2].strip()!r} is "
                                 "not a number") from None
            if case_insensitive:
                a, b = a.upper(), b.upper()
            if a not in vocab or b not in vocab:
                oov += 1
                continue
            gold.append(score)
            model.append(float(np.dot(u[vocab[a]], u[vocab[b]])))
    total = len(gold) + oov
    oov_percent = 100.0 * oov / total if total else 0.0
    if len(gold) < 2:
        return float("nan"), float("nan"), oov_percent
    g, m = np.array(gold), np.array(model)
    return pearson(g, m), pearson(rank_average(g), rank_average(m)), oov_percent


def evaluate_word_analogies(kv, analogies, restrict_vocab=300000, case_insensitive=True):
    """Accuracy on a questions-words.txt file (': section' headers, then `a b c d` lines
    meaning a:b = c:d). The answer is the best 3CosAdd word for b - a + c among the first
    `restrict_vocab` words, excluding a, b and c; questions with a word outside them are
    skipped. Returns (accuracy, sections) with sections as gensim's: a list of
    {'section', 'correct', 'incorrect'} dicts ending with 'Total accuracy'."""
    vocab = _restricted(kv, restrict_vocab, case_insensitive)
    u = kv._unit_rows()[:restrict_vocab]
    sections, section = [], None
    with open(analogies, encoding="utf8") as f:
        for line_no, line in enumerate(f, 1):
            if line.startswith(": "):
                if section is not None:
                    sections.append(section)
                section = {"section": line[2:].strip(), "correct": [], "incorrect": []}
                continue
            if not line.strip():
                continue
            if section is None:
                raise ValueError(f"{analogies}, line {line_no}: question before any "
                                 "': section' header")
            words = line.upper().split() if case_insensitive else line.split()
            if len(words) != 4:
                raise ValueError(f"{analogies}, line {line_no}: expected 4 words, got "
                                 f"{len(words)}: {line.rstrip()!r}")
            a, b, c, expected = words
            if any(w not in vocab for w in words):
                continue
            ia, ib, ic = vocab[a], vocab[b], vocab[c]
            query = u[ib] - u[ia] + u[ic]
            dists = u @ (query / max(np.linalg.norm(query), 1e-30))
            dists[[ia, ib, ic]] = -np.inf
            # The best word that is not a question word; with case_insensitive a different
            # spelling of a question word does not count either (gensim).
            guess = None
            k = min(64, len(dists))
            top = np.argpartition(-dists, k - 1)[:k]
            for best in top[np.argsort(-dists[top], kind="stable")].tolist():
                guess = str(kv.index_to_key[best])
                guess = guess.upper() if case_insensitive else guess
                if guess not in (a, b, c):
                    break
            (section["correct"] if guess == expected else section["incorrect"]).append(
                (a, b, c, expected))
    if section is not None:
        sections.append(section)
    total = {"section": "Total accuracy",
             "correct": [q for s in sections for q in s["correct"]],
             "incorrect": [q for s in sections for q in s["incorrect"]]}
    sections.append(total)
    n = len(total["correct"]) + len(total["incorrect"])
    return (len(total["correct"]) / n if n else 0.0), sections


# ---------------------------------------------------------------------------------------
# word2vec.c formats
# ---------------------------------------------------------------------------------------


def save_word2vec_format(kv, path, binary=False, write_header=True):
    """word2vec.c's format: a `V D` header line, then per key `str(key)`, a space and its D
    floats: as text (9 significant digits, which round-trips float32) or as raw little-endian
    float32 followed by a newline (binary)."""
    V, D = kv.vectors.shape
    words = [str(k) for k in kv.index_to_key]
    for w in words:
        if not w or any(ch.isspace() for ch in w):
            raise ValueError(f"cannot save key {w!r}: keys must be non-empty, without spaces")
    vectors = np.ascontiguousarray(kv.vectors, dtype="<f4")
    with atomic_open(path, "wb") as f:
        if write_header:
            f.write(f"{V} {D}\n".encode("utf8"))
        if binary:
            for w, row in zip(words, vectors):
                f.write(w.encode("utf8") + b" " + row.tobytes() + b"\n")
        else:
            buf = io.StringIO()
            for w, row in zip(words, vectors):
                buf.write(w + " " + " ".join("%.9g" % x for x in row.tolist()) + "\n")
            f.write(buf.getvalue().encode("utf8"))


def _text_shape(path, encoding, unicode_errors):
    """(lines, D) of a header-less text file: D from the first line."""
    lines, D = 0, None
    with open(path, "rb") as f:
        for raw in f:
            if not raw.strip():
                continue
            if D is None:
                D = len(raw.decode(encoding, unicode_errors).rstrip().split(" ")) - 1
            lines += 1
    if not D:
        raise ValueError(f"{path}: no vectors found (no_header=True)")
    return lines, D


def load_word2vec_format(cls, path, binary=False, encoding="utf8", unicode_errors="strict",
                         limit=None, datatype=np.float32, no_header=False):
    """Reads word2vec.c's text or binary format (also gensim's binary variant without the
    newline after each vector); at most `limit` vectors; `no_header` for a text file without
    the `V D` line; words decoded with `encoding` and `unicode_errors` ('strict', 'replace',
    'ignore'). A malformed file raises ValueError naming the line or the entry."""
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
        full = V
        if limit is not None:
            V = min(V, int(limit))
        kv = cls(D, V)
        keys = []
        if binary:
            width = 4 * D
            data = f.read() if limit is None else f.read(V * (width + 256 + 2))
            pos = 0
            for i in range(V):
                while pos < len(data) and data[pos:pos + 1] in (b"\n", b"\r"):
                    pos += 1
                space = data.find(b" ", pos)
                if space < 0 or space + 1 + width > len(data):
                    raise ValueError(f"{path}: entry {i + 1} of {V} (line {i + 2} counting the "
                                     f"header) is truncated: expected a word, a space and {D} "
                                     "float32 values")
                try:
                    keys.append(data[pos:space].decode(encoding, unicode_errors))
                except UnicodeDecodeError as e:
                    raise ValueError(f"{path}: entry {i + 1} of {V}: word is not {encoding} "
                                     f"({e}); pass unicode_errors='replace' to read it anyway"
                                     ) from None
                kv.vectors[i] = np.frombuffer(data, dtype="<f4", count=D, offset=space + 1)
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
                    raise ValueError(f"{path}, line {line_no}: file ends after {i} of the {V} "
                                     "words the header announces")
                try:
                    text = raw.decode(encoding, unicode_errors)
                except UnicodeDecodeError as e:
                    raise ValueError(f"{path}, line {line_no}: not {encoding} ({e}); pass "
                                     "unicode_errors='replace' to read it anyway") from None
                fields = text.rstrip("\r\n").rstrip(" ").split(" ")
                if len(fields) != D + 1:
                    raise ValueError(f"{path}, line {line_no}: expected a word and {D} "
                                     f"numbers, got {len(fields)} fields")
                try:
                    kv.vectors[i] = np.array(fields[1:], dtype=np.float32)
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
    kv.index_to_key = keys
    kv.key_to_index = {k: i for i, k in enumerate(keys)}
    kv.vectors = kv.vectors.astype(datatype)
    return kv


# ---------------------------------------------------------------------------------------
# .npz of plain arrays
# ---------------------------------------------------------------------------------------


def encode_json(obj) -> np.ndarray:
    return np.frombuffer(json.dumps(obj).encode("utf8"), dtype=np.uint8)


def decode_json(arr):
    return json.loads(bytes(np.asarray(arr, dtype=np.uint8)).decode("utf8"))


def save_npz(path: str, arrays: dict, meta: dict) -> None:
    arrays = dict(arrays)
    arrays["meta"] = encode_json({"format": FORMAT_VERSION, **meta})
    # Write to the exact path given (np.savez would append .npz to a path without it).
    with atomic_open(path, "wb") as f:
        np.savez(f, **arrays)


def load_npz(path: str, classes) -> tuple:
    """(dict of arrays, meta) of a file written by save_npz whose class is in `classes`; a
    ValueError naming the file for anything else (a pickle is refused, never unpickled)."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic[:1] == b"\x80":  # pickle protocol 2+
        raise ValueError(f"{path} is a Python pickle: fastsoftmax never unpickles (it can run "
                         "code); save the model with fastsoftmax's save() and load that")
    if magic not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise ValueError(f"{path} is not an .npz file written by save() (it does not start "
                         f"like a zip archive: {magic!r})")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: np.array(z[k]) for k in z.files}
        meta = decode_json(arrays.pop("meta"))
    except (zipfile.BadZipFile, EOFError, KeyError, ValueError) as exc:
        reason = f"no {exc} entry" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"{path} cannot be read as a model saved by fastsoftmax (truncated, "
                         f"damaged or written by another program: {reason})") from None
    if meta.get("class") not in classes:
        raise ValueError(f"{path} holds a {meta.get('class')!r}, expected one of {classes}")
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported format version {meta.get('format')}")
    return arrays, meta
