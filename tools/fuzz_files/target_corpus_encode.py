"""Fuzz target: the ops fastsoftmax::corpus_encode and corpus_count (csrc/cpu/, on the scanner
of text_scan.h) against their plain references (tests/reference_word2vec.py: LineSentence's
reading in Python): the same tokens, sentence ends, raw word counts, distinct words with their
counts in first-seen order, and first bad byte, for any bytes.

Input: one control byte (max_sentence_words), then either the text alone or a vocabulary
and the text, `word \\x01 word ... \\x00\\x00 text` (the vocabulary's words may repeat, be
empty or hold spaces; a repeated word keeps its first id).

    python tools/fuzz_files/target_corpus_encode.py -runs=100000 CORPUS_DIR
"""

import sys

import harness

DEFAULT_VOCAB = ["w1", "w2", "é", "日本", "a\u200bb", "\U0001F600", "x"]


def instrument():
    global torch, ops, corpus_encode_reference, corpus_count_reference
    import torch

    from fastsoftmax import ops
    from reference_word2vec import corpus_count_reference, corpus_encode_reference


def split_input(data: bytes):
    """(words, text, max_sentence_words) of a fuzz input."""
    if not data:
        return DEFAULT_VOCAB, b"", 3
    ctrl, rest = data[0], data[1:]
    max_words = (ctrl % 6) + 1 if ctrl < 240 else 10000
    head, sep, text = rest.partition(b"\x00\x00")
    if not sep:
        return DEFAULT_VOCAB, rest, max_words
    words = [w.decode("utf-8", "replace") for w in head.split(b"\x01")]
    return words, text, max_words


def one_input(data: bytes) -> None:
    words, text, max_words = split_input(data)
    encoded = [w.encode("utf-8") for w in words]
    vocab = torch.tensor(list(b"".join(encoded)), dtype=torch.uint8)
    ends = torch.tensor([len(w) for w in encoded], dtype=torch.int64).cumsum(0)
    t = torch.frombuffer(bytearray(text), dtype=torch.uint8) if text else torch.empty(
        0, dtype=torch.uint8)
    tokens, sentence_ends, raw, bad = ops.corpus_encode(t, vocab, ends, max_words)
    got = (tokens.tolist(), sentence_ends.tolist(), raw.tolist(), bad)
    want = tuple(corpus_encode_reference(text, words, max_words))
    if got != want:
        raise AssertionError(f"corpus_encode differs from the reference on {text!r} "
                             f"(vocabulary {words!r}, max {max_words}): {got} != {want}")
    assert tokens.dtype == torch.int32 and sentence_ends.dtype == raw.dtype == torch.int64
    blob, word_ends, found, sentences, words, bad = ops.corpus_count(t, max_words)
    spelled, stops = bytes(blob.tolist()), word_ends.tolist()
    keys = [spelled[a:b].decode("utf-8") for a, b in zip([0] + stops[:-1], stops)]
    got = (list(zip(keys, found.tolist())), sentences, words, bad)
    counts, *rest = corpus_count_reference(text, max_words)
    want = (list(counts.items()) if counts is not None else None, *rest)
    if bad != want[3] or (bad < 0 and got != want):
        raise AssertionError(f"corpus_count differs from the reference on {text!r} (max "
                             f"{max_words}): {got} != {want}")


def seeds():
    return [
        b"\x02w1 w2 \xc3\xa9\nw1\n\n  x y\n",
        b"\x00w1\x01w2\x01w1\x01\x01a b\x00\x00w1 a b w2 q w1\n\xe2\x80\xa8w2\xc2\xa0w1",
        b"\x04\xe6\x97\xa5\xe6\x9c\xac w1\x1cw2\x1fx\x0bx\x0cx\rw1\xe3\x80\x80\xf0\x9f\x98\x80\n",
        b"\x01w1 \xed\xa0\x80 w2\nw1\n",
        b"\xf0" + b"w1 w2 " * 20 + b"\n" + b"x " * 30,
        b"\x03a\xe2\x80\x8bb w1 \xc2\x85 w2 \xe1\x9a\x80 \xe2\x80\x8a w1\n\xf4\x8f\xbf\xbf\n",
    ]


if __name__ == "__main__":
    harness.main(one_input, seeds, instrument)
    sys.exit(0)
