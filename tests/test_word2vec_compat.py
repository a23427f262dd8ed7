"""Word2Vec's gensim 4 API that gensim's own test suite (make gensim-suite) found missing or
different: prepare_vocab, the exception types of misuse, and from_gensim."""

import numpy as np
import pytest

from fastsoftmax.models import Word2Vec

from w2v_helpers import GENSIM_MISSING, HAVE_GENSIM

requires_gensim = pytest.mark.skipif(not HAVE_GENSIM, reason=GENSIM_MISSING)


def _zipf_corpus(seed=0, sentences=300):
    rng = np.random.default_rng(seed)
    words = [f"t{i}" for i in range(40)]
    p = 1.0 / np.arange(1, 41)
    return [list(rng.choice(words, size=8, p=p / p.sum())) for _ in range(sentences)]


def test_prepare_vocab_reports_and_builds_from_raw_vocab():
    corpus = [["a", "b", "a"], ["a", "c", "b"], ["d"]]  # a:3 b:2 c:1 d:1
    m = Word2Vec(vector_size=4, min_count=2, sample=0)
    m.scan_vocab(corpus)
    dry = m.prepare_vocab(dry_run=True)
    assert dry == {"drop_unique": 2, "retain_total": 5, "downsample_unique": 0,
                   "downsample_total": 5, "num_retained_words": 2}
    assert len(m.wv) == 0 and m.raw_vocab  # a dry run changes nothing
    assert m.prepare_vocab(min_count=1)["num_retained_words"] == 4
    assert m.wv.index_to_key == ["a", "b", "d", "c"] and m.min_count == 1
    assert m.raw_vocab == {}  # dropped unless keep_raw_vocab, as gensim
    m.train(corpus, total_examples=m.corpus_count, epochs=1)  # weights are ready


@requires_gensim
@pytest.mark.parametrize("kw", [dict(min_count=2, sample=0), dict(min_count=1, sample=1e-2),
                                dict(min_count=1, max_final_vocab=10, sample=1e-3),
                                dict(min_count=3, sample=5.0)])
def test_prepare_vocab_report_matches_gensim(kw):
    from gensim.models import Word2Vec as GWord2Vec

    corpus = _zipf_corpus()
    ours, theirs = Word2Vec(vector_size=8, **kw), GWord2Vec(vector_size=8, **kw)
    for m in (ours, theirs):
        m.scan_vocab(corpus)
    assert ours.prepare_vocab() == theirs.prepare_vocab()
    assert ours.effective_min_count == theirs.effective_min_count
    assert sorted(ours.wv.index_to_key) == sorted(theirs.wv.index_to_key)


def test_misuse_raises_gensims_types_and_ours(tmp_path):
    from fastsoftmax.models.word2vec import errors

    for corpus, kw in (([], {}), ([["a", "b"]], dict(min_count=3))):
        with pytest.raises(errors.EmptyVocabularyError) as info:
            Word2Vec(corpus, vector_size=4, **kw)
        assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)
    corpus = [["a", "b", "c", "a"]] * 5
    trained = Word2Vec(corpus, vector_size=4, min_count=1, epochs=1)
    path = str(tmp_path / "v.bin")
    trained.wv.save_word2vec_format(path, binary=True)
    swapped = Word2Vec(vector_size=4)
    swapped.wv = type(trained.wv).load_word2vec_format(path, binary=True)
    with pytest.raises(ValueError, match="replaced by vectors alone"):  # gensim: ValueError
        swapped.train(corpus, total_examples=5, epochs=1)
    with pytest.raises(RuntimeError, match="syn1neg.*replaced"):  # gensim: RuntimeError
        swapped.predict_output_word(["a"])
    with pytest.raises(AttributeError):  # reading the missing weights, as before
        swapped.predict_output_word(["a"])
    with pytest.raises(RuntimeError, match="build_vocab"):
        Word2Vec(vector_size=4).train(corpus, total_examples=5, epochs=1)
    swapped.wv.save(str(tmp_path / "kv.npz"))
    with pytest.raises(AttributeError, match="holds a 'KeyedVectors'"):  # gensim's type
        Word2Vec.load(str(tmp_path / "kv.npz"))
    with pytest.raises(ValueError, match="holds a 'KeyedVectors'"):  # ours until now
        Word2Vec.load(str(tmp_path / "kv.npz"))


def _gensim_model(**kw):
    from gensim.models import Word2Vec as GWord2Vec

    settings = dict(vector_size=8, min_count=2, window=3, epochs=2, seed=5, workers=1)
    settings.update(kw)
    return GWord2Vec(_zipf_corpus(), **settings)


@requires_gensim
@pytest.mark.parametrize("kw", [dict(sg=1, negative=5, hs=0, sample=1e-2),
                                dict(sg=0, negative=0, hs=1, cbow_mean=0),
                                dict(sg=1, negative=3, hs=1, null_word=1)])
def test_from_gensim_copies_the_trained_state(kw, tmp_path):
    g = _gensim_model(**kw)
    m = Word2Vec.from_gensim(g)
    for attr in ("vector_size", "window", "sg", "hs", "negative", "cbow_mean", "sample",
                 "alpha", "min_alpha", "epochs", "seed", "null_word", "corpus_count",
                 "corpus_total_words", "effective_min_count"):
        assert getattr(m, attr) == getattr(g, attr), attr
    assert m.wv.index_to_key == g.wv.index_to_key
    assert np.array_equal(m.wv.vectors, g.wv.vectors)
    assert np.array_equal(m.wv.counts, g.wv.expandos["count"])
    want_keep = g.wv.expandos["sample_int"] / (2.0 ** 32 - 1)
    np.testing.assert_allclose(m.keep_probabilities(), want_keep, rtol=1e-6)
    if g.negative:
        assert np.array_equal(m.syn1neg, g.syn1neg)
    if g.hs:  # same tree, so every inner node's row is gensim's (the last row unused)
        assert np.array_equal(m.syn1, g.syn1)
        for w in g.wv.index_to_key:
            assert np.array_equal(m.wv.get_vecattr(w, "point"), g.wv.get_vecattr(w, "point"))
            assert np.array_equal(m.wv.get_vecattr(w, "code"), g.wv.get_vecattr(w, "code"))
        g.wv.expandos["point"][3] = g.wv.expandos["point"][3][::-1].copy()
        with pytest.raises(ValueError, match="Huffman tree differs"):  # syn1 would not fit
            Word2Vec.from_gensim(g)
    else:
        got, want = m.predict_output_word(["t3", "t4"]), g.predict_output_word(["t3", "t4"])
        assert [w for w, _ in got[:3]] == [w for w, _ in want[:3]]
    g.wv.vectors[0] += 1  # nothing shared
    assert not np.array_equal(m.wv.vectors[0], g.wv.vectors[0])
    m.train(_zipf_corpus(1), total_examples=300, epochs=1)  # ready to train on
    m.save(str(tmp_path / "m.npz"))
    assert Word2Vec.load(str(tmp_path / "m.npz")).wv.index_to_key == m.wv.index_to_key


@requires_gensim
def test_keyedvectors_from_gensim_and_pickles_pointing_at_it(tmp_path):
    from fastsoftmax.models import KeyedVectors

    g = _gensim_model()
    g.wv.set_vecattr("t1", "tag", 3)
    kv = KeyedVectors.from_gensim(g.wv)
    assert type(kv) is KeyedVectors and kv.index_to_key == g.wv.index_to_key
    assert np.array_equal(kv.vectors, g.wv.vectors) and kv.vectors is not g.wv.vectors
    assert kv.get_vecattr("t1", "tag") == 3
    assert np.array_equal(kv.counts, g.wv.expandos["count"])
    ours, theirs = kv.most_similar("t2", topn=5), g.wv.most_similar("t2", topn=5)
    assert [str(k) for k, _ in ours] == [str(k) for k, _ in theirs]  # numpy may give np.str_
    assert [s for _, s in ours] == pytest.approx([s for _, s in theirs])
    g.save(str(tmp_path / "g.model"))
    for load in (Word2Vec.load, KeyedVectors.load):
        with pytest.raises(ValueError, match="pickle.*from_gensim"):
            load(str(tmp_path / "g.model"))
