"""Fuzz target: word2vec's native corpus_file reader (corpus_file.batches: chunks of whole
lines through the op corpus_encode) against the Python path (data.python_batches over
LineSentence) on the same file: the same batches, array for array and dtype for dtype, or
the same CorpusDecodeError, whose message names the file and the line.

Input: three control bytes (the read chunk's size, the batch's word limit, the longest
sentence), then the file's bytes. Chunks of a few bytes cut lines and characters across
reads; a longest sentence of 3 words cuts lines into pieces as 10,000 does in production.

    python tools/fuzz_files/target_corpus_file.py -runs=100000 CORPUS_DIR
"""

import sys

import harness

CHUNKS = [1, 2, 3, 5, 8, 16, 64, 1 << 24]
VOCAB = ["w1", "w2", "é", "日本", "x", "a\u200bb", "\U0001F600"]


def instrument():
    global np, textfiles, corpus_file, data, LineSentence, CorpusDecodeError
    import numpy as np

    from fastsoftmax.models import textfiles
    from fastsoftmax.models.textfiles import CorpusDecodeError, LineSentence
    from fastsoftmax.models.word2vec import corpus_file, data


PATH = harness.scratch_file("corpus.txt")
KEY_TO_INDEX = {w: i for i, w in enumerate(VOCAB)}


def set_max_sentence_words(n: int) -> None:
    # Both readers cut at this constant: LineSentence and pieces() (textfiles) and the op's
    # argument (corpus_file's copy of the name).
    textfiles.MAX_SENTENCE_WORDS = corpus_file.MAX_SENTENCE_WORDS = n


def run(reader):
    """(batches, None) or (None, the exception) of one reader."""
    try:
        return list(reader()), None
    except Exception as exc:  # compared below; anything but CorpusDecodeError fails there
        return None, exc


def one_input(buf: bytes) -> None:
    ctrl, text = (buf[:3] + b"\x00\x00\x00")[:3], buf[3:]
    corpus_file.CHUNK_BYTES = CHUNKS[ctrl[0] % len(CHUNKS)]
    limit = 1 + ctrl[1] % 24 if ctrl[1] < 250 else 10**6
    set_max_sentence_words(3 if ctrl[2] % 2 else 10000)
    with open(PATH, "wb") as f:
        f.write(text)
    corpus = LineSentence(PATH)
    native, native_exc = run(lambda: corpus_file.batches(corpus, KEY_TO_INDEX, limit))
    python, python_exc = run(lambda: data.python_batches(KEY_TO_INDEX, corpus, limit))
    if native_exc or python_exc:
        for exc in (native_exc, python_exc):
            if not isinstance(exc, CorpusDecodeError):
                raise AssertionError(f"native {native_exc!r}, python {python_exc!r}") from exc
        assert str(native_exc) == str(python_exc), (str(native_exc), str(python_exc))
        assert str(native_exc).startswith(f"{PATH}:"), str(native_exc)
        return
    assert len(native) == len(python), (len(native), len(python))
    for a, b in zip(native, python):
        assert a.keys() == b.keys(), (a.keys(), b.keys())
        for key in a:
            assert np.array_equal(a[key], b[key]), (key, a[key], b[key])
            if key != "raw":
                assert a[key].dtype == b[key].dtype, (key, a[key].dtype, b[key].dtype)


def seeds():
    return [
        b"\x07\x02\x00w1 w2 \xc3\xa9\nw1\n\n  x y\n",
        b"\x00\x05\x01w1 w2 w1 x w2 w1 x\n\n\nx\xe2\x80\xa8w2\xc2\xa0w1",
        b"\x02\x01\x01\xe6\x97\xa5\xe6\x9c\xac w1\x1cw2\x1fx\x0bx\x0cx\rw1\xe3\x80\x80\n\n",
        b"\x03\x03\x00w1\nw2 \xed\xa0\x80 w2\nw1\n",
        b"\x01\xff\x01" + b"w1 w2 q " * 10 + b"\n" + b"x " * 9,
        b"\x04\x00\x00a\xe2\x80\x8bb w1 \xc2\x85 w2\n\xf0\x9f\x98\x80 \xf0\x9f\x98\n",
    ]


if __name__ == "__main__":
    harness.main(one_input, seeds, instrument)
    sys.exit(0)
