"""word2vec's sentences in memory encoded natively (corpus_file.TextEncoder: the batch written
as text and read by the op corpus_encode): the batches equal data.encode's array for array,
and a batch whose tokens would not survive the text round trip (whitespace in or around a
token, an empty token, a token that is not a str, a lone surrogate) is left to data.encode."""

import random

import numpy as np
import pytest

from fastsoftmax.models.word2vec import corpus_file, data

# Every character str.split() splits on, and some that look alike but are not.
SPACES = [chr(c) for c in (9, 10, 11, 12, 13, 0x1C, 0x1F, 32, 0x85, 0xA0, 0x1680, 0x2000,
                           0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000)]
NOT_SPACES = ["\u200b", "\ufeff", "\x00", "\u180e", "é", "日本", "\U0001F600"]
VOCAB = ["w%d" % i for i in range(10)] + NOT_SPACES
KEY_TO_INDEX = {w: i for i, w in enumerate(VOCAB)}


def clean_sentence(rng: random.Random) -> list:
    n = rng.choice([0, 1, 3, 8, 25])
    return [rng.choice(VOCAB + ["oov%d" % rng.randrange(4)]) for _ in range(n)]


def odd_token(rng: random.Random):
    """A token the text round trip would change."""
    space = rng.choice(SPACES)
    return rng.choice(["w1" + space + "w2", space + "w3", "w4" + space, space, "",
                       3, "w5\ud800"])


def assert_same_batches(a: list, b: list) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key in x:
            assert np.asarray(x[key]).dtype == np.asarray(y[key]).dtype, key
            assert np.array_equal(x[key], y[key]), key


@pytest.mark.parametrize("seed", range(12))
def test_batches_equal_the_python_encoding(seed):
    rng = random.Random(seed)
    corpus = [clean_sentence(rng) for _ in range(rng.randrange(1, 60))]
    for _ in range(rng.choice([0, 0, 1, 3])):  # odd tokens in some batches only
        sentence = rng.choice(corpus)
        sentence.insert(rng.randrange(len(sentence) + 1), odd_token(rng))
    limit = rng.choice([1, 7, 40, 10 ** 6])
    assert_same_batches(list(data.python_batches(KEY_TO_INDEX, corpus, limit, by_text=True)),
                        list(data.python_batches(KEY_TO_INDEX, corpus, limit)))


def test_clean_tokens_take_the_native_path_and_odd_ones_do_not():
    encoder = corpus_file.TextEncoder(KEY_TO_INDEX)
    clean = [["w1", "oov", "日本", "\u200b"], [], ["w2"]]
    got = encoder.encode(clean, 5, 2)
    assert got is not None
    assert_same_batches([got], [data.encode(KEY_TO_INDEX, clean, 5, 2)])
    odd = [space.join(["w1", "w2"]) for space in SPACES] + [
        " w1", "\tw1", "w1\x1f", "w1\u3000", "", 7, None, "w1\udc80"]
    for token in odd:
        assert encoder.encode([["w3", token, "w4"]], 0, 0) is None, repr(token)


def test_every_split_character_is_checked():
    split_on = [c for c in range(128, 0x110000) if chr(c).isspace()]
    assert all(corpus_file.OTHER_SPACE.search(chr(c).encode()) for c in split_on)
    assert all(chr(c).encode() in corpus_file.ASCII_SPACE for c in range(128)
               if chr(c).isspace())
