"""gensim 4 API parity of Word2Vec that gensim's own test suite (make gensim-suite) found
missing or different: locked vectors, warnings, scoring, vocabulary scans, persistence
keywords and conversion from gensim models."""

import logging
import os

import numpy as np
import pytest

from fastsoftmax.models import Word2Vec

from w2v_helpers import planted_corpus

CORPUS = planted_corpus(sentences=200)


@pytest.mark.parametrize("sg,hs", [(1, 0), (0, 0), (0, 1)])
def test_locked_vectors_stay_and_damped_ones_move_less(sg, hs):
    # gensim's vectors_lockf: word w's input-vector updates are scaled by lockf[w % len]
    m = Word2Vec(vector_size=4, min_count=1, workers=1, sg=sg, hs=hs)
    m.build_vocab(CORPUS)
    assert np.array_equal(m.wv.vectors_lockf, np.ones(1, dtype=np.float32))
    lockf = np.ones(len(m.wv), dtype=np.float32)
    lockf[:5] = 0.0
    m.wv.vectors_lockf = lockf
    before = m.wv.vectors.copy()
    m.train(CORPUS, total_examples=m.corpus_count, epochs=2)
    np.testing.assert_array_equal(m.wv.vectors[:5], before[:5])  # locked
    assert (np.abs(m.wv.vectors[5:] - before[5:]).sum(axis=1) > 0).all()  # the rest trained
    m.wv.vectors_lockf = np.array([np.nan], dtype=np.float32)
    with pytest.raises(ValueError, match="vectors_lockf must be finite"):
        m.train(CORPUS, total_examples=m.corpus_count, epochs=1)


@pytest.mark.parametrize("huffman", ["gensim", "word2vec.c"])
def test_hs_code_and_point_attributes(huffman, tmp_path):
    m = Word2Vec(vector_size=4, min_count=1, hs=1, negative=0, huffman=huffman)
    m.build_vocab_from_freq({"a": 5, "b": 3, "c": 2, "d": 2, "e": 1})
    codes, points = m.hs_tree.paths()
    for k, w in enumerate(m.wv.index_to_key):
        n = int(m.hs_tree.lengths[k])
        code, point = m.wv.get_vecattr(w, "code"), m.wv.get_vecattr(w, "point")
        assert code.dtype == np.uint8 and point.dtype == np.int32  # gensim's types
        assert code.tolist() == codes[k, :n].tolist() and point.tolist() == points[k, :n].tolist()
    m.build_vocab_from_freq({"f": 9}, update=True)  # the tree is rebuilt, so are they
    assert len(m.wv.get_vecattr("f", "point")) == int(m.hs_tree.lengths[5])
    m.save(str(tmp_path / "m.npz"))
    back = Word2Vec.load(str(tmp_path / "m.npz"))
    assert back.wv.get_vecattr("f", "code").tolist() == m.wv.get_vecattr("f", "code").tolist()


def test_gensims_training_warnings(caplog, tmp_path):
    with caplog.at_level(logging.WARNING, logger="fastsoftmax.models.word2vec.model"):
        Word2Vec(CORPUS, vector_size=4, min_count=1, hs=1, negative=2, epochs=1)
        assert "Both hierarchical softmax and negative sampling are activated" in caplog.text
        caplog.clear()
        m = Word2Vec(CORPUS, vector_size=4, min_count=1, epochs=1, alpha=0.02, min_alpha=0.01)
        m.train(CORPUS, total_examples=m.corpus_count, epochs=1, start_alpha=0.01)
        assert "alpha" not in caplog.text  # starts where the last run ended
        m.save(str(tmp_path / "m.npz"))
        m = Word2Vec.load(str(tmp_path / "m.npz"))
        m.train(CORPUS, total_examples=m.corpus_count, epochs=1, start_alpha=0.03)
        assert "Effective 'alpha' higher than previous training cycles" in caplog.text


@pytest.mark.parametrize("sg,cbow_mean", [(1, 1), (0, 1), (0, 0)])
def test_score_matches_gensim(sg, cbow_mean):
    gensim_w2v = pytest.importorskip("gensim.models.word2vec")
    settings = dict(vector_size=6, window=3, min_count=1, sg=sg, cbow_mean=cbow_mean, hs=1,
                    negative=0, seed=4, workers=1, epochs=2)
    ours = Word2Vec(CORPUS, **settings)
    theirs = gensim_w2v.Word2Vec(**settings)
    theirs.build_vocab(CORPUS)
    assert theirs.wv.index_to_key == ours.wv.index_to_key  # the same vocabulary and tree
    theirs.wv.vectors[:] = ours.wv.vectors
    theirs.syn1[:] = ours.syn1
    sentences = CORPUS[:20] + [["m0_0", "unknown", "c0_1"], ["unknown"]]
    got = ours.score(sentences, total_sentences=len(sentences))
    assert got.dtype == np.float32 and got.shape == (22,) and got[-1] == 0
    # gensim reads log sigma from a 1000-entry table (truncating), ours is exact
    np.testing.assert_allclose(got, theirs.score(sentences, len(sentences)), rtol=0.03)
    assert len(ours.score(sentences, total_sentences=5)) == 5
    with pytest.raises(RuntimeError, match="hs=1"):
        Word2Vec(CORPUS, vector_size=4, min_count=1, epochs=1).score(CORPUS)


def test_scan_vocab_reset_from_and_negative_ns_exponent(tmp_path):
    m = Word2Vec(vector_size=4, min_count=1)
    words = sum(len(s) for s in CORPUS)
    assert m.scan_vocab(CORPUS) == (words, len(CORPUS)) and sum(m.raw_vocab.values()) == words
    other = Word2Vec(CORPUS[:20], vector_size=4, min_count=1, epochs=1)
    m = Word2Vec(CORPUS, vector_size=4, min_count=1, epochs=1)
    m.reset_from(other)
    assert m.wv.key_to_index == other.wv.key_to_index and m.corpus_count == 20
    assert np.array_equal(m.wv.counts, other.wv.counts) and not m.syn1neg.any()
    m.train(CORPUS[:20], total_examples=20, epochs=1)
    # ns_exponent < 0 (gensim allows it): the rarest word is the likeliest negative
    m = Word2Vec(CORPUS, vector_size=4, min_count=1, ns_exponent=-1, epochs=1, workers=1)
    prob, alias = m._ns_prob.double().numpy(), m._ns_alias.long().numpy()
    V = len(prob)  # the alias table's distribution: own share plus the aliased remainders
    dist = (prob + np.bincount(alias, weights=1 - prob, minlength=V)) / V
    want = 1.0 / m.wv.counts
    np.testing.assert_allclose(dist, want / want.sum(), rtol=1e-5)
    m.save(str(tmp_path / "m.npz"))
    assert Word2Vec.load(str(tmp_path / "m.npz")).ns_exponent == -1


def test_save_and_load_keywords_of_gensim(tmp_path):
    m = Word2Vec(CORPUS, vector_size=4, min_count=1, epochs=1)
    path = str(tmp_path / "m.npz")
    m.save(path, sep_limit=0, separately=["syn1neg"], pickle_protocol=4)  # no size rule
    assert sorted(os.listdir(tmp_path))[1].endswith(".syn1neg.npy")
    assert len(os.listdir(tmp_path)) == 2  # pickle_protocol: no effect
    assert np.array_equal(Word2Vec.load(path).wv.vectors, m.wv.vectors)
    assert np.array_equal(Word2Vec.load(path, mmap="r").syn1neg, m.syn1neg)
    with pytest.raises(TypeError, match="ignore"):
        m.save(path, ignore=["syn1neg"])
    with pytest.raises(ValueError, match="mmap"):
        Word2Vec.load(path, mmap="r+")  # would write into the saved file
    with pytest.raises(AttributeError, match="class"):
        m.load(path)  # would suggest loading into m
