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
