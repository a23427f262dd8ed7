"""The class tree of hierarchical softmax (fastsoftmax.ClassTree): word2vec.c's Huffman codes
(hand-checked and against a transcription of CreateBinaryTree), explicit trees from paths and
links and their checks, and trees built from vectors (from_vectors). The op and the functional
are in tests/test_hierarchical_softmax.py, the module in tests/test_hierarchical_layer.py."""

import pytest
import reference as R
import torch

import fastsoftmax as fs

D, V = 12, 23


def _lists(codes, points):
    keep = points >= 0
    return ([c[k].tolist() for c, k in zip(codes, keep)],
            [p[k].tolist() for p, k in zip(points, keep)])


def test_huffman_codes_match_word2vec_by_hand():
    # word2vec.c on counts [5, 3, 2, 2, 1] (already sorted): leaves at positions 0..4, the
    # leaf pointer starts at 4, the inner pointer at node 5; on a tie the inner node wins.
    #   a=0: leaf 4 (1) < none  -> 4; leaf 3 (2) < none  -> 3; node 5 = 3,  bit[3] = 1
    #   a=1: leaf 2 (2) < 5 (3) -> 2; leaf 1 (3) = 5 (3) -> 5 (tie: inner); node 6 = 5,
    #        bit[5] = 1
    #   a=2: leaf 1 (3) < 6 (5) -> 1; leaf 0 (5) = 6 (5) -> 6 (tie: inner); node 7 = 8,
    #        bit[6] = 1
    #   a=3: leaf 0 (5) < 7 (8) -> 0; no leaf left     -> 7; node 8 = 13 (root), bit[7] = 1
    # Inner node k is node 5 + k, the root is inner 3. Reading each leaf's bits root first:
    #   class 0: 8 -0-> 0                            codes [0]        points [3]
    #   class 1: 8 -1-> 7 -0-> 1                      codes [1, 0]     points [3, 2]
    #   class 2: 8 -1-> 7 -1-> 6 -0-> 2               codes [1, 1, 0]  points [3, 2, 1]
    #   class 3: 8 -1-> 7 -1-> 6 -1-> 5 -1-> 3        codes [1,1,1,1]  points [3, 2, 1, 0]
    #   class 4: 8 -1-> 7 -1-> 6 -1-> 5 -0-> 4        codes [1,1,1,0]  points [3, 2, 1, 0]
    codes = [[0], [1, 0], [1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 0]]
    points = [[3], [3, 2], [3, 2, 1], [3, 2, 1, 0], [3, 2, 1, 0]]
    for sort in (True, False):
        tree = fs.ClassTree.huffman(torch.tensor([5, 3, 2, 2, 1]), sort=sort)
        assert _lists(*tree.paths()) == (codes, points)
        assert tree.lengths.tolist() == [1, 2, 3, 4, 4] and tree.max_depth == 4
    # The same counts under other ids: sorting by falling count (ties by id) gives every
    # class the code it had above.
    perm = [3, 0, 2, 4, 1]  # class perm[k] has the k-th count; the tied 2 and 4 in id order
    counts = torch.empty(5, dtype=torch.int64)
    counts[perm] = torch.tensor([5, 3, 2, 2, 1])
    got = _lists(*fs.ClassTree.huffman(counts).paths())
    assert [got[0][perm[k]] for k in range(5)] == codes
    assert [got[1][perm[k]] for k in range(5)] == points


@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("V_,high,floats", [(2, 3, False), (3, 2, False), (40, 4, False),
                                            (300, 1000, False), (120, 6, True)])
def test_huffman_matches_createbinarytree(V_, high, floats, sort):
    g = torch.Generator().manual_seed(V_)
    counts = torch.randint(0, high, (V_,), generator=g)  # many ties, zeros included
    if floats:
        counts = counts.double() / 4
    tree = fs.ClassTree.huffman(counts, sort=sort)
    assert _lists(*tree.paths()) == R.huffman_reference(counts.tolist(), sort=sort)
    # A full binary tree: Kraft's equality holds exactly.
    assert float((2.0 ** -tree.lengths.double()).sum()) == 1.0


def test_huffman_zipf_round_trips_through_paths():
    counts = (1e6 / torch.arange(1, 5001).double()).round().long()
    tree = fs.ClassTree.huffman(counts)
    assert torch.equal(fs.ClassTree.from_paths(*tree.paths()).links, tree.links)
    assert torch.equal(fs.ClassTree(tree.links).lengths, tree.lengths)
    assert tree.lengths[0] < tree.lengths[-1]  # frequent classes get short codes


@pytest.mark.parametrize("counts,error,match", [
    ([3, -1, 2], ValueError, "non-negative"),
    ([3.0, float("nan")], ValueError, "NaN"),
    ([3.0, float("inf")], ValueError, "finite"),
    ([[1, 2], [3, 4]], ValueError, "1-D"),
    ([7], ValueError, "at least 2 classes"),
    ([True, False], TypeError, "integers or floats"),
    ([2**62, 2**62, 2**62], ValueError, "sum to more than"),
])
def test_huffman_bad_counts(counts, error, match):
    with pytest.raises(error, match=match):
        fs.ClassTree.huffman(counts)


@pytest.mark.parametrize("codes,points,match", [
    ([[0], [1, 0], [1, 0]], [[1], [1, 0], [1, 0]], "two different nodes|two different parents"),
    ([[0], [0, 1], [1]], [[1], [1, 0], [1]], "two different nodes|two different parents"),
    ([[0], [1], [1, 1]], [[1], [1], [1, 0]], "two different nodes|two different parents"),
    ([[0], [1, 0], [1, 1]], [[1], [1, 2], [1, 2]], r"must lie in \[0, 2\)"),
    ([[0], [1, 0], [1, 2]], [[1], [1, 0], [1, 0]], "0 or 1"),
    ([[0], [1, 0], []], [[1], [1, 0], []], "empty path"),
    ([[0], [1]], [[0], [0]], None),  # V = 2: a valid tree
    ([[0], [1, 0], [1, 1]], [[1], [1, 0], [0, 0]], "does not start at the root|two different"),
    ([[0], [1]], [[0]], "same shape"),
])
def test_from_paths_checks_the_tree(codes, points, match):
    if match is None:
        tree = fs.ClassTree.from_paths(codes, points)
        assert tree.lengths.tolist() == [1, 1]
        return
    with pytest.raises(ValueError, match=match):
        fs.ClassTree.from_paths(codes, points)


def _clustered(per, seed):
    """8 tight clusters of `per` vectors around the corners (+-4, +-2, +-1), rows shuffled:
    (vectors [8 * per, 3], the cluster of each row). Each split of the corners along one axis
    is the clearest, so a good tree holds each cluster in a subtree of its own."""
    g = torch.Generator().manual_seed(seed)
    corners = torch.tensor([[a * 4.0, b * 2.0, c * 1.0] for a in (-1, 1) for b in (-1, 1)
                            for c in (-1, 1)])
    label = torch.arange(8).repeat_interleave(per)[torch.randperm(8 * per, generator=g)]
    return corners[label] + 0.05 * torch.randn(8 * per, 3, generator=g), label


def _subtree_leaves(tree, inner):
    """The classes below inner node `inner`."""
    codes, points = tree.paths()
    return set((points == inner).any(1).nonzero().squeeze(1).tolist())


# Halving the count mass of random counts may need a lopsided cut (a 465:210 pair of
# clusters has a left share of 0.31), hence the wider slack there.
@pytest.mark.parametrize("balance, slack", [(0.0, 0.1), (1.0, 0.25)])
def test_from_vectors_is_a_valid_tree_that_keeps_clusters_together(balance, slack):
    x, label = _clustered(16, seed=3)
    counts = torch.randint(1, 50, (128,), generator=torch.Generator().manual_seed(1))
    tree = fs.ClassTree.from_vectors(x, counts, balance=balance, slack=slack, seed=7)
    V = 128
    assert tree.num_classes == V and tree.num_inner == V - 1
    # Rebuilt from its own paths (every check of from_paths: one root, prefix code, every
    # class one leaf, every inner node two children): the same links.
    codes, points = tree.paths()
    again = fs.ClassTree.from_paths(*_lists(codes, points))
    assert torch.equal(again.links, tree.links)
    assert sorted(tree.links[:V].tolist()) == sorted(set(tree.links[:V].tolist()))
    # Deterministic for a seed.
    assert torch.equal(
        fs.ClassTree.from_vectors(x, counts, balance=balance, slack=slack, seed=7).links,
        tree.links)
    # Each cluster is exactly the leaf set of one subtree.
    for k in range(8):
        members = set((label == k).nonzero().squeeze(1).tolist())
        assert any(_subtree_leaves(tree, i) == members for i in range(V - 1)), k
    # A normalised distribution through the layer with this tree, equal to the float64
    # path-by-path reference.
    m = fs.HierarchicalSoftmaxLoss(D, V, tree=tree).double()
    with torch.no_grad():
        m.linear_weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(0))
    h = torch.randn(6, D, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    lp = m.log_prob(h)
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(6, dtype=torch.float64))
    ref = R.hierarchical_log_prob_reference(h, m.linear_weight.detach(), codes, points)
    torch.testing.assert_close(lp, ref, rtol=1e-10, atol=1e-10)


def test_from_vectors_balance_keeps_frequent_classes_shallow():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(300, 6, generator=g)
    counts = 1.0 / torch.arange(1, 301, dtype=torch.float64)  # Zipf
    by_count = fs.ClassTree.from_vectors(x, counts, balance=1.0, slack=0.0)
    by_size = fs.ClassTree.from_vectors(x, counts, balance=0.0, slack=0.0)
    p = counts / counts.sum()
    # Halving the mass gives a shorter expected code than halving the class count, within
    # Shannon-Fano's bound of entropy + 2 bits for count halving.
    entropy = float(-(p * p.log2()).sum())
    cost = {k: float((p * t.lengths).sum()) for k, t in (("count", by_count), ("size", by_size))}
    assert cost["count"] < cost["size"] and cost["count"] <= entropy + 2
    assert int(by_size.lengths.max()) - int(by_size.lengths.min()) <= 1  # balanced by size
    assert int(by_count.lengths[0]) < int(by_size.lengths[0])


@pytest.mark.parametrize("vectors, counts, kw, error, match", [
    (torch.zeros(1, 3), None, {}, ValueError, "V >= 2"),
    (torch.zeros(5), None, {}, ValueError, "2-D"),
    (torch.zeros(4, 3, dtype=torch.int64), None, {}, TypeError, "floating point"),
    (torch.tensor([[0.0], [float("nan")]]), None, {}, ValueError, "finite"),
    (torch.zeros(4, 3), torch.ones(3), {}, ValueError, "one entry per row"),
    (torch.zeros(4, 3), torch.tensor([1.0, -1, 1, 1]), {}, ValueError, "non-negative"),
    (torch.zeros(4, 3), torch.ones(4, dtype=torch.bool), {}, TypeError, "integers or floats"),
    (torch.zeros(4, 3), None, {"balance": 2.0}, ValueError, "balance"),
    (torch.zeros(4, 3), None, {"slack": 0.5}, ValueError, "slack"),
])
def test_from_vectors_bad_input(vectors, counts, kw, error, match):
    with pytest.raises(error, match=match):
        fs.ClassTree.from_vectors(vectors, counts, **kw)


def test_from_vectors_degenerate_vectors_still_give_a_tree():
    # Identical (or zero) vectors: no direction to split along, yet a full binary tree.
    for x in (torch.zeros(9, 4), torch.ones(9, 4)):
        tree = fs.ClassTree.from_vectors(x, torch.arange(9))
        fs.ClassTree(tree.links)
        assert tree.num_classes == 9


def test_links_checks():
    good = fs.ClassTree.huffman([4, 3, 2, 1]).links
    with pytest.raises(ValueError, match="exactly one root"):
        bad = good.clone()
        bad[4 + 0] = -1  # a second root: inner node 0 loses its parent
        fs.ClassTree(bad)
    with pytest.raises(ValueError, match="marked as the root"):
        bad = good.clone()
        bad[1] = -1
        fs.ClassTree(bad)
    with pytest.raises(ValueError, match="cycle"):
        # V = 4 (nodes 0..3 classes, 4..6 inner 0..2): inner 0 and inner 1 are each other's
        # parent, every slot is used once and inner 2 is the only root.
        links = torch.tensor([0, 2, 4, 5, 3, 1, -1])
        fs.ClassTree(links)
    with pytest.raises(ValueError, match="2V - 1"):
        fs.ClassTree(torch.zeros(4, dtype=torch.int32))


def test_huffman_counts_above_word2vec_placeholder():
    # word2vec.c marks inner nodes not created yet with count 1e15 and would merge one of
    # them before a larger leaf; here they count as +infinity, as the reference loop.
    counts = [4 * 10**15, 3 * 10**15, 2 * 10**15, 10**15]
    tree = fs.ClassTree.huffman(counts)
    assert _lists(*tree.paths()) == R.huffman_reference(counts)
    assert float((2.0 ** -tree.lengths.double()).sum()) == 1.0
