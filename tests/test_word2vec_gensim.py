"""word2vec against gensim 4.4.0: one worker replaying gensim's hs training, online
vocabulary update, every keyword of gensim's Word2Vec, build_vocab and train accepted or
refused by name, the vocabulary keywords, training loss, progress logs, predict_output_word
and estimate_memory."""

import numpy as np
import pytest

from fastsoftmax.models import Word2Vec

from w2v_helpers import GENSIM_MISSING, HAVE_GENSIM, planted_corpus

requires_gensim = pytest.mark.skipif(not HAVE_GENSIM, reason=GENSIM_MISSING)


# ---------------------------------------------------------------------------------------
# online vocabulary update, gensim's keywords, loss, prediction, memory, logging
# ---------------------------------------------------------------------------------------


def _with_new_words():
    """A second corpus: planted sentences plus two new words, n1 and n2, that only occur
    among group 0's context words (so they should land near each other and group 0)."""
    rng = np.random.default_rng(1)
    extra = [[f"c0_{i}" for i in rng.integers(0, 6, 3)] + [f"n{rng.integers(1, 3)}"]
             + [f"c0_{i}" for i in rng.integers(0, 6, 3)] for _ in range(200)]
    return planted_corpus(seed=5, sentences=200) + extra


def test_online_update_keeps_trained_vectors_and_grows_tables():
    first = planted_corpus(sentences=600)
    m = Word2Vec(first, vector_size=12, min_count=2, workers=1, epochs=3, seed=3, sample=0)
    keys, vectors, syn1 = list(m.wv.index_to_key), m.wv.vectors.copy(), m.syn1neg.copy()
    counts = m.wv.counts.copy()
    second = _with_new_words()
    m.build_vocab(second, update=True)
    V = len(keys)
    assert m.wv.index_to_key[:V] == keys and sorted(m.wv.index_to_key[V:]) == ["n1", "n2"]
    assert np.array_equal(m.wv.vectors[:V], vectors) and np.array_equal(m.syn1neg[:V], syn1)
    assert m.syn1neg.shape == (V + 2, 12) and not m.syn1neg[V:].any()
    assert np.abs(m.wv.vectors[V:]).max() <= 1.0 / 12 and m.wv.vectors[V:].any()
    assert m._ns_prob.numel() == V + 2 and m.keep_probabilities().shape == (V + 2,)
    added = {w: sum(s.count(w) for s in second) for w in keys}
    assert m.wv.counts[:V].tolist() == [counts[i] + added[w] for i, w in enumerate(keys)]
    before = m.wv.vectors.copy()
    m.train(second, total_examples=m.corpus_count, epochs=3)
    assert not np.array_equal(m.wv.vectors[V:], before[V:])  # the new words are trained
    nearest = [w for w, _ in m.wv.most_similar("n1", topn=30) if w[0] in "mn"][:3]
    assert nearest[0] == "n2" and all(w.startswith("m0_") for w in nearest[1:])
    with pytest.raises(RuntimeError, match="already has a vocabulary"):
        Word2Vec(vector_size=4).build_vocab(first, update=True)


@requires_gensim
def test_online_update_vocabulary_matches_gensim():
    from gensim.models import Word2Vec as GWord2Vec

    ours, theirs = Word2Vec(vector_size=8, min_count=2), GWord2Vec(vector_size=8, min_count=2)
    for m in (ours, theirs):
        m.build_vocab(planted_corpus(sentences=300))
        m.build_vocab(_with_new_words(), update=True)
    assert ours.wv.index_to_key == theirs.wv.index_to_key
    assert ours.wv.counts.tolist() == theirs.wv.expandos["count"].tolist()
    sample_int = theirs.wv.expandos["sample_int"].astype(np.float64) / (2**32 - 1)
    np.testing.assert_allclose(ours.keep_probabilities(), sample_int, rtol=1e-6)
    # the first len(vocab) initial vectors are gensim's too (same generator and seed)
    fresh = Word2Vec(vector_size=8, min_count=2)
    fresh.build_vocab(planted_corpus(sentences=300))
    g = GWord2Vec(vector_size=8, min_count=2)
    g.build_vocab(planted_corpus(sentences=300))
    np.testing.assert_array_equal(fresh.wv.vectors, g.wv.vectors)


@requires_gensim
@pytest.mark.parametrize("sg", [1, 0])
def test_one_worker_replays_gensims_hs_training(sg):
    # With hs=1 alone, no subsampling, fixed windows and a constant rate, training has no
    # randomness left: from the same initial vectors (same seed), one worker must follow
    # gensim's one thread step for step, up to gensim's coarser sigmoid table (which leaves
    # about 2% here). Any difference in the update shows: a rate 5% higher leaves 4-9%, a
    # window of 4 instead of 3 leaves 13-19%.
    from gensim.models import Word2Vec as GWord2Vec

    corpus = planted_corpus(seed=4, sentences=500)
    settings = dict(vector_size=16, window=3, min_count=1, sg=sg, hs=1, negative=0, sample=0,
                    shrink_windows=False, alpha=0.02, min_alpha=0.02, workers=1, seed=3)
    ours, theirs = Word2Vec(**settings), GWord2Vec(**settings)
    for m in (ours, theirs):
        m.build_vocab(corpus)
    assert ours.wv.index_to_key == theirs.wv.index_to_key
    start = theirs.wv.vectors.copy()
    np.testing.assert_array_equal(ours.wv.vectors, start)
    for m in (ours, theirs):
        m.train(corpus, total_examples=len(corpus), epochs=1)
    assert ours.syn1.shape == theirs.syn1.shape and not ours.syn1[-1].any()
    theirs_syn1 = theirs.syn1
    gap = np.linalg.norm(ours.wv.vectors - theirs.wv.vectors)
    assert gap < 0.035 * np.linalg.norm(theirs.wv.vectors - start)
    assert np.linalg.norm(ours.syn1 - theirs_syn1) < 0.035 * np.linalg.norm(theirs_syn1)


@requires_gensim
def test_every_gensim_keyword_is_accepted_or_refused_by_name():
    import inspect

    from gensim.models import Word2Vec as GWord2Vec

    for name in ("__init__", "build_vocab", "train", "build_vocab_from_freq"):
        theirs = inspect.signature(getattr(GWord2Vec, name)).parameters
        ours = inspect.signature(getattr(Word2Vec, name)).parameters
        missing = [p for p, v in theirs.items() if p not in ours and v.kind != v.VAR_KEYWORD]
        assert not missing, f"{name}: gensim keywords missing here: {missing}"
        assert not any(v.kind == v.VAR_KEYWORD for v in ours.values()), name
    corpus = [["a", "b", "a"]] * 3
    with pytest.raises(ValueError, match="hs must be 0 or 1"):
        Word2Vec(hs=2)
    with pytest.raises(TypeError, match="hashfxn"):
        Word2Vec(hashfxn=lambda s: 0)
    with pytest.raises(TypeError, match="bogus"):
        Word2Vec(bogus=1)
    m = Word2Vec(vector_size=4, min_count=1)
    with pytest.raises(TypeError, match="dry_run"):
        m.build_vocab(corpus, dry_run=True)
    with pytest.raises(TypeError, match="update_vocab"):
        m.build_vocab(corpus, update_vocab=True)
    m.build_vocab(corpus)
    with pytest.raises(TypeError, match="word_count"):
        m.train(corpus, epochs=1, word_count=5)
    with pytest.raises(TypeError, match="trim_rule"):
        Word2Vec(trim_rule=lambda w, c, mc: 0)


@requires_gensim
def test_vocabulary_keywords_match_gensim():
    from gensim.models import Word2Vec as GWord2Vec

    corpus = planted_corpus(sentences=200) + [["rare", "rare"], ["x"]]
    rule = lambda w, c, mc: 1 if w.startswith("c0") else (2 if w == "x" else 0)  # noqa: E731
    settings = [dict(min_count=3, trim_rule=rule), dict(max_final_vocab=10),
                dict(sorted_vocab=0, min_count=1), dict(null_word=1, min_count=2),
                dict(sample=50)]
    for kw in settings:
        trim = kw.pop("trim_rule", None)
        ours, theirs = Word2Vec(vector_size=4, **kw), GWord2Vec(vector_size=4, **kw)
        ours.build_vocab(corpus, trim_rule=trim)
        theirs.build_vocab(corpus, trim_rule=trim)
        assert ours.wv.index_to_key == theirs.wv.index_to_key, kw
        sample_int = theirs.wv.expandos["sample_int"].astype(np.float64) / (2**32 - 1)
        np.testing.assert_allclose(ours.keep_probabilities(), sample_int, rtol=1e-6)
        assert ours.estimate_memory() == theirs.estimate_memory()
    freq = {"a": 5, "b": 3, "c": 1}
    ours, theirs = Word2Vec(vector_size=4, min_count=2), GWord2Vec(vector_size=4, min_count=2)
    ours.build_vocab_from_freq(freq)
    theirs.build_vocab_from_freq(freq)
    assert ours.wv.index_to_key == theirs.wv.index_to_key


def test_compute_loss_and_progress_logs(caplog):
    import logging

    corpus = planted_corpus(sentences=300)
    m = Word2Vec(corpus, vector_size=8, min_count=1, workers=1, epochs=1)
    assert m.get_latest_training_loss() == 0.0
    losses = []
    for _ in range(3):
        with caplog.at_level(logging.INFO, logger="fastsoftmax.models.word2vec"):
            m.train(corpus, total_examples=m.corpus_count, epochs=1, compute_loss=True,
                    start_alpha=0.025, end_alpha=0.025)
        losses.append(m.get_latest_training_loss())
    assert losses[0] > losses[1] > losses[2] > 0  # it learns, and the loss is reset per call
    text = caplog.text
    assert "EPOCH 0: training on 2400 raw words (" in text and "effective words/s" in text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fastsoftmax.models.word2vec"):
        m.batch_words = 20  # several batches, each followed by a progress line
        m.train(corpus, total_examples=m.corpus_count, epochs=2, report_delay=0.0)
    progress = [r.getMessage() for r in caplog.records if "PROGRESS" in r.getMessage()]
    assert progress and all("words/s" in p and " ETA " in p for p in progress)
    assert progress[-1].startswith("EPOCH 1 - PROGRESS: at 100.00% examples")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fastsoftmax.models.word2vec"):
        Word2Vec(vector_size=4, min_count=1).build_vocab(corpus)
    assert "collected 60 word types from a corpus of 2400 raw words and 300 sentences" in (
        caplog.text)


@requires_gensim
def test_predict_output_word_matches_gensim():
    from gensim.models import Word2Vec as GWord2Vec

    corpus = planted_corpus(sentences=300)
    for cbow_mean in (1, 0):
        ours = Word2Vec(corpus, vector_size=8, min_count=1, workers=1, epochs=2,
                        cbow_mean=cbow_mean)
        theirs = GWord2Vec(vector_size=8, min_count=1, cbow_mean=cbow_mean)
        theirs.build_vocab(corpus)
        theirs.wv.vectors[:] = ours.wv.vectors
        theirs.syn1neg[:] = ours.syn1neg
        context = ["c0_1", "m0_2", "unknown"]
        a, b = ours.predict_output_word(context, topn=5), theirs.predict_output_word(context, 5)
        assert [w for w, _ in a] == [w for w, _ in b]
        np.testing.assert_allclose([p for _, p in a], [p for _, p in b], rtol=1e-4)
    assert ours.predict_output_word(["nope"]) is None


# ---------------------------------------------------------------------------------------
# train(): whose callbacks fire, and what it needs to be told
# ---------------------------------------------------------------------------------------

_EVENTS = ("on_train_begin", "on_epoch_begin", "on_epoch_end", "on_train_end")


def _recorder(name: str, log: list, base=object):
    """A callback (subclass of `base`) that appends (name, event) to `log` on every event."""
    methods = {event: (lambda self, model, event=event: log.append((name, event)))
               for event in _EVENTS}
    return type("Recorder", (base,), methods)()


def _callback_log(cls, base=object) -> list:
    """The events of a model built with callback A, trained again with [A, B], then with
    none: gensim 4 fires only the callbacks of the call that trains."""
    corpus = planted_corpus(sentences=40)
    log: list = []
    first, second = _recorder("A", log, base), _recorder("B", log, base)
    m = cls(corpus, vector_size=4, min_count=1, epochs=2, workers=1, callbacks=[first])
    log.append(("built", ""))
    m.train(corpus, total_examples=m.corpus_count, epochs=1, callbacks=[first, second])
    log.append(("trained", ""))
    m.train(corpus, total_examples=m.corpus_count, epochs=1)
    return log


def test_train_fires_only_the_callbacks_it_is_given():
    def run(names, epochs):
        ends = [(n, "on_train_begin") for n in names]
        for _ in range(epochs):
            ends += [(n, e) for e in ("on_epoch_begin", "on_epoch_end") for n in names]
        return ends + [(n, "on_train_end") for n in names]

    expected = run("A", 2) + [("built", "")] + run("AB", 1) + [("trained", "")]
    assert _callback_log(Word2Vec) == expected
    with pytest.raises(TypeError, match="callbacks"):  # they would never fire
        Word2Vec(vector_size=4, callbacks=[_recorder("A", [])])


@requires_gensim
def test_callbacks_fire_as_in_gensim():
    from gensim.models import Word2Vec as GWord2Vec
    from gensim.models.callbacks import CallbackAny2Vec

    assert _callback_log(Word2Vec) == _callback_log(GWord2Vec, CallbackAny2Vec)


def _train_errors(cls) -> list:
    """The exception types of train() calls that leave out what gensim requires."""
    corpus = [["a", "b", "a"]] * 3
    m = cls(vector_size=4, min_count=1, workers=1)
    m.build_vocab(corpus)
    calls = [dict(total_examples=3, epochs=1),            # no corpus
             dict(corpus_iterable=corpus, epochs=1),      # no corpus size
             dict(corpus_iterable=corpus, total_examples=3),            # no epochs
             dict(corpus_iterable=corpus, total_examples=3, epochs=0)]  # no pass at all
    errors = []
    for kw in calls:
        with pytest.raises((TypeError, ValueError)) as info:
            m.train(**kw)
        errors.append((type(info.value), str(info.value)))
    return errors


def test_train_refuses_a_missing_corpus_size_or_epochs():
    errors = _train_errors(Word2Vec)
    assert [t for t, _ in errors] == [TypeError, ValueError, ValueError, ValueError]
    for (_, text), word in zip(errors, ("corpus_iterable", "total_examples", "epochs",
                                        "epochs")):
        assert word in text


@requires_gensim
def test_train_refuses_what_gensim_refuses():
    from gensim.models import Word2Vec as GWord2Vec

    assert [t for t, _ in _train_errors(Word2Vec)] == [t for t, _ in _train_errors(GWord2Vec)]


def _rates_after_train(cls) -> list:
    """(alpha, min_alpha, epochs) of a model after train() calls with and without rates:
    gensim keeps each call's start_alpha, end_alpha and epochs on the model, and a rate
    of 0 or None leaves the model's own."""
    corpus = [["a", "b", "c"], ["b", "c", "d"]] * 3
    m = cls(vector_size=4, min_count=1, workers=1, alpha=0.03, min_alpha=0.001, epochs=4)
    m.build_vocab(corpus)
    seen = []
    for start, end, epochs in ((0.05, 0.002, 2), (None, None, 1), (0.0, 0.0, 3)):
        m.train(corpus, total_examples=m.corpus_count, epochs=epochs, start_alpha=start,
                end_alpha=end)
        seen.append((m.alpha, m.min_alpha, m.epochs))
    return seen


def test_train_keeps_its_rates_and_epochs_on_the_model():
    assert _rates_after_train(Word2Vec) == [(0.05, 0.002, 2), (0.05, 0.002, 1),
                                            (0.05, 0.002, 3)]


@requires_gensim
def test_train_rates_and_epochs_as_in_gensim():
    from gensim.models import Word2Vec as GWord2Vec

    assert _rates_after_train(Word2Vec) == _rates_after_train(GWord2Vec)


@requires_gensim
def test_both_corpus_kinds_refused_as_in_gensim(tmp_path):
    from gensim.models import Word2Vec as GWord2Vec

    path = tmp_path / "corpus.txt"
    path.write_text("a b\n")
    kinds = []
    for cls in (Word2Vec, GWord2Vec):
        with pytest.raises(Exception) as info:
            cls([["a", "b"]], corpus_file=str(path), min_count=1)
        kinds.append(type(info.value))
    assert kinds == [TypeError, TypeError]
