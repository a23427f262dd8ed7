"""gensim 4 API parity of KeyedVectors that gensim's own test suite (make gensim-suite)
found missing or different: evaluation options, item assignment, vectors_for_all,
most_similar_to_given, relative_cosine_similarity and gensim's word2vec-format arguments."""

import numpy as np
import pytest

from fastsoftmax.models import KeyedVectors

from w2v_helpers import GENSIM_MISSING, HAVE_GENSIM, random_vectors

requires_gensim = pytest.mark.skipif(not HAVE_GENSIM, reason=GENSIM_MISSING)


def _kv(V=40, D=6, seed=0):
    keys, vectors = random_vectors(V, D, seed)
    kv = KeyedVectors(D)
    kv.add_vectors(keys, vectors)
    return kv


def test_analogies_by_3cosmul_and_dummy4unknown(tmp_path):
    kv = _kv()
    rng = np.random.default_rng(1)
    questions = [[f"w{i}" for i in rng.choice(len(kv), 4, replace=False)] for _ in range(30)]
    f = tmp_path / "q.txt"
    f.write_text(": s\n" + "".join(" ".join(q) + "\n" for q in questions) + "w1 w2 w3 nope\n")
    for name, query in (("most_similar", kv.most_similar),
                        ("most_similar_cosmul", kv.most_similar_cosmul)):
        _, sections = kv.evaluate_word_analogies(str(f), case_insensitive=False,
                                                 similarity_function=name)
        correct = {tuple(q) for q in sections[0]["correct"]}
        for a, b, c, d in questions:
            best = query(positive=[b, c], negative=[a], topn=1)[0][0]
            assert ((a, b, c, d) in correct) == (best == d), (name, a, b, c, d)
        assert len(sections[0]["correct"]) + len(sections[0]["incorrect"]) == 30
    acc, sections = kv.evaluate_word_analogies(str(f), dummy4unknown=True)
    assert len(sections[-1]["correct"]) + len(sections[-1]["incorrect"]) == 31
    assert ("W1", "W2", "W3", "NOPE") in sections[-1]["incorrect"]
    with pytest.raises(ValueError, match="similarity_function"):
        kv.evaluate_word_analogies(str(f), similarity_function="cosine")


def test_word2vec_format_arguments_in_gensims_order(tmp_path):
    kv = _kv(V=6, D=3)
    kv.counts = [5, 9, 9, 1, 7, 3]  # not sorted: files list keys by decreasing count
    vec, voc = str(tmp_path / "v.bin"), str(tmp_path / "v.vocab")
    kv.save_word2vec_format(vec, voc, True)  # gensim's positions: fname, fvocab, binary
    back = KeyedVectors.load_word2vec_format(vec, voc, True)
    assert back.index_to_key == ["w1", "w2", "w4", "w0", "w5", "w3"]
    assert [back.get_vecattr(k, "count") for k in back.index_to_key] == [9, 9, 7, 5, 3, 1]
    assert np.array_equal(back["w4"], kv["w4"])
    # total_vec, prefix and append: two vector sets in one file under one header
    kv.save_word2vec_format(vec, total_vec=12, prefix="a_")
    kv.save_word2vec_format(vec, write_header=False, prefix="b_", append=True)
    both = KeyedVectors.load_word2vec_format(vec)
    assert len(both) == 12 and np.array_equal(both["b_w3"], kv["w3"])
    # without a vocabulary file, gensim's placeholder counts V - index
    assert list(both.counts[:3]) == [12, 11, 10]
    with pytest.raises(ValueError, match="no 'rank' attribute"):
        kv.save_word2vec_format(vec, voc, sort_attr="rank")


def test_word2vec_format_errors_have_gensims_types(tmp_path):
    kv = _kv(V=4, D=3)
    for binary in (False, True):
        f = tmp_path / "v"
        kv.save_word2vec_format(str(f), binary=binary)
        f.write_bytes(b"5" + f.read_bytes()[1:])  # the header announces a fifth vector
        with pytest.raises(EOFError, match="5"):
            KeyedVectors.load_word2vec_format(str(f), binary=binary)
    f.write_bytes(b"1 2\n\xe3\x81 1 2\n")
    with pytest.raises(UnicodeDecodeError, match="line 2.*unicode_errors"):
        KeyedVectors.load_word2vec_format(str(f))
    voc = tmp_path / "vocab"
    voc.write_bytes(b"\xe3\x81 3\n")
    f.write_bytes(b"1 2\nx 1 2\n")
    with pytest.raises(UnicodeDecodeError, match="vocab, line 1"):
        KeyedVectors.load_word2vec_format(str(f), str(voc))


def test_item_assignment_most_similar_to_given_and_relative_cosine():
    kv = _kv()
    kv["new"] = np.ones(6)
    kv[["w0", "new2"]] = np.full((2, 6), 2.0)
    assert len(kv) == 42 and np.array_equal(kv["w0"], np.full(6, 2.0, dtype=np.float32))
    assert np.array_equal(kv["new"], np.ones(6, dtype=np.float32))
    others = ["w5", "w9", "w12"]
    best = max(others, key=lambda k: kv.similarity("w3", k))
    assert kv.most_similar_to_given("w3", others) == best
    top = kv.most_similar("w3", topn=4)
    want = kv.similarity("w3", "w7") / sum(s for _, s in top)
    assert kv.relative_cosine_similarity("w3", "w7", 4) == pytest.approx(want)


@pytest.mark.parametrize("topn", [0, -3, np.uint8(0), np.int64(0), False])
def test_integer_topn_below_one_returns_no_keys(topn):
    kv = _kv()
    assert kv.most_similar("w3", topn=topn) == []
    assert kv.most_similar_cosmul("w3", topn=topn) == []
    assert len(kv.most_similar("w3", topn=None)) == len(kv)
    assert len(kv.most_similar("w3", topn=np.uint8(4))) == 4
    assert len(kv.most_similar("w3", topn=np.uint8(255))) == len(kv) - 1


def test_unit_normalize_all_scales_in_place():
    kv = _kv()
    before = kv.vectors.copy()
    storage = kv.vectors
    kv.fill_norms()
    kv.vectors[0] *= 3.0  # norms are stale now: unit_normalize_all must not trust them
    kv.unit_normalize_all()
    assert kv.vectors is storage  # in place, as gensim
    np.testing.assert_allclose(np.linalg.norm(kv.vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(kv.vectors[1], before[1] / np.linalg.norm(before[1]), rtol=1e-6)
    np.testing.assert_allclose(kv.vectors[0], before[0] / np.linalg.norm(before[0]), rtol=1e-6)
    assert np.array_equal(kv.norms, np.ones(len(kv)))
    np.testing.assert_allclose(kv.get_vector("w5", norm=True), kv["w5"])


def test_vectors_for_all_dedups_drops_unknown_and_copies_attributes_on_request():
    kv = _kv(V=10, D=3)
    kv.counts = np.arange(100, 110)
    kv.set_vecattr("w2", "tag", 7)
    keys = ["w5", "nope", "w2", "w5", 3, "w9"]
    out = kv.vectors_for_all(keys)
    assert type(out) is KeyedVectors
    assert out.index_to_key == ["w5", "w2", 3, "w9"]  # an int is also a row index (gensim)
    assert np.array_equal(out.vectors, kv.vectors[[5, 2, 3, 9]])
    assert out.vectors is not kv.vectors and out.vectors.base is not kv.vectors
    assert list(out.counts) == [4, 3, 2, 1]  # gensim's placeholder counts
    assert "tag" not in out.expandos
    strict = kv.vectors_for_all(keys, allow_inference=False)
    assert strict.index_to_key == ["w5", "w2", "w9"]
    copied = kv.vectors_for_all(keys, allow_inference=False, copy_vecattrs=True)
    assert list(copied.counts) == [105, 102, 109]
    assert [copied.get_vecattr(k, "tag") for k in ("w5", "w2", "w9")] == [0, 7, 0]
    assert len(kv.vectors_for_all(["nope"])) == 0


@requires_gensim
@pytest.mark.parametrize("copy_vecattrs", [False, True])
def test_vectors_for_all_matches_gensim(copy_vecattrs):
    from gensim.models import KeyedVectors as GKeyedVectors

    keys, vectors = random_vectors(12, 4, 3)
    ours, theirs = KeyedVectors(4), GKeyedVectors(4)
    for kv in (ours, theirs):
        kv.add_vectors(keys, vectors)
        for i, k in enumerate(keys):
            kv.set_vecattr(k, "count", 50 - i)
    ask = ["w7", "w1", "zz", "w7", 4, "w11"]
    a = ours.vectors_for_all(ask, copy_vecattrs=copy_vecattrs)
    b = theirs.vectors_for_all(ask, copy_vecattrs=copy_vecattrs)
    assert a.index_to_key == b.index_to_key
    assert np.array_equal(a.vectors, b.vectors)
    assert [a.get_vecattr(k, "count") for k in a.index_to_key] == [
        b.get_vecattr(k, "count") for k in b.index_to_key]


def test_preallocated_slots_filled_by_add_vector():
    kv = KeyedVectors(3, 2)
    assert len(kv) == 2 and kv.index_to_key == [None, None] and kv.next_index == 0
    assert kv.add_vector("a", [1, 2, 3]) == 0
    kv.set_vecattr("a", "count", 9)
    assert kv.add_vector("b", np.array([4, 5, 6])) == 1
    assert kv.next_index == 2 and kv.index_to_key == ["a", "b"]
    assert np.array_equal(kv.vectors, [[1, 2, 3], [4, 5, 6]])
    kv.fill_norms()
    with pytest.warns(UserWarning, match="grows"):  # no free slot left: one more row
        assert kv.add_vector("c", [0, 0, 2]) == 2
    assert kv.next_index == 3 and kv["c"].tolist() == [0, 0, 2]
    assert list(kv.counts) == [9, 0, 0]  # the attributes grew with it
    assert kv.similarity("c", "a") == pytest.approx(3 / np.sqrt(14))  # norms not stale
    assert kv.add_vector("a", [7, 7, 7]) == 0 and len(kv) == 3  # known key: replaced
    assert kv["a"].tolist() == [7, 7, 7]
    kv.add_lifecycle_event("loaded", msg="test")
    assert kv.lifecycle_events[-1]["event"] == "loaded"
    assert kv.lifecycle_events[-1]["msg"] == "test"


@requires_gensim
def test_gensims_private_loader_fills_our_preallocated_vectors(tmp_path):
    from gensim.models.keyedvectors import _load_word2vec_format

    kv = _kv(V=7, D=3)
    for binary in (False, True):
        f = str(tmp_path / f"v{binary}")
        kv.save_word2vec_format(f, binary=binary)
        back = _load_word2vec_format(KeyedVectors, f, binary=binary, limit=5,
                                     binary_chunk_size=16)
        assert type(back) is KeyedVectors and back.index_to_key == kv.index_to_key[:5]
        assert np.array_equal(back.vectors, kv.vectors[:5])
        assert list(back.counts) == [5, 4, 3, 2, 1]


def test_similarity_of_one_key_sets_equals_similarity_exactly():
    kv = _kv(V=30, D=7, seed=4)
    assert kv.get_mean_vector(["w1", "w2"], pre_normalize=False).dtype == np.float32
    for a in range(0, 30, 3):
        for b in range(1, 30, 4):
            wa, wb = f"w{a}", f"w{b}"
            assert kv.n_similarity([wa], [wb]) == kv.similarity(wa, wb)


@requires_gensim
def test_similarity_and_distance_are_gensims_floats():
    from gensim.models import KeyedVectors as GKeyedVectors

    keys, vectors = random_vectors(30, 7, 4)
    ours, theirs = KeyedVectors(7), GKeyedVectors(7)
    ours.add_vectors(keys, vectors)
    theirs.add_vectors(keys, vectors)
    for a in keys[::3]:
        for b in keys[1::4] + [a]:
            assert ours.similarity(a, b) == theirs.similarity(a, b)
            assert ours.distance(a, b) == theirs.distance(a, b)
            assert ours.n_similarity([a, b], [b]) == theirs.n_similarity([a, b], [b])
