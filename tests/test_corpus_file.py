"""word2vec's native corpus_file reader: the op corpus_encode against its plain reference, the
file's batches against the Python path's (LineSentence, data.encode) array for array, with
Unicode whitespace, long lines, empty lines, chunk edges and bytes that are not UTF-8; a
Word2Vec trained from the file equal to one trained from the same sentences; the file read
once per train() call."""

import random

import numpy as np
import pytest
import torch

import fastsoftmax as fs
from fastsoftmax.models.textfiles import MAX_SENTENCE_WORDS, CorpusDecodeError, LineSentence
from fastsoftmax.models.word2vec import Word2Vec, corpus_file, data
from reference import corpus_count_reference, corpus_encode_reference

# Every character Python's str.split() splits on, and a few that look alike but are not.
SPACES = [chr(c) for c in (9, 11, 12, 13, 0x1C, 0x1F, 32, 0x85, 0xA0, 0x1680, 0x2000, 0x200A,
                           0x2028, 0x2029, 0x202F, 0x205F, 0x3000)]
NOT_SPACES = ["\u200b", "\ufeff", "\x00", "\u180e", "é", "日本", "\U0001F600"]


def random_text(rng: random.Random, lines: int, vocab: list) -> str:
    out = []
    for _ in range(lines):
        n = rng.choice([0, 0, 1, 3, 8, 20])
        words = [rng.choice(vocab + NOT_SPACES + ["oov%d" % rng.randrange(5)]) for _ in range(n)]
        gaps = [rng.choice(SPACES + [" ", " ", "  "]) for _ in range(n + 1)]
        line = gaps[0] + "".join(w + g for w, g in zip(words, gaps[1:]))
        out.append(line.rstrip() if rng.random() < 0.5 else line)
    text = "\n".join(out)
    return text + "\n" if rng.random() < 0.5 else text


def encode(text: bytes, words: list, max_words: int):
    vocab, ends = corpus_file.vocabulary_bytes({w: i for i, w in enumerate(words)})
    t = torch.frombuffer(bytearray(text), dtype=torch.uint8) if text else torch.empty(
        0, dtype=torch.uint8)
    tokens, sentence_ends, raw, bad = fs.ops.corpus_encode(t, vocab, ends, max_words)
    return tokens.tolist(), sentence_ends.tolist(), raw.tolist(), bad


@pytest.mark.parametrize("seed", range(40))
def test_op_matches_reference(seed):
    rng = random.Random(seed)
    vocab = ["w%d" % i for i in range(12)] + ["é", "日本", "\U0001F600", "a\u200bb"]
    text = random_text(rng, rng.randrange(1, 30), vocab).encode()
    max_words = rng.choice([1, 2, 5, MAX_SENTENCE_WORDS])
    got = encode(text, vocab, max_words)
    assert got == corpus_encode_reference(text, vocab, max_words)


# Strict UTF-8 as Python decodes it: overlong forms, surrogates, past U+10FFFF, stray
# continuation bytes, truncated sequences, and the bytes no sequence starts with.
BAD = [b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf0\x80\x80\xaf",
       b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\x80", b"\xbf", b"\xe2\x82",
       b"\xe2\x82\n", b"\xf0\x9f\x98", b"\xc3"]


@pytest.mark.parametrize("bad", BAD)
def test_op_finds_the_first_bad_byte_as_python(bad):
    text = b"w1 w2\n\xc3\xa9 w1 " + bad + b" w2\nw1\n"
    got = encode(text, ["w1", "w2", "é"], 4)
    assert got == corpus_encode_reference(text, ["w1", "w2", "é"], 4)
    assert got[3] == text.index(bad, 12)


def count(text: bytes, max_words: int):
    t = torch.frombuffer(bytearray(text), dtype=torch.uint8) if text else torch.empty(
        0, dtype=torch.uint8)
    blob, ends, found, sentences, words, bad = fs.ops.corpus_count(t, max_words)
    raw, stops = bytes(blob.tolist()), ends.tolist()
    keys = [raw[a:b].decode() for a, b in zip([0] + stops[:-1], stops)]
    return dict(zip(keys, found.tolist())), sentences, words, bad


@pytest.mark.parametrize("seed", range(20))
def test_count_op_matches_reference(seed):
    rng = random.Random(seed)
    vocab = ["w%d" % i for i in range(12)] + ["é", "日本", "\U0001F600"]
    text = random_text(rng, rng.randrange(1, 30), vocab).encode()
    max_words = rng.choice([1, 2, 5, MAX_SENTENCE_WORDS])
    got, want = count(text, max_words), corpus_count_reference(text, max_words)
    assert got == want and list(got[0]) == list(want[0])  # first-seen order too


def test_op_random_bytes_agree_with_python_decoding():
    rng = random.Random(7)
    pool = [b"a", b" ", b"\n", b"\xc3", b"\xa9", b"\xe2", b"\x80", b"\x85", b"\xa0", b"\xf0",
            b"\x9f", b"\xed", b"\xf4", b"\x8f", b"\xc2", b"\xe3", b"\x81", b"\xbf"]
    for _ in range(500):
        text = b"".join(rng.choice(pool) for _ in range(rng.randrange(1, 40)))
        assert encode(text, ["a", "aa", "é"], 3) == corpus_encode_reference(
            text, ["a", "aa", "é"], 3), text
        got, want = count(text, 3), corpus_count_reference(text, 3)
        assert got[3] == want[3] and (want[3] >= 0 or got == want), text


def test_op_repeated_vocabulary_word_takes_the_first_id():
    vocab = torch.tensor(list(b"xyx"), dtype=torch.uint8)
    text = torch.tensor(list(b"x y x\n"), dtype=torch.uint8)
    tokens = fs.ops.corpus_encode(text, vocab, torch.tensor([1, 2, 3]), 10)[0]
    assert tokens.tolist() == [0, 1, 0]


def test_op_bad_arguments():
    vocab, ends = corpus_file.vocabulary_bytes({"a": 0})
    text = torch.frombuffer(bytearray(b"a a\n"), dtype=torch.uint8)
    with pytest.raises(TypeError, match="uint8"):
        fs.ops.corpus_encode(text.long(), vocab, ends, 5)
    with pytest.raises(TypeError, match="int64"):
        fs.ops.corpus_encode(text, vocab, ends.int(), 5)
    with pytest.raises(ValueError, match="1-D"):
        fs.ops.corpus_encode(text.view(2, 2), vocab, ends, 5)
    with pytest.raises(ValueError, match="positive"):
        fs.ops.corpus_encode(text, vocab, ends, 0)
    with pytest.raises(ValueError, match="non-decreasing"):
        fs.ops.corpus_encode(text, vocab, torch.tensor([5]), 5)
    with pytest.raises(TypeError, match="uint8"):
        fs.ops.corpus_count(text.long(), 5)
    with pytest.raises(ValueError, match="1-D"):
        fs.ops.corpus_count(text.view(2, 2), 5)
    with pytest.raises(ValueError, match="positive"):
        fs.ops.corpus_count(text, 0)


def assert_same_batches(native, python):
    assert len(native) == len(python)
    for a, b in zip(native, python):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
            if key != "raw":
                assert a[key].dtype == b[key].dtype, key


@pytest.mark.parametrize("seed", range(12))
def test_file_batches_equal_the_python_path(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    vocab = ["w%d" % i for i in range(10)] + ["é", "日本"]
    path = tmp_path / "corpus.txt"
    lines = random_text(rng, rng.randrange(1, 60), vocab)
    if seed % 3 == 0:  # a line past MAX_SENTENCE_WORDS
        lines += " ".join(rng.choice(vocab + ["oov"]) for _ in range(2 * MAX_SENTENCE_WORDS + 7))
    path.write_bytes(lines.encode())
    # small chunks: lines cut across reads, lines longer than a chunk, batches across chunks
    monkeypatch.setattr(corpus_file, "CHUNK_BYTES", rng.choice([1, 7, 64, 1 << 24]))
    key_to_index = {w: i for i, w in enumerate(vocab)}
    limit = rng.choice([1, 5, 40, 10**6])
    corpus = LineSentence(str(path))
    assert corpus_file.native(corpus)
    native = list(corpus_file.batches(corpus, key_to_index, limit))
    python = list(data.python_batches(key_to_index, corpus, limit))
    assert_same_batches(native, python)


@pytest.mark.parametrize("chunk", [5, 1 << 24])
def test_file_bad_byte_raises_as_the_python_path(tmp_path, monkeypatch, chunk):
    path = tmp_path / "bad.txt"
    path.write_bytes("w1 w2\né w1\n\nw2 w1 \xa0\n".encode() + b"w1 \xe2\x28\xa1 w2\nw1\n")
    monkeypatch.setattr(corpus_file, "CHUNK_BYTES", chunk)
    corpus = LineSentence(str(path))
    with pytest.raises(CorpusDecodeError) as python:
        list(data.python_batches({"w1": 0}, corpus, 3))
    with pytest.raises(CorpusDecodeError) as native:
        list(corpus_file.batches(corpus, {"w1": 0}, 3))
    assert str(native.value) == str(python.value)
    assert f"{path}:5: not utf8 text (byte 4 of the line" in str(native.value)


def test_only_strict_utf8_is_native(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("a b\n")
    assert corpus_file.native(LineSentence(str(path), encoding="UTF-8"))
    assert not corpus_file.native(LineSentence(str(path), encoding="latin-1"))
    assert not corpus_file.native(LineSentence(str(path), errors="replace"))
    assert not corpus_file.native([["a", "b"]])


def planted_file(tmp_path, seed=0):
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(400):
        g = rng.integers(4)
        lines.append(" ".join(f"m{g}_{rng.integers(3)}" if rng.random() < 0.4
                              else f"c{g}_{rng.integers(5)}" for _ in range(rng.integers(0, 12))))
    path = tmp_path / "planted.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("sg,hs,negative", [(1, 0, 5), (0, 1, 0), (0, 0, 3)])
def test_word2vec_from_file_equals_from_sentences(tmp_path, sg, hs, negative):
    path = planted_file(tmp_path)
    kw = dict(vector_size=16, min_count=2, window=3, sg=sg, hs=hs, negative=negative,
              workers=1, epochs=3, seed=3, batch_words=50)
    from_file = Word2Vec(corpus_file=str(path), **kw)
    # errors="replace" takes the Python path on the same (valid) text
    from_python = Word2Vec(sentences=LineSentence(str(path), errors="replace"), **kw)
    assert from_file.wv.index_to_key == from_python.wv.index_to_key
    np.testing.assert_array_equal(from_file.wv.vectors, from_python.wv.vectors)
    assert from_file.corpus_total_words == from_python.corpus_total_words


def test_file_is_read_once_per_train_call(tmp_path, monkeypatch):
    path = planted_file(tmp_path)
    reads = []
    chunks = corpus_file._chunks
    monkeypatch.setattr(corpus_file, "_chunks", lambda p: reads.append(p) or chunks(p))
    model = Word2Vec(corpus_file=str(path), vector_size=8, min_count=1, workers=1, epochs=4)
    assert reads == [str(path)] * 2  # the vocabulary scan, then four epochs of training
    model.train(corpus_file=str(path), total_examples=model.corpus_count, epochs=2)
    assert reads == [str(path)] * 3


def test_train_on_a_bad_file_names_file_and_line(tmp_path):
    good = planted_file(tmp_path)
    model = Word2Vec(corpus_file=str(good), vector_size=8, min_count=1, workers=1, epochs=1)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"m0_1 c0_1\n\xff m0_1\n")
    with pytest.raises(CorpusDecodeError, match=f"{bad}:2: not utf8"):
        model.train(corpus_file=str(bad), total_words=4, epochs=1)


@pytest.mark.parametrize("seed", range(8))
def test_vocabulary_scan_equals_count_words(tmp_path, monkeypatch, seed):
    from fastsoftmax.models.vocabulary import count_words

    rng = random.Random(seed)
    vocab = ["w%d" % i for i in range(10)] + ["é", "日本"]
    text = random_text(rng, rng.randrange(1, 80), vocab)
    if seed % 2:
        text += " ".join(rng.choice(vocab) for _ in range(MAX_SENTENCE_WORDS + 3)) + "\n"
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode())
    monkeypatch.setattr(corpus_file, "CHUNK_BYTES", rng.choice([3, 50, 1 << 24]))
    native = corpus_file.count(LineSentence(str(path)))
    python = count_words(LineSentence(str(path), errors="replace"))
    assert list(native[0].items()) == list(python[0].items())  # counts and first-seen order
    assert native[1:] == python[1:]


def test_vocabulary_scan_bad_byte_and_pruning(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a b\nc \xc0\xaf d\n")
    with pytest.raises(CorpusDecodeError, match=f"{bad}:2: not utf8 text \\(byte 3 of the line"):
        Word2Vec(min_count=1).build_vocab(corpus_file=str(bad))
    # max_vocab_size prunes during the scan, per sentence: the Python scan does it
    good = tmp_path / "good.txt"
    good.write_text("a b\n" * 3 + "c\nd\ne\n")  # at e: 5 types > 3, those seen once go
    small = Word2Vec(min_count=1, max_vocab_size=3)
    small.build_vocab(corpus_file=str(good))
    big = Word2Vec(min_count=1)
    big.build_vocab(corpus_file=str(good))
    assert big.wv.index_to_key[:2] == ["b", "a"] and len(big.wv) == 5
    assert small.wv.index_to_key == ["b", "a"]
