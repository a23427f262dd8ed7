"""KeyedVectors: every query method against gensim 4.4.0 on the same vectors, the word2vec.c
file formats (options, non-string keys, malformed files) and the evaluations by hand."""

import math

import numpy as np
import pytest

from fastsoftmax.models import KeyedVectors, Word2Vec

from w2v_helpers import GENSIM_MISSING, HAVE_GENSIM, planted_corpus, random_vectors

requires_gensim = pytest.mark.skipif(not HAVE_GENSIM, reason=GENSIM_MISSING)


def _pair(V=40, D=6, seed=0):
    """The same vectors loaded into ours and gensim's KeyedVectors."""
    from gensim.models import KeyedVectors as GKeyedVectors

    keys, vectors = random_vectors(V, D, seed)
    ours, theirs = KeyedVectors(D), GKeyedVectors(D)
    ours.add_vectors(keys, vectors)
    theirs.add_vectors(keys, vectors)
    return ours, theirs


def _same_ranking(a, b, rtol=1e-5):
    assert [k for k, _ in a] == [k for k, _ in b]
    np.testing.assert_allclose([s for _, s in a], [s for _, s in b], rtol=rtol, atol=1e-6)


@requires_gensim
def test_most_similar_family_matches_gensim():
    ours, theirs = _pair()
    vec = ours["w3"] * 2 - ours["w7"]
    cases = [
        dict(positive=["w0"]), dict(positive="w5", topn=3),
        dict(positive=["w0", "w2"], negative=["w4"], topn=7),
        dict(positive=[vec, "w2"], negative=["w9"]), dict(positive=[("w1", 0.5), "w8"]),
        dict(positive=["w0"], restrict_vocab=15), dict(positive=[3], topn=4),
        dict(positive=["w0"], clip_start=5, clip_end=30),
    ]
    for kw in cases:
        _same_ranking(ours.most_similar(**kw), theirs.most_similar(**kw))
    np.testing.assert_allclose(ours.most_similar("w0", topn=None),
                               theirs.most_similar("w0", topn=None), rtol=1e-5)
    for kw in (dict(positive=["w0", "w2"], negative=["w4"]), dict(positive=["w6", vec])):
        _same_ranking(ours.most_similar_cosmul(**kw), theirs.most_similar_cosmul(**kw))
    # gensim 4.4.0 documents restrict_vocab for most_similar_cosmul but ignores it; here it
    # means what it says: the unrestricted ranking, cut to the first 12 keys.
    full = ours.most_similar_cosmul(["w0", "w2"], ["w4"], topn=None)
    best = [k for k, _ in ours.most_similar_cosmul(["w0", "w2"], ["w4"], topn=40)]
    restricted = ours.most_similar_cosmul(["w0", "w2"], ["w4"], topn=3, restrict_vocab=12)
    assert [k for k, _ in restricted] == [k for k in best if ours.get_index(k) < 12][:3]
    assert restricted[0][1] == pytest.approx(float(full[ours.get_index(restricted[0][0])]))
    _same_ranking(ours.similar_by_word("w11", topn=5), theirs.similar_by_word("w11", topn=5))
    _same_ranking(ours.similar_by_vector(vec, topn=5, restrict_vocab=20),
                  theirs.similar_by_vector(vec, topn=5, restrict_vocab=20))
    with pytest.raises(KeyError, match="nope"):
        ours.most_similar(["w1", "nope"])


@requires_gensim
def test_pairwise_and_set_queries_match_gensim():
    ours, theirs = _pair()
    close = pytest.approx
    assert ours.distance("w0", "w5") == close(float(theirs.distance("w0", "w5")), abs=1e-6)
    np.testing.assert_allclose(ours.distances("w3"), theirs.distances("w3"), atol=1e-6)
    np.testing.assert_allclose(ours.distances(ours["w3"], ["w1", "w9"]),
                               theirs.distances(theirs["w3"], ["w1", "w9"]), atol=1e-6)
    assert ours.n_similarity(["w0", "w1"], ["w5", "w6", "w7"]) == close(
        float(theirs.n_similarity(["w0", "w1"], ["w5", "w6", "w7"])), abs=1e-6)
    with pytest.raises(ZeroDivisionError):
        ours.n_similarity([], ["w1"])
    words = ["w0", "w1", "w2", "w3", "unknown"]
    assert ours.doesnt_match(words) == theirs.doesnt_match(words)
    for a, b in (("w0", "w1"), ("w4", "w30"), ("w10", "w2")):
        assert ours.closer_than(a, b) == theirs.closer_than(a, b)
        assert ours.rank(a, b) == theirs.rank(a, b)
    for kw in (dict(keys=["w0", "w3"]), dict(keys=["w0", "w3", "zz"], weights=[1, -2, 3]),
               dict(keys=["w2", ours["w5"]], pre_normalize=False, post_normalize=True)):
        np.testing.assert_allclose(ours.get_mean_vector(**kw), theirs.get_mean_vector(**kw),
                                   rtol=1e-5, atol=1e-7)
    with pytest.raises(KeyError):
        ours.get_mean_vector(["w0", "zz"], ignore_missing=False)


@requires_gensim
def test_norms_attributes_and_add_vectors_match_gensim():
    ours, theirs = _pair()
    ours.fill_norms()
    theirs.fill_norms()
    np.testing.assert_allclose(ours.norms, theirs.norms, rtol=1e-6)
    np.testing.assert_allclose(ours.get_normed_vectors(), theirs.get_normed_vectors(),
                               rtol=1e-6)
    for kv in (ours, theirs):
        kv.set_vecattr("w3", "count", 17)
        kv.set_vecattr(4, "count", 2)
    assert ours.get_vecattr("w3", "count") == theirs.get_vecattr("w3", "count") == 17
    assert ours.get_vecattr("w4", "count") == 2
    new = np.arange(18, dtype=np.float32).reshape(3, 6)
    for kv in (ours, theirs):
        kv.add_vectors(["x", "w0", "y"], new)
        kv.add_vectors("z", np.ones(6))
    assert ours.index_to_key == list(theirs.index_to_key)
    np.testing.assert_array_equal(ours.vectors, theirs.vectors)
    # extras (gensim 4.4.0's add_vectors fails on them: it iterates the dict as pairs)
    ours.add_vectors(["y", "v"], new[:2], extras={"count": np.array([6, 7])})
    assert ours.get_vecattr("v", "count") == 7 and ours.get_vecattr("y", "count") == 0
    assert ours.get_vecattr("w0", "count") == 0  # present already, not replaced
    ours.add_vectors(["w0"], new[:1], replace=True)
    np.testing.assert_array_equal(ours["w0"], new[0])
    ours.fill_norms()
    assert ours.norms[ours.get_index("w0")] == pytest.approx(np.linalg.norm(new[0]))
    with pytest.raises(ValueError, match="weights must be"):
        ours.add_vectors(["q"], np.ones((1, 5)))


# ---------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_model():
    return Word2Vec(planted_corpus(sentences=300), vector_size=12, min_count=1, workers=1,
                    epochs=2, seed=3)


def test_load_options_limit_no_header_unicode_errors(tmp_path):
    keys, vectors = random_vectors(10, 4)
    kv = KeyedVectors(4)
    kv.add_vectors(keys, vectors)
    for binary in (False, True):
        path = tmp_path / f"v{binary}"
        kv.save_word2vec_format(str(path), binary=binary)
        head = KeyedVectors.load_word2vec_format(str(path), binary=binary, limit=3)
        assert head.index_to_key == keys[:3] and np.array_equal(head.vectors, vectors[:3])
    path = tmp_path / "noheader.txt"
    kv.save_word2vec_format(str(path), write_header=False)
    again = KeyedVectors.load_word2vec_format(str(path), no_header=True)
    assert again.index_to_key == keys and np.array_equal(again.vectors, vectors)
    assert KeyedVectors.load_word2vec_format(str(path), no_header=True, limit=4).vectors.shape \
        == (4, 4)
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"2 2\ncaf\xe9 1 2\nok 3 4\n")
    with pytest.raises(ValueError, match="line 2.*unicode_errors"):
        KeyedVectors.load_word2vec_format(str(bad))
    assert KeyedVectors.load_word2vec_format(str(bad), unicode_errors="replace").index_to_key \
        == ["caf\ufffd", "ok"]
    assert KeyedVectors.load_word2vec_format(str(bad), encoding="latin-1").index_to_key[0] \
        == "caf\xe9"


@requires_gensim
def test_load_options_and_non_string_keys_match_gensim(tmp_path):
    from gensim.models import KeyedVectors as GKeyedVectors

    kv = KeyedVectors(3)
    kv.add_vectors([7, 12, "w"], np.arange(9, dtype=np.float32).reshape(3, 3))
    path = tmp_path / "nonstr.txt"
    kv.save_word2vec_format(str(path))
    g = GKeyedVectors(3)
    g.add_vectors([7, 12, "w"], np.arange(9, dtype=np.float32).reshape(3, 3))
    g.save_word2vec_format(str(tmp_path / "g.txt"))
    ours = KeyedVectors.load_word2vec_format(str(path))
    theirs = GKeyedVectors.load_word2vec_format(str(tmp_path / "g.txt"))
    assert ours.index_to_key == list(theirs.index_to_key) == ["7", "12", "w"]
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"3 2\ncaf\xe9 1 2\nok 3 4\nz 5 6\n")
    for kw in (dict(unicode_errors="replace"), dict(unicode_errors="ignore", limit=2),
               dict(encoding="latin-1")):
        a = KeyedVectors.load_word2vec_format(str(bad), **kw)
        b = GKeyedVectors.load_word2vec_format(str(bad), **kw)
        assert a.index_to_key == list(b.index_to_key), kw
        np.testing.assert_array_equal(a.vectors, b.vectors)
@pytest.mark.parametrize("binary", [False, True])
def test_word2vec_format_round_trip(small_model, tmp_path, binary):
    path, again = tmp_path / "v", tmp_path / "v2"
    small_model.wv.save_word2vec_format(str(path), binary=binary)
    kv = KeyedVectors.load_word2vec_format(str(path), binary=binary)
    assert kv.index_to_key == small_model.wv.index_to_key
    assert np.array_equal(kv.vectors, small_model.wv.vectors)  # %.9g round-trips float32 too
    kv.save_word2vec_format(str(again), binary=binary)
    assert path.read_bytes() == again.read_bytes()


@requires_gensim
@pytest.mark.parametrize("binary", [False, True])
def test_word2vec_format_against_gensim(small_model, tmp_path, binary):
    from gensim.models import KeyedVectors as GKeyedVectors

    ours_path, theirs_path = tmp_path / "ours", tmp_path / "theirs"
    small_model.wv.save_word2vec_format(str(ours_path), binary=binary)
    g = GKeyedVectors.load_word2vec_format(str(ours_path), binary=binary)
    assert list(g.index_to_key) == small_model.wv.index_to_key
    np.testing.assert_array_equal(g.vectors, small_model.wv.vectors)
    g.save_word2vec_format(str(theirs_path), binary=binary)
    kv = KeyedVectors.load_word2vec_format(str(theirs_path), binary=binary)
    assert kv.index_to_key == small_model.wv.index_to_key
    np.testing.assert_allclose(kv.vectors, small_model.wv.vectors, rtol=1e-6)


def test_malformed_word2vec_files(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("2 3\nhello 1 2 3\nworld 1 2\n")
    with pytest.raises(ValueError, match="line 3"):
        KeyedVectors.load_word2vec_format(str(p))
    p.write_text("2 3\nhello 1 2 3\n")
    with pytest.raises(ValueError, match="line 3.*1 of the 2"):
        KeyedVectors.load_word2vec_format(str(p))
    p.write_text("two 3\n")
    with pytest.raises(ValueError, match="line 1"):
        KeyedVectors.load_word2vec_format(str(p))
    p.write_text("1 2\nhello 1 x\n")
    with pytest.raises(ValueError, match="line 2.*not a number"):
        KeyedVectors.load_word2vec_format(str(p))
    b = tmp_path / "bad.bin"
    b.write_bytes(b"2 2\nab " + np.ones(2, "<f4").tobytes() + b"\ncd " + b"\x00\x00")
    with pytest.raises(ValueError, match="entry 2 of 2.*truncated"):
        KeyedVectors.load_word2vec_format(str(b), binary=True)


# ---------------------------------------------------------------------------------------
# evaluation against hand-computed answers
# ---------------------------------------------------------------------------------------


def _toy_vectors():
    kv = KeyedVectors(2, 5)
    kv.index_to_key = ["king", "queen", "man", "woman", "Apple"]
    kv.key_to_index = {k: i for i, k in enumerate(kv.index_to_key)}
    # angles 10, 80, 0, 90 and 45 degrees on the unit circle (lengths vary: cosine ignores)
    ang = np.radians([10, 80, 0, 90, 45])
    kv.vectors = (np.stack([np.cos(ang), np.sin(ang)], 1) * [[1], [2], [3], [1], [5]]).astype(
        np.float32)
    return kv


def test_similarity_and_most_similar():
    kv = _toy_vectors()
    assert kv.similarity("king", "man") == pytest.approx(math.cos(math.radians(10)), abs=1e-6)
    best = kv.most_similar("king", topn=2)
    assert [w for w, _ in best] == ["man", "Apple"]
    # queen - woman + man: unit vectors at 80 - 90 + 0 degrees -> points near 'king' (10)
    assert kv.most_similar(positive=["queen", "man"], negative=["woman"], topn=1)[0][0] == "king"
    with pytest.raises(KeyError, match="banana"):
        kv.most_similar("banana")
    with pytest.raises(KeyError):
        kv["banana"]
    with pytest.raises(KeyError):
        kv.similarity("king", "banana")


def test_evaluate_word_pairs_by_hand(tmp_path):
    kv = _toy_vectors()
    f = tmp_path / "pairs.tsv"
    f.write_text("# comment\nking\tman\t9\nKING\tqueen\t3\nman\twoman\t1\nman\tbanana\t5\n"
                 "apple\tking\t6\n")
    (pearson, _), (spearman, _), oov = kv.evaluate_word_pairs(str(f))
    # model cosines: cos10, cos70, cos90 = 0, cos35 ; gold 9, 3, 1, 6; 1 OOV of 5
    model = np.cos(np.radians([10, 70, 90, 35]))
    gold = np.array([9, 3, 1, 6.0])
    assert oov == pytest.approx(20.0)
    assert spearman == pytest.approx(1.0)  # same order: 9 > 6 > 3 > 1 and cos10 > cos35 > ...
    r = np.corrcoef(gold, model)[0, 1]
    assert pearson == pytest.approx(r, abs=1e-6)
    # case-sensitive: 'KING' and 'apple' are now unknown
    assert kv.evaluate_word_pairs(str(f), case_insensitive=False)[2] == pytest.approx(60.0)
    # restrict_vocab=2 leaves king and queen only
    assert kv.evaluate_word_pairs(str(f), restrict_vocab=2)[2] == pytest.approx(80.0)


def test_evaluate_word_analogies_by_hand(tmp_path):
    kv = _toy_vectors()
    f = tmp_path / "q.txt"
    # 1: man:king = woman:? -> woman(90)+king(10)-man(0) = 100 deg -> queen (80) : correct
    # 2: king:man = queen:? -> 0 + 80 - 10 = 70 -> queen excluded; nearest left: woman (90)
    #    vs Apple (45): 70-45 = 25 < 20? no: |70-90| = 20 < 25 -> woman : correct
    # 3: man:woman = king:apple -> 90 + 10 - 0 = 100 -> queen : incorrect
    # 4: has an unknown word: skipped
    f.write_text(": family\nman king woman queen\nking man queen woman\n"
                 ": other\nman woman king apple\nman banana king queen\n")
    acc, sections = kv.evaluate_word_analogies(str(f))
    assert [s["section"] for s in sections] == ["family", "other", "Total accuracy"]
    assert len(sections[0]["correct"]) == 2 and len(sections[1]["incorrect"]) == 1
    assert acc == pytest.approx(2 / 3)
    f.write_text("man king woman queen\n")
    with pytest.raises(ValueError, match="line 1"):
        kv.evaluate_word_analogies(str(f))


@requires_gensim
def test_evaluations_match_gensim(tmp_path):
    from gensim.models import KeyedVectors as GKeyedVectors

    kv = _toy_vectors()
    g = GKeyedVectors(2)
    g.add_vectors(kv.index_to_key, kv.vectors)
    f = tmp_path / "q.txt"
    f.write_text(": family\nman king woman queen\nking man queen woman\n"
                 ": other\nman woman king apple\nman banana king queen\n")
    assert kv.evaluate_word_analogies(str(f))[0] == pytest.approx(
        g.evaluate_word_analogies(str(f))[0])
    p = tmp_path / "pairs.tsv"
    p.write_text("king\tman\t9\nKING\tqueen\t3\nman\twoman\t1\nman\tbanana\t5\napple\tking\t6\n")
    for dummy in (False, True):  # gensim's shape: ((r, p), (rho, p), oov %)
        ours = kv.evaluate_word_pairs(str(p), dummy4unknown=dummy)
        theirs = g.evaluate_word_pairs(str(p), dummy4unknown=dummy)
        for i in (0, 1):
            assert ours[i] == pytest.approx(tuple(theirs[i]), abs=1e-6)
        assert ours[2] == pytest.approx(theirs[2])


def test_correlation_p_values_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    from fastsoftmax.models.word2vec.evaluation import correlation_p_value

    rng = np.random.default_rng(0)
    for n in (3, 5, 20, 353):
        x = rng.standard_normal(n)
        for y in (x + rng.standard_normal(n), rng.standard_normal(n), x + 0.01 * x ** 3):
            r, p = stats.pearsonr(x, y)
            assert correlation_p_value(r, n) == pytest.approx(p, rel=1e-6, abs=1e-300)
            rho, p = stats.spearmanr(x, y)
            assert correlation_p_value(rho, n) == pytest.approx(p, rel=1e-6, abs=1e-300)

