"""PPMIVectors: co-occurrence counts and PPMI against plain formulas on small corpora, the
randomised SVD against the exact one, planted structure, persistence and bad input."""

import itertools

import numpy as np
import pytest
import torch

from fastsoftmax.models import PPMIVectors
from fastsoftmax.models.ppmi import ppmi_matrix

from w2v_helpers import planted_corpus


def _reference_cooccurrence(sentences, vocab, window, dynamic):
    """Dense [V, V] by the definition: every pair of in-vocabulary tokens of one sentence
    at distance d <= window (OOV tokens removed first), weight (W - d + 1) / W if dynamic."""
    V = len(vocab)
    m = np.zeros((V, V))
    for s in sentences:
        ids = [vocab[w] for w in s if w in vocab]
        for i, j in itertools.permutations(range(len(ids)), 2):
            d = abs(i - j)
            if d <= window:
                m[ids[i], ids[j]] += (window - d + 1) / window if dynamic else 1.0
    return m


def _reference_ppmi(counts, cds, shift):
    total = counts.sum()
    pw = counts.sum(1) / total
    ctx = counts.sum(0) ** cds
    pc = ctx / ctx.sum()
    with np.errstate(divide="ignore"):
        pmi = np.log(counts / total) - np.log(pw)[:, None] - np.log(pc)[None, :] - np.log(shift)
    return np.where(counts > 0, np.maximum(pmi, 0), 0)


@pytest.mark.parametrize("dynamic", [True, False])
def test_cooccurrence_and_ppmi_match_their_definitions(dynamic):
    sentences = [["a", "b", "c", "a", "x", "d"], ["d", "a"], ["b"], ["c", "c", "b", "a", "d"]]
    m = PPMIVectors(sentences, vector_size=2, window=2, min_count=2, dynamic_window=dynamic)
    vocab = m.wv.key_to_index
    assert "x" not in vocab and len(vocab) == 4
    ref = _reference_cooccurrence(sentences, vocab, 2, dynamic)
    np.testing.assert_allclose(m.cooccurrence.to_dense().numpy(), ref, rtol=1e-12)
    for cds, shift in ((0.75, 1.0), (1.0, 1.0), (0.75, 2.0)):
        got = ppmi_matrix(m.cooccurrence, cds, shift).to_dense().numpy()
        np.testing.assert_allclose(got, _reference_ppmi(ref, cds, shift), rtol=1e-10,
                                   atol=1e-12)


def test_vectors_are_the_scaled_singular_vectors_and_randomised_svd_agrees():
    corpus = planted_corpus(sentences=600)
    full = PPMIVectors(corpus, vector_size=10, window=3, min_count=1, svd="full", eig=0.5)
    dense = full.ppmi.to_dense()
    u, s, _ = torch.linalg.svd(dense)
    np.testing.assert_allclose(full.singular_values, s[:10].numpy(), rtol=1e-5)
    # rows are U_d S_d^0.5: their Gram matrix is U_d S_d U_d^T, sign-independent
    ref = (u[:, :10] * s[:10]) @ u[:, :10].T
    got = full.wv.vectors.astype(np.float64) @ full.wv.vectors.T.astype(np.float64)
    np.testing.assert_allclose(got, ref.numpy(), atol=1e-4)
    fast = PPMIVectors(corpus, vector_size=10, window=3, min_count=1, svd="randomized",
                       svd_iter=6)
    np.testing.assert_allclose(fast.singular_values[:5], full.singular_values[:5], rtol=1e-3)


def test_planted_groups_are_neighbours_and_evaluation_calls_work(tmp_path):
    m = PPMIVectors(planted_corpus(), vector_size=16, window=3, min_count=1)
    hits = 0
    for g in range(6):
        for k in range(4):
            best = [w for w, _ in m.wv.most_similar(f"m{g}_{k}", topn=20) if w.startswith("m")]
            hits += best[0].startswith(f"m{g}_")
    assert hits >= 22  # of 24
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("m0_0\tm0_1\t9\nm0_0\tm1_1\t1\nm2_0\tm2_3\t8\nm3_1\tc4_2\t2\n")
    assert m.wv.evaluate_word_pairs(str(pairs))[1][0] > 0.5
    # A small analogy file made for this test (none ships here): a member of group 0 is to
    # another as a member of group 1 is to a third. With 3CosAdd the answer must at least
    # come from group 1, and the evaluation must count every question.
    questions = tmp_path / "analogies.txt"
    questions.write_text(": planted\nm0_0 m0_1 m1_0 m1_1\nm2_0 m2_2 m3_0 m3_2\n"
                         ": unknown\nm0_0 m0_1 zz m1_1\n")
    acc, sections = m.wv.evaluate_word_analogies(str(questions))
    total = sections[-1]
    assert len(total["correct"]) + len(total["incorrect"]) == 2 and 0.0 <= acc <= 1.0
    guess = m.wv.most_similar(positive=["m0_1", "m1_0"], negative=["m0_0"], topn=1)[0][0]
    assert guess.startswith(("m1_", "c1_"))
    path = tmp_path / "ppmi.npz"
    m.save(str(path))
    again = PPMIVectors.load(str(path))
    assert again.wv.index_to_key == m.wv.index_to_key
    assert np.array_equal(again.wv.vectors, m.wv.vectors) and again.window == 3


def test_bad_input():
    with pytest.raises(ValueError, match="svd"):
        PPMIVectors(svd="lanczos")
    with pytest.raises(ValueError, match="min_count=5"):
        PPMIVectors([["a", "b"]])
    with pytest.raises(TypeError, match="str"):
        PPMIVectors("a b c")
    with pytest.raises(ValueError, match="cds_alpha"):
        PPMIVectors(cds_alpha=0)
