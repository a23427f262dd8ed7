"""word2vec's two readers when they hurry: the file read in chunks that grow from a small first
one and the Python reader's pauses, each leaving the batches exactly as they were; and with one
worker, the trained vectors do not depend on where the batches are cut."""

import random

import numpy as np
import pytest

from fastsoftmax.models.textfiles import CorpusDecodeError, LineSentence
from fastsoftmax.models.word2vec import Word2Vec, corpus_file, data, training
from test_corpus_file import assert_same_batches, random_text

VOCAB = ["w%d" % i for i in range(10)] + ["é", "日本"]


def text_file(tmp_path, seed: int, lines: int = 80):
    rng = random.Random(seed)
    path = tmp_path / "corpus.txt"
    path.write_bytes(random_text(rng, lines, VOCAB).encode())
    return path


def test_chunks_grow_from_the_first_size_and_cover_the_file(tmp_path, monkeypatch):
    path = tmp_path / "lines.txt"
    path.write_bytes(b"".join(b"w%d w1\n" % (i % 10) for i in range(200)))  # 6 bytes a line
    monkeypatch.setattr(corpus_file, "FIRST_CHUNK_BYTES", 8)
    monkeypatch.setattr(corpus_file, "CHUNK_BYTES", 300)
    chunks = list(corpus_file._chunks(str(path)))
    assert b"".join(c for _, c in chunks) == path.read_bytes()
    assert [o for o, _ in chunks] == list(np.cumsum([0] + [len(c) for _, c in chunks[:-1]]))
    # whole lines of the bytes read so far: 8, 8 + 16, 8 + 16 + 32, ... then 300 a read
    ends = np.cumsum([len(c) for _, c in chunks])
    read = np.minimum(np.cumsum([8, 16, 32, 64, 128, 256] + [300] * 10), 1200)
    np.testing.assert_array_equal(ends, read[:len(ends)] // 6 * 6)


@pytest.mark.parametrize("seed", range(6))
def test_growing_chunks_give_the_python_paths_batches(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    path = text_file(tmp_path, seed)
    monkeypatch.setattr(corpus_file, "FIRST_CHUNK_BYTES", rng.choice([1, 5, 16]))
    monkeypatch.setattr(corpus_file, "CHUNK_BYTES", rng.choice([40, 1 << 24]))
    key_to_index = {w: i for i, w in enumerate(VOCAB)}
    limit = rng.choice([1, 20, 60, 10**6])
    corpus = LineSentence(str(path))
    native = list(corpus_file.batches(corpus, key_to_index, limit))
    python = list(data.python_batches(key_to_index, corpus, limit))
    assert_same_batches(native, python)


def test_a_bad_byte_past_the_first_chunks_names_its_line(tmp_path, monkeypatch):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"w1 w2\n" * 40 + b"w1 \xe2\x28\xa1 w2\n" + b"w1\n")
    monkeypatch.setattr(corpus_file, "FIRST_CHUNK_BYTES", 4)  # the bad line is in chunk 6
    corpus = LineSentence(str(path))
    with pytest.raises(CorpusDecodeError) as native:
        list(corpus_file.batches(corpus, {"w1": 0}, 3))
    with pytest.raises(CorpusDecodeError) as python:
        list(data.python_batches({"w1": 0}, corpus, 3))
    assert str(native.value) == str(python.value)
    assert f"{path}:41: not utf8 text (byte 4 of the line" in str(native.value)
    with pytest.raises(CorpusDecodeError, match=f"{path}:41: not utf8 text"):
        corpus_file.count(corpus)


def test_pauses_come_every_pause_words_and_change_no_batch(monkeypatch):
    sentences = [["w1", "w2", "oov"]] * 40  # 120 words, batches of 51, 51 and 18
    paused = []
    monkeypatch.setattr(data, "PAUSE_WORDS", 10)
    batches = list(data.python_batches({"w1": 0, "w2": 1}, sentences, 50,
                                       pause=lambda: paused.append(1)))
    # after 12, 24, 36 and 48 words of a batch and at its end; after 12 of the last one
    assert len(paused) == 11
    assert_same_batches(batches, list(data.python_batches({"w1": 0, "w2": 1}, sentences, 50)))


def test_the_reader_sleeps_only_while_a_batch_waits(monkeypatch):
    slept = []
    monkeypatch.setattr(data.time, "sleep", slept.append)
    q = data.queue.Queue()
    pause = data.gil_pauses(q)
    pause()
    q.put({})
    pause()
    assert slept == [0]


@pytest.mark.parametrize("sg,update", [(0, "pairs"), (1, "pairs"), (0, "batched")])
def test_one_worker_trains_the_same_vectors_with_smaller_batches(monkeypatch, sg, update):
    # One worker: the op is a pure function of the tokens, the positions and the seed, so
    # where the batches end must not matter (its random draws follow the global token index).
    rng = np.random.default_rng(2)
    sentences = [[f"w{i}" for i in rng.integers(0, 40, rng.integers(1, 30))] for _ in range(400)]
    kw = dict(vector_size=12, min_count=1, window=3, sg=sg, workers=1, epochs=2, seed=5,
              batch_words=200, update=update)
    real, cuts = training.epoch_batches, {}

    def counted(key_to_index, corpus, limit, *rest, smaller=None):  # smaller moves the cuts
        for b in real(key_to_index, corpus, smaller or limit, *rest):
            cuts.setdefault(smaller, []).append(b["raw"])
            yield b

    monkeypatch.setattr(training, "epoch_batches", lambda *args, **_: counted(*args))
    plain = Word2Vec(sentences, **kw)
    monkeypatch.setattr(training, "epoch_batches", lambda *args, **_: counted(*args, smaller=37))
    small = Word2Vec(sentences, **kw)
    assert cuts[37][:3] != cuts[None][:3] and len(cuts[37]) > len(cuts[None])
    np.testing.assert_array_equal(small.wv.vectors, plain.wv.vectors)
    np.testing.assert_array_equal(small.syn1neg, plain.syn1neg)


@pytest.mark.parametrize("keys", [
    ["w1", "é", "日本", ""],  # str keys in id order: encoded by map
    ["w1", "bad\udc80", "é"],  # a lone surrogate: the loop, with surrogatepass
    ["w1", 7, "é"],  # a key that is not a str: an empty word
])
@pytest.mark.parametrize("in_order", [True, False])
def test_vocabulary_bytes_are_the_words_in_id_order(keys, in_order):
    ids = list(range(len(keys))) if in_order else list(range(len(keys)))[::-1]
    key_to_index = dict(zip(keys, ids))
    by_id = sorted(key_to_index, key=key_to_index.get)
    words = [k.encode("utf-8", "surrogatepass") if isinstance(k, str) else b"" for k in by_id]
    text, ends = corpus_file.vocabulary_bytes(key_to_index)
    assert bytes(text.numpy()) == b"".join(words)
    assert ends.tolist() == list(np.cumsum([len(w) for w in words]))


def test_lookup_words_is_dict_get_for_every_word():
    """The Python reader's native lookups: table[word] or -1, in order, as int64, with
    dict.get's errors and a clear one for a piece that is not a list."""
    from fastsoftmax.ops.word2vec import lookup_words

    rng = random.Random(3)
    table = {w: i * 7 for i, w in enumerate(VOCAB[:8])}
    table[("a", 1)] = 2**40  # any hashable word, any int64 value
    words = VOCAB + ["unknown", ("a", 1), 5]
    pieces = [[rng.choice(words) for _ in range(rng.randrange(0, 9))] for _ in range(50)]
    want = [table.get(w, -1) for p in pieces for w in p]
    got = lookup_words(table, pieces)
    assert got.dtype == np.int64 and got.tolist() == want and len(want) > 100
    assert lookup_words(table, []).size == 0
    with pytest.raises(TypeError, match="unhashable"):
        lookup_words(table, [["w1", ["a list"]]])
    with pytest.raises(TypeError, match="list of lists"):
        lookup_words(table, [("w1",)])
    with pytest.raises(TypeError):
        lookup_words({"w1": 1.5}, [["w1"]])  # a value that is not an int
