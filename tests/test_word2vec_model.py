"""The Word2Vec model end to end: planted-structure corpora, reproducible training,
vocabulary (order, counts, pruning, online update, keep probabilities against gensim),
persistence (save / load round trips) and bad input. The native op and the statistics of
training are in tests/test_word2vec.py."""

import numpy as np
import pytest

from fastsoftmax.models import KeyedVectors, Word2Vec

from w2v_helpers import GENSIM_MISSING, HAVE_GENSIM, planted_corpus

requires_gensim = pytest.mark.skipif(not HAVE_GENSIM, reason=GENSIM_MISSING)


# ---------------------------------------------------------------------------------------
# planted structure
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("sg", [1, 0])
def test_planted_structure_neighbours(sg):
    corpus = planted_corpus()
    m = Word2Vec(corpus, vector_size=24, window=3, min_count=1, sg=sg, negative=5, epochs=5,
                 sample=0, workers=2, seed=2, alpha=0.025 if sg else 0.05, compute_loss=True)
    hits = 0
    for g in range(6):
        for k in range(4):
            best = [w for w, _ in m.wv.most_similar(f"m{g}_{k}", topn=20) if w.startswith("m")]
            hits += best[0].startswith(f"m{g}_")
    assert hits >= 22  # of 24
    assert m.get_latest_training_loss() > 0


def test_reproducible_training_one_worker():
    corpus = planted_corpus(sentences=300)
    a = Word2Vec(corpus, vector_size=8, min_count=1, workers=1, seed=7, epochs=2)
    b = Word2Vec(corpus, vector_size=8, min_count=1, workers=1, seed=7, epochs=2)
    c = Word2Vec(corpus, vector_size=8, min_count=1, workers=1, seed=8, epochs=2)
    assert np.array_equal(a.wv.vectors, b.wv.vectors)
    assert not np.array_equal(a.wv.vectors, c.wv.vectors)


def test_vocabulary_order_counts_and_pruning():
    sentences = [["b", "a", "c", "a", "b", "d", "a"], ["e"]]
    m = Word2Vec(vector_size=4, min_count=2)
    m.build_vocab(sentences)
    assert m.wv.index_to_key == ["a", "b"] and m.wv.counts.tolist() == [3, 2]
    assert m.corpus_total_words == 8 and m.corpus_count == 2
    m = Word2Vec(vector_size=4, min_count=1)
    m.build_vocab(sentences)
    # ties in count: the word seen later comes first (gensim's order)
    assert m.wv.index_to_key == ["a", "b", "e", "d", "c"]
    # sentences longer than 10,000 words are cut into pieces of 10,000
    m = Word2Vec(vector_size=4, min_count=1)
    m.build_vocab([["x"] * 25000, ["y"]])
    assert m.corpus_count == 4 and m.corpus_total_words == 25001
    m = Word2Vec(vector_size=4, min_count=1, max_vocab_size=2)
    # gensim's pruning: when the dictionary passes 2 words, drop counts < 1, then < 2, ...
    # after ["c"]: 3 words, nothing below 1; after the third sentence: drop b, c (count 1).
    m.build_vocab([["a", "a", "b"], ["c"], ["a", "d", "d"]])
    assert m.wv.index_to_key == ["a", "d"] and m.wv.counts.tolist() == [3, 2]


def test_word2vec_and_the_other_models_count_words_alike(tmp_path):
    from fastsoftmax.models.textfiles import CorpusDecodeError, LineSentence, read_lines
    from fastsoftmax.models.vocabulary import Vocabulary, rank_by_count

    corpus = planted_corpus(sentences=200) + [["late", "early"], ["early", "late"]]
    m = Word2Vec(vector_size=4, min_count=1)
    m.build_vocab(corpus)
    v = Vocabulary.build(corpus, required=("<unk>",))
    counts = dict(zip(m.wv.index_to_key, m.wv.counts.tolist()))
    assert {w: int(c) for w, c in zip(v.itos, v.counts.tolist()) if w != "<unk>"} == counts
    # one ranking, three tie rules: first seen, later seen first (gensim), alphabetical
    ties = {"b": 2, "c": 2, "a": 2, "z": 5}
    assert rank_by_count(ties, "first") == ["z", "b", "c", "a"]
    assert rank_by_count(ties, "last") == ["z", "a", "c", "b"]
    assert rank_by_count(ties, "alphabetical") == ["z", "a", "b", "c"]
    with pytest.raises(ValueError, match="ties"):
        rank_by_count(ties, "random")
    # one text reader: both views of a file report a bad byte with the file and the line
    path = tmp_path / "latin1.txt"
    path.write_bytes("a b\ncaf\xe9 c\n".encode("latin-1"))
    for read in (lambda: list(read_lines(str(path))), lambda: list(LineSentence(str(path)))):
        with pytest.raises(CorpusDecodeError, match=f"{path}:2: not utf"):
            read()
    assert list(LineSentence(str(path), encoding="latin-1")) == [
        line.split() for line in read_lines(str(path), encoding="latin-1")]


@requires_gensim
def test_vocabulary_and_keep_probabilities_match_gensim():
    from gensim.models import Word2Vec as GWord2Vec

    corpus = planted_corpus(sentences=400) + [["rare"], ["m0_0", "x", "x"]]
    ours = Word2Vec(vector_size=8, min_count=2, sample=1e-2)
    ours.build_vocab(corpus)
    theirs = GWord2Vec(vector_size=8, min_count=2, sample=1e-2)
    theirs.build_vocab(corpus)
    assert ours.wv.index_to_key == theirs.wv.index_to_key
    sample_int = theirs.wv.expandos["sample_int"].astype(np.float64) / (2**32 - 1)
    np.testing.assert_allclose(ours.keep_probabilities(), sample_int, rtol=1e-6)


# ---------------------------------------------------------------------------------------
# persistence
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_model():
    return Word2Vec(planted_corpus(sentences=300), vector_size=12, min_count=1, workers=1,
                    epochs=2, seed=3)


def test_model_save_load_round_trip(small_model, tmp_path):
    path = tmp_path / "model.w2v"
    small_model.save(str(path))
    loaded = Word2Vec.load(str(path))
    assert loaded.wv.index_to_key == small_model.wv.index_to_key
    assert np.array_equal(loaded.wv.vectors, small_model.wv.vectors)
    assert np.array_equal(loaded.syn1neg, small_model.syn1neg)
    assert np.array_equal(loaded.wv.counts, small_model.wv.counts)
    assert loaded.window == small_model.window and loaded.sg == small_model.sg
    loaded.train(planted_corpus(sentences=50), total_examples=50, epochs=1)  # training continues
    assert not np.array_equal(loaded.wv.vectors, small_model.wv.vectors)
    kv_path = tmp_path / "kv.npz"
    small_model.wv.save(str(kv_path))
    assert np.array_equal(KeyedVectors.load(str(kv_path)).vectors, small_model.wv.vectors)
    # np.load with allow_pickle=False: an object array cannot sneak in.
    np.savez(str(tmp_path / "evil.npz"), meta=np.array([object()], dtype=object))
    with pytest.raises(ValueError):
        Word2Vec.load(str(tmp_path / "evil.npz"))


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        Word2Vec([[], []], vector_size=4)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match="empty"):
        Word2Vec(corpus_file=str(empty), vector_size=4)
    with pytest.raises(ValueError, match="min_count=5"):
        Word2Vec([["a", "b", "a"]], vector_size=4, min_count=5)
    with pytest.raises(TypeError, match="re-iterable"):
        Word2Vec((s for s in [["a", "b"]]), vector_size=4, min_count=1)
    with pytest.raises(TypeError, match="str"):
        Word2Vec(["a b c"], vector_size=4, min_count=1)
    m = Word2Vec([["a", "b", "a", "c"]] * 5, vector_size=4, min_count=1, epochs=1)
    with pytest.raises(KeyError, match="zebra"):
        m.wv["zebra"]
    with pytest.raises(KeyError):
        m.wv.most_similar(positive=["a"], negative=["zebra"])
    assert "zebra" not in m.wv and "a" in m.wv
    with pytest.raises(RuntimeError, match="build_vocab"):
        Word2Vec(vector_size=4).train([["a"]])


def test_corpus_file_matches_sentences(tmp_path):
    corpus = planted_corpus(sentences=100)
    path = tmp_path / "c.txt"
    path.write_text("\n".join(" ".join(s) for s in corpus) + "\n")
    a = Word2Vec(corpus, vector_size=8, min_count=1, workers=1, epochs=1)
    b = Word2Vec(corpus_file=str(path), vector_size=8, min_count=1, workers=1, epochs=1)
    assert a.wv.index_to_key == b.wv.index_to_key
    assert np.array_equal(a.wv.vectors, b.wv.vectors)


# ---------------------------------------------------------------------------------------
# learning-rate schedule
# ---------------------------------------------------------------------------------------
def rates_trained(monkeypatch, **kw):
    """(model, [(epoch, sentence within the epoch, rate the op was given)])."""
    from fastsoftmax.models.word2vec import training

    seen, original = [], training.train_batch

    def spy(model, b, positions, alpha, min_alpha, total, *rest):
        seen.append((b["sentences_before"].copy(), positions.copy(), alpha, min_alpha, total))
        return original(model, b, positions, alpha, min_alpha, total, *rest)

    monkeypatch.setattr(training, "train_batch", spy)
    model = Word2Vec(planted_corpus(sentences=200), vector_size=8, min_count=1, epochs=3,
                     batch_words=40, seed=1, **kw)
    rates = []
    for within, positions, a, b, total in seen:
        for n, p in zip(within.tolist(), positions.tolist()):
            rates.append((n, max(b, a - (a - b) * p / total)))
    return model, rates


@pytest.mark.parametrize("workers", [1, 2])
def test_gensim_corpus_file_schedule_is_gensims_per_worker_decay(monkeypatch, workers):
    # gensim's word2vec_corpusfile.pyx: progress = (epoch + own sentences / all of the
    # epoch's) / epochs, a worker reading 1/workers of the epoch
    model, rates = rates_trained(monkeypatch, workers=workers,
                                 alpha_schedule="gensim-corpus_file")
    P, E, a, b = model.corpus_count, 3, model.alpha, model.min_alpha
    assert len(rates) == E * P
    for i, (n, rate) in enumerate(rates):
        e = i // P
        assert rate == pytest.approx(a - (a - b) * (e + n / (workers * P)) / E, rel=1e-12)
    linear = rates_trained(monkeypatch, workers=workers)[1]
    assert linear[-1][1] == pytest.approx(b + (a - b) / (E * P))  # word2vec.c: down to min
    if workers > 1:
        assert rates[-1][1] > linear[-1][1] + (a - b) * 0.1  # never decays past (E-1+1/W)/E


def test_schedule_with_one_worker_is_the_linear_one_and_is_saved(tmp_path):
    corpus = planted_corpus(sentences=200)
    kw = dict(vector_size=8, min_count=1, epochs=2, workers=1, seed=3)
    gensim_cf = Word2Vec(corpus, alpha_schedule="gensim-corpus_file", **kw)
    np.testing.assert_array_equal(gensim_cf.wv.vectors, Word2Vec(corpus, **kw).wv.vectors)
    gensim_cf.save(str(tmp_path / "m.npz"))
    assert Word2Vec.load(str(tmp_path / "m.npz")).alpha_schedule == "gensim-corpus_file"
    with pytest.raises(ValueError, match="alpha_schedule must be 'linear' or"):
        Word2Vec(alpha_schedule="per-worker")


# ---------------------------------------------------------------------------------------
# The update order and the walkers per device (the mapping is pure: it runs without a GPU)
# ---------------------------------------------------------------------------------------
def _settings(device, workers, round_size=None):
    import types

    import torch

    return types.SimpleNamespace(device=torch.device(device), workers=workers,
                                 round_size=round_size)


def test_update_order_and_walkers_per_device():
    from fastsoftmax.models.word2vec.training import (MAX_ROUND_SIZE, ROUNDS_PER_RUN,
                                                      round_size_for, walkers)

    # CPU: word2vec.c's sequential order on `workers` threads, or the rounds replayed on one.
    assert round_size_for(_settings("cpu", 3), 1e9) == 0 and walkers(_settings("cpu", 3), 0) == 3
    assert walkers(_settings("cpu", 3), 64) == 1
    # CUDA: rounds over every warp the GPU holds; round_size=0 is one warp, sequential.
    assert walkers(_settings("cuda", 3), 64) >= 2**20 and walkers(_settings("cuda", 3), 0) == 1
    # "auto" (CUDA's default): ROUNDS_PER_RUN rounds a run, within [1, MAX_ROUND_SIZE].
    for device in ("cpu", "cuda"):
        auto = _settings(device, 3, round_size="auto")
        assert round_size_for(auto, 1e9) == MAX_ROUND_SIZE
        assert round_size_for(auto, 100 * ROUNDS_PER_RUN) == 100
        assert round_size_for(auto, 10) == 1
    assert round_size_for(_settings("cuda", 3), 1e9) == MAX_ROUND_SIZE
    assert round_size_for(_settings("cuda", 3, round_size=7), 1e9) == 7


@pytest.mark.parametrize("bad", [-1, 2.5, True, "64", "Auto"])
def test_round_size_must_be_none_auto_or_an_int(bad):
    with pytest.raises(ValueError, match="round_size must be None, 'auto' or an int >= 0"):
        Word2Vec(round_size=bad)


def test_gpu_warps_is_refused_with_its_replacement():
    with pytest.raises(TypeError, match="gpu_warps was removed: CUDA now trains in lockstep "
                                        "rounds"):
        Word2Vec(gpu_warps=256)


def test_round_size_survives_save_and_load(tmp_path):
    m = Word2Vec(planted_corpus(), vector_size=8, min_count=1, epochs=1, workers=1,
                 round_size=512)
    m.save(str(tmp_path / "m.npz"))
    assert Word2Vec.load(str(tmp_path / "m.npz")).round_size == 512

