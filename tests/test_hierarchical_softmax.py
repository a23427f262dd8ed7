"""Hierarchical softmax: word2vec.c's Huffman codes (hand-checked and against a transcription
of CreateBinaryTree), explicit trees and their checks, the fused op against the float64
reference of tests/reference.py (loss, gradients, gradcheck, opcheck), sparse and
deterministic backward, exact log_prob/predict, the module, and clear errors."""

import pytest
import reference as R
import torch

import fastsoftmax as fs
from fastsoftmax import functional as FF

N, D, V = 9, 12, 23
OP = torch.ops.fastsoftmax


def _lists(codes, points):
    keep = points >= 0
    return ([c[k].tolist() for c, k in zip(codes, keep)],
            [p[k].tolist() for p, k in zip(points, keep)])


# ---- the tree ---------------------------------------------------------------------------

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


# ---- the op against the reference --------------------------------------------------------

def make_case(device, dtype=torch.float64, seed=0, ignore=True):
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(1, 50, (V,), generator=g)
    tree = fs.ClassTree.huffman(counts).to(device)
    h = torch.randn(N, D, generator=g, dtype=torch.float64)
    w = torch.randn(V - 1, D, generator=g, dtype=torch.float64) * 0.5
    t = torch.randint(0, V, (N,), generator=g)
    if ignore:
        t[2] = t[6] = -100
    cast = dict(device=device, dtype=dtype)
    return (h.to(**cast).requires_grad_(), w.to(**cast).requires_grad_(), t.to(device), tree)


def reference(h, w, t, tree, reduction, dtype=torch.float64):
    codes, points = tree.paths()
    loss = R.hierarchical_softmax_reference(h, w, t, codes, points, dtype=dtype)
    return R.reduce_reference(loss, t[:, None], reduction)


def weighted_grads(loss, params):
    weight = torch.linspace(0.5, 1.5, loss.numel(), dtype=loss.dtype, device=loss.device)
    return torch.autograd.grad((loss.reshape(-1) * weight).sum(), params)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_reference(device, dtype, reduction):
    h, w, t, tree = make_case(device, dtype)
    ours = FF.hierarchical_softmax_loss(h, w, t, tree, reduction=reduction)
    ref = reference(h, w, t, tree, reduction)
    assert ours.dtype == dtype
    tol = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.double(), ref, **tol)
    for a, b in zip(weighted_grads(ours, [h, w]), weighted_grads(ref, [h, w])):
        torch.testing.assert_close(a.double(), b.double(), **tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_within_torch_error(device, dtype):
    h, w, t, tree = make_case(device, dtype)
    ours = FF.hierarchical_softmax_loss(h, w, t, tree, reduction="none")
    ref = reference(h, w, t, tree, "none")
    plain = reference(h, w, t, tree, "none", dtype=dtype)

    def err(x, y):
        x, y = x.detach().double(), y.detach().double()
        return float((x - y).abs().max() / y.abs().max())

    assert ours.dtype == dtype
    assert err(ours, ref) <= 2 * err(plain, ref) + 1e-3
    for a, b, p in zip(weighted_grads(ours, [h, w]), weighted_grads(ref, [h, w]),
                       weighted_grads(plain, [h, w])):
        assert a.dtype == dtype and err(a, b) <= 2 * err(p, b) + 2e-3


def test_leading_dims_and_explicit_tree(device):
    h, w, t, _ = make_case(device)
    # A balanced-ish explicit tree given as codes/points lists, not a Huffman tree.
    codes, points = R.huffman_reference([1] * V)
    tree = fs.ClassTree.from_paths(codes, points).to(device)
    ours = FF.hierarchical_softmax_loss(h.reshape(3, 3, D), w, t.reshape(3, 3), tree,
                                        reduction="none")
    assert ours.shape == (3, 3)
    ref = R.hierarchical_softmax_reference(h, w, t, codes, points)
    torch.testing.assert_close(ours.reshape(-1), ref)


def test_gradcheck_float64():
    h, w, t, tree = make_case("cpu")
    for reduction in ("mean", "none"):
        assert torch.autograd.gradcheck(
            lambda a, b: FF.hierarchical_softmax_loss(a, b, t, tree, reduction=reduction), (h, w))


def test_opcheck(device):
    h, w, t, tree = make_case(device, torch.float32)
    h, w = h.detach(), w.detach()
    op = fs.ops._overload  # opcheck takes the OpOverload, not ops._op's wrapper
    fwd = op("hierarchical_softmax_forward")
    for sparse in (False, True):
        torch.library.opcheck(fwd, (h, w, t, tree.links, tree.max_depth, -100, sparse))
        loss, coef, nodes = fwd(h, w, t, tree.links, tree.max_depth, -100, sparse)
        torch.library.opcheck(op("hierarchical_softmax_backward"),
                              (torch.rand_like(loss), h, w, nodes, coef, sparse))
    counts = torch.tensor([5, 3, 2, 2, 1], device=device)
    torch.library.opcheck(op("huffman_tree"), (counts, True))


def test_sparse_gradient_equals_dense(device):
    h, w, t, tree = make_case(device, torch.float32)
    fwd = fs.ops._op("hierarchical_softmax_forward")
    bwd = fs.ops._op("hierarchical_softmax_backward")
    _, coef, nodes = fwd(h, w, t, tree.links, tree.max_depth, -100, True)
    g = torch.rand(N, device=device)
    _, rows, ids = bwd(g, h, w, nodes, coef, True)
    _, dense, _ = bwd(g, h, w, nodes, coef, False)
    touched = nodes[(t != -100)].unique()
    touched = touched[touched < V - 1]
    assert torch.equal(ids, touched)  # exactly the inner nodes on a path, ascending
    # (equal up to summation order: the dense CUDA gradient adds with atomics)
    torch.testing.assert_close(dense[ids], rows)
    untouched = torch.ones(V - 1, dtype=torch.bool, device=device)
    untouched[ids] = False
    assert bool((dense[untouched] == 0).all())
    # Through the module: a sparse COO gradient equal to the dense one.
    m = fs.HierarchicalSoftmaxLoss(D, V, tree=tree, sparse=True).to(device)
    m.linear_weight.data.copy_(w.detach())
    m(h.detach(), t).backward()
    assert m.linear_weight.grad.is_sparse
    ref = fs.HierarchicalSoftmaxLoss(D, V, tree=tree).to(device)
    ref.linear_weight.data.copy_(w.detach())
    ref(h.detach(), t).backward()
    torch.testing.assert_close(m.linear_weight.grad.to_dense(), ref.linear_weight.grad)


def test_deterministic_backward_bit_identical(device):
    h, w, t, tree = make_case(device, torch.float32, ignore=False)
    h = h.detach().repeat(40, 1).requires_grad_()  # many rows share each inner node
    t = t.repeat(40)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    threads = torch.get_num_threads()
    try:
        runs = []
        for n in (1, 2, 2):
            torch.set_num_threads(n)
            h.grad = w.grad = None
            FF.hierarchical_softmax_loss(h, w, t, tree).backward()
            runs.append((h.grad.clone(), w.grad.clone()))
        for a, b in zip(runs[0] + runs[1], runs[1] + runs[2]):
            assert torch.equal(a, b)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(previous)


# ---- the module: exact log_prob / predict, state, errors -----------------------------------

def make_module(device, dtype=torch.float32, V_=V):
    g = torch.Generator().manual_seed(1)
    counts = torch.randint(1, 1000, (V_,), generator=g)
    m = fs.HierarchicalSoftmaxLoss(D, V_, counts, device=device, dtype=dtype)
    with torch.no_grad():
        m.linear_weight.normal_(0, 1.5, generator=g)
    x = torch.randn(5, 4, D, generator=g, dtype=dtype).to(device)
    return m, x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log_prob_is_exact_and_normalised(device, dtype):
    m, x = make_module(device, dtype, V_=3001)
    m.chunk_bytes = 8 * 2**20  # several chunks of rows
    lp = m.log_prob(x)
    assert lp.shape == (5, 4, 3001) and lp.dtype == dtype
    total = lp.detach().double().exp().sum(-1)
    assert float((total - 1).abs().max()) <= 1e-6
    codes, points = m.tree.paths()
    ref = R.hierarchical_log_prob_reference(x.reshape(-1, D), m.linear_weight.detach(), codes,
                                            points)
    tol = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(lp.reshape(-1, 3001).double(), ref, **tol)
    assert torch.equal(m.predict(x), lp.argmax(-1))
    # The loss is -log_prob of the target, in training and in eval mode alike.
    t = torch.randint(0, 3001, (5, 4), device=device)
    picked = -lp.gather(-1, t[..., None]).squeeze(-1)
    for train in (True, False):
        m.train(train)
        torch.testing.assert_close(m(x, t), picked.mean(), **tol)
    torch.testing.assert_close(m.full_loss(x, t, reduction="none"), picked, **tol)
    torch.testing.assert_close(
        FF.hierarchical_softmax_loss(x, m.linear_weight, t, m.tree, reduction="sum", sparse=True),
        picked.sum(), **tol)


def test_module_state_and_device(device, tmp_path):
    m, x = make_module("cpu")
    t = torch.randint(0, V, (5, 4))
    expected = m(x, t)
    path = tmp_path / "hs.pt"
    torch.save(m.state_dict(), path)
    other = fs.HierarchicalSoftmaxLoss(D, V, torch.ones(V))  # another tree, same shapes
    other.load_state_dict(torch.load(path))
    assert torch.equal(other.tree.links, m.tree.links)
    torch.testing.assert_close(other(x, t), expected)
    moved = other.to(device)
    assert moved.tree.device.type == device.type
    torch.testing.assert_close(moved(x.to(device), t.to(device)).cpu(), expected)
    corrupt = m.state_dict()
    corrupt["tree_links"] = corrupt["tree_links"].clone()
    corrupt["tree_links"][0] = -1
    with pytest.raises(ValueError, match="marked as the root"):
        other.load_state_dict(corrupt)
    assert "max_depth" in repr(m)


def test_zero_init_is_the_huffman_prior():
    counts = torch.tensor([40, 20, 10, 10, 5, 5, 5, 5])
    m = fs.HierarchicalSoftmaxLoss(4, 8, counts)
    lp = m.log_prob(torch.randn(3, 4))
    torch.testing.assert_close(lp, (-m.tree.lengths.float() * 0.6931471805599453).expand(3, 8))


def test_autocast_runs_in_float32():
    m, x = make_module("cpu")
    t = torch.randint(0, V, (5, 4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = m(x.bfloat16(), t)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, m(x.bfloat16().float(), t))


def test_compile_fullgraph():
    m, x = make_module("cpu")
    t = torch.randint(0, V, (5, 4))
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    loss = compiled(x, t)
    loss.backward()
    grad = m.linear_weight.grad.clone()
    m.zero_grad()
    eager = m(x, t)
    eager.backward()
    torch.testing.assert_close(loss, eager)
    torch.testing.assert_close(grad, m.linear_weight.grad)


class TestErrors:
    def setup_method(self):
        self.h, self.w, self.t, self.tree = make_case("cpu", torch.float32)

    def loss(self, **kw):
        args = dict(input=self.h, linear_weight=self.w, target=self.t, tree=self.tree)
        args.update(kw)
        return FF.hierarchical_softmax_loss(args.pop("input"), args.pop("linear_weight"),
                                            args.pop("target"), args.pop("tree"), **args)

    def test_target_out_of_range(self):
        t = self.t.clone()
        t[0], t[1] = V, -3
        with pytest.raises(ValueError, match=rf"target ids must lie in \[0, {V}\).*found -3.*{V}"):
            self.loss(target=t)

    def test_shapes_and_dtypes(self):
        with pytest.raises(ValueError, match="one row per inner node"):
            self.loss(linear_weight=self.w[:-1])
        with pytest.raises(ValueError, match="features per node"):
            self.loss(linear_weight=self.w[:, :-1])
        with pytest.raises(ValueError, match=r"target must have shape \(9,\)"):
            self.loss(target=self.t[:-1])
        with pytest.raises(TypeError, match="int64"):
            self.loss(target=self.t.int())
        with pytest.raises(TypeError, match="same dtype"):
            self.loss(linear_weight=self.w.double())
        with pytest.raises(TypeError, match="ClassTree"):
            self.loss(tree=self.tree.links)
        with pytest.raises(ValueError, match="reduction"):
            self.loss(reduction="avg")

    def test_device_mismatch(self):
        with pytest.raises(ValueError, match="is on meta but input is on cpu"):
            self.loss(target=self.t.to("meta"))
        with pytest.raises(ValueError, match="tree is on meta.*tree.to"):
            self.loss(tree=fs.ClassTree._trusted(self.tree.links.to("meta"), self.tree.lengths))

    def test_raw_op_guards_its_reads(self):
        """A direct torch.ops call checks what the kernel reads. A stable-ABI kernel can only
        raise RuntimeError: the message carries the promised type, which fastsoftmax's own
        wrappers (ops._op) raise instead."""
        fwd = OP.hierarchical_softmax_forward
        t = self.t.clamp_min(0)
        for value, match in ((10**6, r"links values must lie in \[-1"), (-1, "never the root")):
            links = self.tree.links.clone()
            links[t[0]] = value  # a link the kernel reads
            with pytest.raises(RuntimeError, match="ValueError: .*" + match):
                fwd(self.h, self.w, t, links, self.tree.max_depth, -100, False)
            with pytest.raises(ValueError, match=match):
                fs.ops._op("hierarchical_softmax_forward")(
                    self.h, self.w, t, links, self.tree.max_depth, -100, False)
        with pytest.raises(RuntimeError, match="does not reach the root within max_depth"):
            fwd(self.h, self.w, self.t.clamp_min(0), self.tree.links, 1, -100, False)

    def test_module_arguments(self):
        with pytest.raises(ValueError, match="exactly one of counts"):
            fs.HierarchicalSoftmaxLoss(D, V)
        with pytest.raises(ValueError, match="exactly one of counts"):
            fs.HierarchicalSoftmaxLoss(D, V, torch.ones(V), tree=self.tree)
        with pytest.raises(ValueError, match="one entry per class"):
            fs.HierarchicalSoftmaxLoss(D, V, torch.ones(V + 1))
        with pytest.raises(ValueError, match="tree has 23 classes"):
            fs.HierarchicalSoftmaxLoss(D, V + 1, tree=self.tree)
        with pytest.raises(ValueError, match="num_classes >= 2"):
            fs.HierarchicalSoftmaxLoss(D, 1, [3])
        m = fs.HierarchicalSoftmaxLoss(D, V, torch.ones(V))
        with pytest.raises(ValueError, match="features in its last dimension"):
            m.log_prob(torch.randn(2, D + 1))


def test_large_dense_gradient_matches_sparse():
    # Above 4 MB the CPU's dense weight gradient is lazily zeroed memory, only touched rows
    # written: every other row must still read as zero, also after in-place accumulation.
    v, d = 5000, 256
    tree = fs.ClassTree.huffman(torch.arange(v, 0, -1))
    g = torch.Generator().manual_seed(0)
    h = torch.randn(64, d, generator=g)
    w = torch.randn(v - 1, d, generator=g) * 0.1
    t = torch.randint(0, v, (64,), generator=g)
    _, coef, nodes = OP.hierarchical_softmax_forward(h, w, t, tree.links, tree.max_depth, -100,
                                                     False)
    grad = torch.rand(64, generator=g)
    dense = OP.hierarchical_softmax_backward(grad, h, w, nodes, coef, False)[1]
    _, rows, ids = OP.hierarchical_softmax_backward(grad, h, w, nodes, coef, True)
    expected = torch.zeros(v - 1, d).index_copy_(0, ids, rows)
    assert torch.equal(dense, expected)
    dense += expected
    assert torch.equal(dense, 2 * expected)


def test_huffman_counts_above_word2vec_placeholder():
    # word2vec.c marks inner nodes not created yet with count 1e15 and would merge one of
    # them before a larger leaf; here they count as +infinity, as the reference loop.
    counts = [4 * 10**15, 3 * 10**15, 2 * 10**15, 10**15]
    tree = fs.ClassTree.huffman(counts)
    assert _lists(*tree.paths()) == R.huffman_reference(counts)
    assert float((2.0 ** -tree.lengths.double()).sum()) == 1.0


def test_cuda_path_beyond_max_depth_is_nan(cuda_backend):
    # CUDA cannot raise from the kernel: a path longer than max_depth gives a NaN loss there
    # (the CPU raises, see TestErrors).
    device, enter = cuda_backend
    h, w, t, tree = make_case(device, torch.float32, ignore=False)
    with enter():
        loss = fs.ops._op("hierarchical_softmax_forward")(h, w, t, tree.links, 1, -100, False)[0]
    deep = (tree.lengths[t] > 1).cpu()
    assert bool(deep.any()) and bool(torch.isnan(loss.cpu()[deep]).all())
    assert not bool(torch.isnan(loss.cpu()[~deep]).any())


def test_hs_is_a_registered_head_and_an_lm_output():
    from fastsoftmax.models.lm import RNNLanguageModel
    from fastsoftmax.nn import HEADS, OutputLayer, make_head

    counts = torch.tensor([50.0, 20, 9, 9, 4, 2, 1, 1])
    head = make_head("hs", 6, 8, counts=counts, sparse=True)
    assert HEADS["hs"] is type(head) and isinstance(head, OutputLayer)
    assert head.linear_weight.shape == (7, 6)
    torch.manual_seed(0)
    lm = RNNLanguageModel(8, 6, 6, 1, output="hs", counts=counts)
    x = torch.randint(0, 8, (3, 5))
    loss, _ = lm(x, x.roll(-1, 1))
    loss.backward()
    assert torch.isfinite(loss) and lm.head.linear_weight.grad is not None
    lm.eval()
    log_p, _ = lm.log_prob(x)
    torch.testing.assert_close(log_p.exp().sum(-1), torch.ones(3, 5))
    exact = -log_p.gather(-1, x.roll(-1, 1).unsqueeze(-1)).mean()
    torch.testing.assert_close(lm(x, x.roll(-1, 1))[0], exact)
    with pytest.raises(ValueError, match="tie_weights cannot be used with output 'hs'"):
        RNNLanguageModel(8, 6, 6, 1, output="hs", counts=counts, tie_weights=True)
    with pytest.raises(ValueError, match="needs the training counts"):
        RNNLanguageModel(8, 6, 6, 1, output="hs")
