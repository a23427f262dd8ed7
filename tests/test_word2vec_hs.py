"""word2vec with hierarchical softmax (hs=1): the native step against the float64 reference
(alone and with negative sampling, CPU and emulated CUDA), the vocabulary's Huffman tree
against word2vec.c's codes, persistence, the online update, gensim's behaviour and the
command line."""

import numpy as np
import pytest
import torch

from fastsoftmax import ClassTree, UnigramSampler, ops
from fastsoftmax.cli import word2vec as cli
from fastsoftmax.models import Word2Vec

import reference as R

from w2v_helpers import (GENSIM_MISSING, HAVE_GENSIM, planted_corpus, replay_batches,
                         token_batch)

requires_gensim = pytest.mark.skipif(not HAVE_GENSIM, reason=GENSIM_MISSING)


@pytest.mark.parametrize("sg,cbow_mean,negative", [(1, 1, 0), (0, 1, 0), (0, 0, 0), (1, 1, 3),
                                                   (0, 1, 3)])
def test_op_hs_matches_reference(device, sg, cbow_mean, negative):
    rng = np.random.default_rng(7)
    V, D, W = 11, 10, 3
    counts = rng.integers(1, 60, V)
    sentences = [rng.integers(0, V, n) for n in (9, 1, 17, 12, 6)]
    before = [0, 9, 10, 27, 80]
    syn0 = rng.random((V, D), dtype=np.float32) - 0.5
    syn1neg = (rng.random((V, D), dtype=np.float32) - 0.5) * 0.5
    syn1 = (rng.random((V - 1, D), dtype=np.float32) - 0.5) * 0.5  # not zero: every step moves
    keep = rng.uniform(0.5, 1.0, V).astype(np.float32)
    prob, alias = UnigramSampler(torch.tensor(counts, dtype=torch.float64), 0.75)._table
    tree = ClassTree.huffman(torch.tensor(counts))
    paths, offsets = ops.huffman_paths(tree.links, tree.lengths)
    a0, a1n = torch.tensor(syn0, device=device), torch.tensor(syn1neg, device=device)
    a1 = torch.tensor(syn1, device=device)
    batches = replay_batches(sentences, before, 500, device)
    stats = torch.zeros(3, dtype=torch.float64)
    for batch, batch_before, first in batches:
        tokens, ends = token_batch(batch)
        stats += ops.word2vec_train(
            a0, a1n if negative else torch.empty(0, D, device=device), tokens.to(device),
            ends.to(device), torch.tensor(batch_before).to(device),
            torch.tensor(keep, device=device), prob.to(device), alias.to(device), 5, first, sg,
            cbow_mean, W, negative, True, 0.3, 0.01, 60.0, 1, syn1=a1,
            hs_paths=paths.to(device), hs_offsets=offsets.to(device)).cpu()
    codes, points = R.huffman_reference(counts.tolist())
    r0, r1n, loss, examples, kept, r1 = R.w2v_train_reference(
        syn0, syn1neg, sentences, before, keep, prob.numpy(), alias.numpy(), seed=5,
        first_token=500, sg=sg, cbow_mean=cbow_mean, window=W, negative=negative, shrink=True,
        alpha=0.3, min_alpha=0.01, total_words=60.0, syn1_hs=syn1, codes=codes, points=points)
    assert examples > 0 and kept < sum(len(s) for s in sentences)  # the case is not trivial
    assert stats[1].item() == examples and stats[2].item() == kept
    assert stats[0].item() == pytest.approx(loss, rel=1e-5)
    atol = 2e-6 if device.type == "cpu" else 2e-5  # CUDA: warp-order sums, exact expf
    np.testing.assert_allclose(a0.cpu().numpy(), r0, atol=atol)
    np.testing.assert_allclose(a1.cpu().numpy(), r1, atol=atol)
    assert not np.allclose(r1, syn1) and not np.allclose(r0, syn0)
    if negative:
        np.testing.assert_allclose(a1n.cpu().numpy(), r1n, atol=atol)


def test_op_hs_rejects_bad_paths():
    V, D = 4, 3
    tree = ClassTree.huffman(torch.tensor([4, 3, 2, 1]))
    paths, offsets = ops.huffman_paths(tree.links, tree.lengths)
    tokens, ends = token_batch([np.array([0, 1, 2, 3])])
    empty = torch.empty(0)

    def run(syn1, p, o, negative=0):
        return ops.word2vec_train(torch.rand(V, D), torch.empty(0, D), tokens, ends,
                                  torch.zeros(1, dtype=torch.int64), torch.ones(V), empty, empty,
                                  1, 0, True, True, 2, negative, True, 0.1, 0.0, 4.0, 1,
                                  syn1=syn1, hs_paths=p, hs_offsets=o)

    run(torch.zeros(V - 1, D), paths, offsets)
    with pytest.raises(TypeError, match=r"syn1 must be float32 \[V - 1, D\]"):
        run(torch.zeros(V, D), paths, offsets)
    with pytest.raises(ValueError, match="path steps"):
        run(torch.zeros(V - 1, D), paths + 2 * (V - 1), offsets)
    with pytest.raises(ValueError, match="hs_offsets must run from 0"):
        run(torch.zeros(V - 1, D), paths[:-1], offsets)
    with pytest.raises(ValueError, match="no output layer"):
        ops.word2vec_train(torch.rand(V, D), torch.empty(0, D), tokens, ends,
                           torch.zeros(1, dtype=torch.int64), torch.ones(V), empty, empty, 1, 0,
                           True, True, 2, 0, True, 0.1, 0.0, 4.0, 1)


def test_huffman_paths_are_the_tree_codes_and_points():
    tree = ClassTree.huffman(torch.tensor([7, 5, 5, 3, 2, 2, 1]))
    paths, offsets = ops.huffman_paths(tree.links, tree.lengths)
    codes, points = tree.paths()
    for w in range(7):
        steps = paths[offsets[w]:offsets[w + 1]].tolist()
        n = int(tree.lengths[w])
        assert steps == (2 * points[w, :n] + codes[w, :n]).tolist()


def _paths_of(tree, k, n):
    codes, points = tree.paths()
    return codes[k, :n].tolist(), points[k, :n].tolist()


# Counts [5, 3, 2, 2, 1] at vocabulary positions 0..4, root-first codes and points.
# word2vec.c (hand-traced in test_hierarchical_tree.py): on a tie the inner node wins and
# leaves are read from the high positions down.
W2V_C_CODES = [[0], [1, 0], [1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 0]]
W2V_C_POINTS = [[3], [3, 2], [3, 2, 1], [3, 2, 1, 0], [3, 2, 1, 0]]
# gensim's heap, by hand: pop (1, 4) and (2, 2) [ties: lower id] -> inner 0 (3); pop (2, 3)
# and (3, 1) [a leaf before inner 0 (3, id 5)] -> inner 1 (5); pop inner 0 (3) and (5, 0)
# [the leaf before inner 1 (5, id 6)] -> inner 2 (8); inner 1 and inner 2 -> the root,
# inner 3. The same cost (29) as word2vec.c's tree, another shape.
GENSIM_CODES = [[1, 1], [0, 1], [1, 0, 1], [0, 0], [1, 0, 0]]
GENSIM_POINTS = [[3, 2], [3, 1], [3, 2, 0], [3, 1], [3, 2, 0]]


@pytest.mark.parametrize("huffman,codes,points", [
    ("gensim", GENSIM_CODES, GENSIM_POINTS), ("word2vec.c", W2V_C_CODES, W2V_C_POINTS)])
def test_vocabulary_tree_by_hand(huffman, codes, points):
    m = Word2Vec(vector_size=4, min_count=1, hs=1, negative=0, huffman=huffman)
    m.build_vocab_from_freq({"a": 5, "b": 3, "c": 2, "d": 2, "e": 1})
    assert m.wv.counts.tolist() == [5, 3, 2, 2, 1]
    assert m.syn1.shape == (5, 4) and not m.syn1.any()  # [V, D] zeros, as gensim
    for k in range(5):
        assert _paths_of(m.hs_tree, k, len(codes[k])) == (codes[k], points[k])
    if huffman == "word2vec.c":
        assert (codes, points) == R.huffman_reference([5, 3, 2, 2, 1])
    with pytest.raises(AttributeError, match="negative=0"):
        _ = m.syn1neg
    with pytest.raises(ValueError, match="huffman"):
        Word2Vec(hs=1, huffman="fano")


@pytest.mark.parametrize("V", [2, 3, 57, 400])
def test_heap_tree_is_a_huffman_tree(V):
    # Both trees are optimal prefix codes: the same cost sum_v count_v * length_v, and the
    # heap's is one full binary tree (ClassTree checks its links).
    counts = torch.randint(1, 12, (V,), generator=torch.Generator().manual_seed(V))
    heap, merge = ClassTree.huffman_heap(counts), ClassTree.huffman(counts)
    assert int((heap.lengths * counts).sum()) == int((merge.lengths * counts).sum())
    codes, points = R.huffman_reference(counts.tolist())
    assert int((merge.lengths * counts).sum()) == sum(len(c) * n for c, n in
                                                      zip(codes, counts.tolist()))


@requires_gensim
def test_default_tree_is_gensims():
    from gensim.models import Word2Vec as GWord2Vec

    corpus = planted_corpus(sentences=300) + [["rare", "m0_0"], ["rare2"]]
    ours = Word2Vec(vector_size=4, min_count=1, hs=1, negative=0)
    ours.build_vocab(corpus)
    theirs = GWord2Vec(vector_size=4, min_count=1, hs=1, negative=0)
    theirs.build_vocab(corpus)
    assert ours.wv.index_to_key == list(theirs.wv.index_to_key)
    for k, w in enumerate(ours.wv.index_to_key):
        code, point = theirs.wv.get_vecattr(w, "code"), theirs.wv.get_vecattr(w, "point")
        assert _paths_of(ours.hs_tree, k, len(code)) == (code.tolist(), point.tolist())


@pytest.mark.parametrize("negative", [0, 4])
def test_model_hs_save_load_round_trip(tmp_path, negative):
    corpus = planted_corpus(sentences=200)
    m = Word2Vec(corpus, vector_size=8, min_count=1, hs=1, negative=negative, workers=1,
                 epochs=1, seed=4, huffman="word2vec.c" if negative else "gensim")
    assert m.syn1.any()  # trained
    path = tmp_path / "m.w2v"
    m.save(str(path))
    back = Word2Vec.load(str(path))
    assert back.hs == 1 and back.negative == negative and back.huffman == m.huffman
    assert np.array_equal(back.syn1, m.syn1) and np.array_equal(back.wv.vectors, m.wv.vectors)
    assert torch.equal(back.hs_tree.links, m.hs_tree.links)
    if negative:
        assert np.array_equal(back.syn1neg, m.syn1neg)
    # Training continues identically from the loaded model and from the original.
    more = planted_corpus(seed=3, sentences=50)
    m.train(more, total_examples=len(more), epochs=1)
    back.train(more, total_examples=len(more), epochs=1)
    assert np.array_equal(back.syn1, m.syn1) and np.array_equal(back.wv.vectors, m.wv.vectors)


def test_online_update_rebuilds_the_tree_and_grows_syn1():
    m = Word2Vec(planted_corpus(sentences=200), vector_size=8, min_count=1, hs=1, negative=0,
                 workers=1, epochs=1, sample=0)
    old_v, old_syn1 = len(m.wv), m.syn1.copy()
    new = [["new_a", "new_b", "m0_0", "new_a"]] * 30
    m.build_vocab(new, update=True)
    V = len(m.wv)
    assert V == old_v + 2
    assert m.syn1.shape == (V, 8)  # gensim's shape; row V - 1 is no inner node's
    assert np.array_equal(m.syn1[:old_v - 1], old_syn1[:old_v - 1])
    assert not m.syn1[old_v - 1:].any()
    assert m.hs_tree.num_classes == V
    # the tree is rebuilt from the new counts
    assert torch.equal(m.hs_tree.links,
                       ClassTree.huffman_heap(torch.from_numpy(m.wv.counts)).links)
    m.train(new, total_examples=len(new), epochs=1)
    assert m.syn1[old_v - 1:V - 1].any() and not m.syn1[V - 1].any()  # new inner nodes train


def test_hs_learns_the_planted_structure():
    m = Word2Vec(planted_corpus(), vector_size=24, window=3, min_count=1, sg=1, hs=1,
                 negative=0, epochs=5, sample=0, workers=2, seed=2, compute_loss=True)
    hits = sum(
        [w for w, _ in m.wv.most_similar(f"m{g}_{k}", topn=20) if w.startswith("m")][0]
        .startswith(f"m{g}_") for g in range(6) for k in range(4))
    assert hits >= 22 and m.get_latest_training_loss() > 0


def test_predict_output_word_and_memory_follow_gensim():
    corpus = planted_corpus(sentences=100)
    hs_only = Word2Vec(corpus, vector_size=8, min_count=1, hs=1, negative=0, epochs=1)
    with pytest.raises(RuntimeError, match="negative sampling"):
        hs_only.predict_output_word(["c0_1"])
    both = Word2Vec(corpus, vector_size=8, min_count=1, hs=1, negative=3, epochs=1)
    assert len(both.predict_output_word(["c0_1", "c0_2"], topn=3)) == 3
    report = both.estimate_memory()
    assert report["syn1"] == report["syn1neg"] == len(both.wv) * 8 * 4
    assert "syn1neg" not in hs_only.estimate_memory()
    with pytest.raises(ValueError, match="no output layer"):
        Word2Vec(hs=0, negative=0)


@requires_gensim
def test_estimate_memory_and_predict_errors_match_gensim():
    from gensim.models import Word2Vec as GWord2Vec

    corpus = planted_corpus(sentences=100)
    ours = Word2Vec(corpus, vector_size=8, min_count=1, hs=1, negative=2, epochs=1)
    theirs = GWord2Vec(corpus, vector_size=8, min_count=1, hs=1, negative=2, epochs=1)
    assert ours.estimate_memory() == theirs.estimate_memory()
    theirs_hs = GWord2Vec(corpus, vector_size=8, min_count=1, hs=1, negative=0, epochs=1)
    with pytest.raises(RuntimeError):
        theirs_hs.predict_output_word(["c0_1"])


def test_cli_hs_without_negatives_trains(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(s) for s in planted_corpus(sentences=200)) + "\n")
    out = tmp_path / "v.txt"
    assert cli.main(["-train", str(corpus), "-output", str(out), "-size", "8", "-window", "2",
                     "-iter", "1", "-min-count", "1", "-threads", "1", "-hs", "1",
                     "-negative", "0", "-quiet"]) == 0
    printed = capsys.readouterr().out
    assert "CBOW (hierarchical softmax)," in printed
    assert out.read_text().splitlines()[0].split()[1] == "8"
