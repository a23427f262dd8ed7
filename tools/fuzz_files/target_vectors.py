"""Fuzz target: KeyedVectors.load_word2vec_format on word2vec.c's text and binary vector
files (fastsoftmax/models/word2vec/formats.py). A file either loads (every key once, one
float32 row of the header's width per key) or raises a ValueError that names the file;
never another exception type (IndexError, struct.error, OverflowError, a bare
UnicodeDecodeError, ...), a MemoryError (a tiny file whose header claims 10^12 vectors must
not allocate them: without ASan the harness caps the address space, under ASan libFuzzer's
-malloc_limit_mb does), or a hang (libFuzzer's -timeout).

Input: one control byte (binary, limit, no_header, unicode_errors), then the file.
Seeds: small files written by save_word2vec_format in both formats.

    python tools/fuzz_files/target_vectors.py -runs=100000 CORPUS_DIR
"""

import sys

import harness


def instrument():
    global np, KeyedVectors
    import numpy as np

    from fastsoftmax.models.word2vec import KeyedVectors


PATH = harness.scratch_file("vectors.bin")


def options(ctrl: int) -> dict:
    binary = bool(ctrl & 1)
    return {"binary": binary,
            "limit": (ctrl >> 4) if ctrl & 2 else None,
            "no_header": bool(ctrl & 4) and not binary,
            "unicode_errors": "replace" if ctrl & 8 else "strict"}


def one_input(buf: bytes) -> None:
    opts = options(buf[0] if buf else 0)
    with open(PATH, "wb") as f:
        f.write(buf[1:])
    try:
        kv = KeyedVectors.load_word2vec_format(PATH, **opts)
    except Exception as exc:  # checked: only a ValueError naming the file may escape
        harness.check_loader_error(exc, PATH)
        return
    keys = kv.index_to_key
    assert kv.vectors.dtype == np.float32, kv.vectors.dtype
    assert kv.vectors.ndim == 2 and kv.vectors.shape[0] == len(keys), kv.vectors.shape
    assert kv.vectors.shape[1] == kv.vector_size > 0, (kv.vectors.shape, kv.vector_size)
    assert len(set(keys)) == len(keys) and kv.key_to_index == {k: i for i, k in enumerate(keys)}
    if opts["limit"] is not None:
        assert len(keys) <= opts["limit"], (len(keys), opts["limit"])


def seeds():
    out = []
    rng = np.random.default_rng(0)
    path = harness.scratch_file("seed")
    for words, dim in [(["w1", "é", "日本"], 3), (["a"], 1), (["x", "y", "z", "\U0001F600"], 5)]:
        kv = KeyedVectors(dim, len(words))
        kv.vectors[:] = rng.standard_normal((len(words), dim)).astype(np.float32)
        kv.vectors[0, 0] = np.float32(1e-40) if dim > 1 else kv.vectors[0, 0]
        kv.index_to_key = list(words)
        kv.key_to_index = {w: i for i, w in enumerate(words)}
        for binary in (False, True):
            kv.save_word2vec_format(path, binary=binary)
            with open(path, "rb") as f:
                body = f.read()
            # ctrl: binary bit; also a limit of 2 and, for text, no header
            out.append(bytes([int(binary)]) + body)
            out.append(bytes([int(binary) | 2 | (2 << 4)]) + body)
            if not binary:
                out.append(b"\x04" + body.split(b"\n", 1)[1])
    return out


if __name__ == "__main__":
    harness.main(one_input, seeds, instrument)
    sys.exit(0)
