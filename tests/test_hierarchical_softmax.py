"""Hierarchical softmax, the fused op and its functional: against the float64 reference of
tests/reference.py (loss, gradients, gradcheck, opcheck), sparse and deterministic backward,
the CUDA path, and clear errors. The tree is tested in tests/test_hierarchical_tree.py, the
module (HierarchicalSoftmaxLoss) in tests/test_hierarchical_layer.py."""

import pytest
import reference as R
import torch
from sparse_layout import check_gradient, coalesced_rows

import fastsoftmax as fs
from fastsoftmax import functional as FF
from fastsoftmax.ops._checks import on_device

N, D, V = 9, 12, 23
OP = torch.ops.fastsoftmax


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
    # A device's: a row per (row, step) pair, padding steps included (zero rows).
    rows, ids = coalesced_rows(rows, ids, V - 1, nodes.numel())
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
    check_gradient(m.linear_weight.grad, nodes.numel(), on_device(h))
    ref = fs.HierarchicalSoftmaxLoss(D, V, tree=tree).to(device)
    ref.linear_weight.data.copy_(w.detach())
    ref(h.detach(), t).backward()
    torch.testing.assert_close(m.linear_weight.grad.to_dense(), ref.linear_weight.grad)


def test_sparse_gradient_of_ignored_rows_only(device):
    # Every step is padding: a device's rows are all zero, relabelled inner node 0 (its ids
    # must stay in range), so the gradient is zero as the CPU's, which has no rows.
    h, w, _, tree = make_case(device, torch.float32)
    t = torch.full((N,), -100, device=device)
    _, coef, nodes = fs.ops._op("hierarchical_softmax_forward")(
        h, w, t, tree.links, tree.max_depth, -100, True)
    _, rows, ids = fs.ops._op("hierarchical_softmax_backward")(
        torch.ones(N, device=device), h, w, nodes, coef, True)
    if on_device(h):
        assert rows.shape[0] == nodes.numel() and bool((ids == 0).all())
        assert bool((rows == 0).all())
    else:
        assert rows.shape[0] == ids.numel() == 0


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
