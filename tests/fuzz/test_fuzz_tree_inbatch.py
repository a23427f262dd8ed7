"""Property-based tests of hierarchical softmax and in-batch softmax against tests/reference.py.

Hierarchical softmax: Huffman trees of drawn counts (ties, zeros, 1e-300..1e300, sorted or
not), V from 2, empty shapes and D = 0, every dtype and layout, ignore_index patterns, logits
up to the dtype's extreme. In-batch softmax: N from 1 (and 0), colliding ids, extra items,
logQ corrections, temperatures. Properties: loss and gradients within the dtype-derived bound
of loss_cases.py's kind (per row: path length or candidate count x the logit error), no NaN
where the reference has none, the CPU forward and backward bit-identical run to run, and the
hierarchical log_prob of a row sums to 1.
"""

import dataclasses
import math
from typing import Optional

import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import fastsoftmax as fs
import reference as R
from fuzz_support import EXTREME_LOGIT, dtypes, eps, layouts, passed, with_layout
from loss_cases import SAFETY, assert_within

REDUCTIONS = st.sampled_from(["none", "sum", "mean"])
seeds = st.integers(0, 2**32 - 1)


def _rows_of_norm(g, rows, cols, norm):
    x = torch.randn(rows, cols, generator=g, dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-300) * norm


def same_bits(a, b) -> bool:
    def raw(x):
        return torch.empty(x.shape, dtype=x.dtype).copy_(x.detach()).reshape(-1).view(torch.uint8)

    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(raw(a), raw(b))


def row_weights(reduction, upstream, kept):
    """The gradient each row's loss receives from `upstream` (float64 [N])."""
    up = upstream.double()
    if reduction == "none":
        return up.reshape(-1)
    n = kept.numel()
    return up.expand(n) / (kept.sum() if reduction == "mean" else 1)


# ---------------------------------------------------------------------------------------
# hierarchical softmax
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class TreeCase:
    dtype: torch.dtype
    tree: fs.ClassTree
    input: torch.Tensor     # lead + (D,), any layout
    weight: torch.Tensor    # [V - 1, D]
    target: torch.Tensor    # lead
    ignore_index: int
    reduction: str
    upstream: torch.Tensor


wide = st.builds(lambda m, e: m * 10.0**e, st.floats(1.0, 9.99), st.integers(-300, 300))


@st.composite
def tree_cases(draw, max_rows=6):
    dtype = draw(dtypes)
    V = draw(st.integers(2, 12))
    style = draw(st.sampled_from(["ties", "counts", "wide"]))
    element = {"ties": st.integers(0, 3), "counts": st.integers(0, 10**6),
               "wide": st.one_of(wide, st.just(0.0))}[style]
    counts = draw(st.lists(element, min_size=V, max_size=V))
    tree = fs.ClassTree.huffman(torch.tensor(counts, dtype=torch.float64 if style == "wide"
                                             else torch.int64), sort=draw(st.booleans()))
    lead = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
    if len(lead) == 1:
        lead = (draw(st.integers(0, max_rows)),)
    N, D = math.prod(lead), draw(st.integers(0, 8))
    g = torch.Generator().manual_seed(draw(seeds))
    top = draw(st.sampled_from([1e-3, 3.0, EXTREME_LOGIT[dtype]]))
    split = draw(st.floats(0.05, 0.95))
    h = _rows_of_norm(g, N, D, (0.9 * top) ** split)
    w = _rows_of_norm(g, V - 1, D, (0.9 * top) ** (1 - split))
    ignore_index = draw(st.sampled_from([-100, -1, V + 3, 0]))
    target = torch.tensor(draw(st.lists(st.integers(0, V - 1), min_size=N, max_size=N)),
                          dtype=torch.int64)
    ignored = torch.tensor(draw(st.lists(st.booleans(), min_size=N, max_size=N)),
                           dtype=torch.bool)
    target[ignored] = ignore_index
    reduction = draw(REDUCTIONS)
    shape = () if reduction != "none" else lead
    upstream = (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    return TreeCase(
        dtype, tree,
        with_layout(h.to(dtype).requires_grad_(), draw(layouts)).reshape(lead + (D,)),
        with_layout(w.to(dtype).requires_grad_(), draw(layouts)),
        with_layout(target, draw(layouts)).reshape(lead), ignore_index, reduction, upstream)


def tree_bounds(case: TreeCase, row_grad: Optional[torch.Tensor]):
    """(per-row loss bound [N], input-gradient bound, weight-gradient bound). A row's loss is
    a sum over its path of L softplus terms, each 1-Lipschitz in its logit w_j.h, whose error
    is delta = (D + 4) eps sum_d |w_j,d h_d|: as loss_cases.forward_bound with J = L."""
    D = case.input.shape[-1]
    h = case.input.detach().reshape(case.target.numel(), D).double()
    t = case.target.reshape(-1)
    kept = t != case.ignore_index
    _, points = case.tree.paths()
    node = points[torch.where(kept, t, torch.zeros_like(t))]  # [N, L], -1 past the leaf
    valid = (node >= 0) & kept[:, None]
    w_abs = case.weight.detach().double().abs()
    w_path = w_abs[node.clamp_min(0)] * valid[..., None]  # [N, L, D]
    scale = (h.abs()[:, None, :] * w_path).sum(-1)  # [N, L]
    m = scale.amax(1) if scale.shape[1] else torch.zeros(h.shape[0], dtype=torch.float64)
    e, L, N = eps(case.dtype), node.shape[1], h.shape[0]
    delta = (D + 4) * e * m
    rows = SAFETY * (L + 2) * (delta + e * (1 + m)) * kept
    if row_grad is None:
        return rows, None, None
    a = row_grad.abs() * SAFETY * (2 * delta + (L + N + 4) * e)  # [N]
    grad_h = (a[:, None] * w_path.sum(1)).reshape(case.input.shape)
    grad_w = torch.zeros_like(w_abs).index_add_(
        0, node.clamp_min(0).reshape(-1),
        (a[:, None, None] * h.abs()[:, None, :] * valid[..., None]).reshape(N * L, D))
    return rows, grad_h, grad_w


def run_tree(case: TreeCase):
    return fs.hierarchical_softmax_loss(case.input, case.weight, case.target, case.tree,
                                        reduction=case.reduction,
                                        ignore_index=case.ignore_index)


def check_tree(case: TreeCase, repeat_bits: bool = True) -> None:
    ours = run_tree(case)
    assert ours.dtype == case.dtype
    codes, points = case.tree.paths()
    D = case.input.shape[-1]
    t = case.target.reshape(-1)
    ref_rows = R.hierarchical_softmax_reference(case.input.reshape(t.numel(), D), case.weight,
                                                t, codes, points, case.ignore_index)
    kept = t != case.ignore_index
    ref = R.reduce_reference(ref_rows, t[:, None], case.reduction, case.ignore_index)
    rows, _, _ = tree_bounds(case, None)
    e = eps(case.dtype)
    rows = rows + 4 * e * ref_rows.detach().abs()
    if case.reduction == "none":
        ref, bound = ref.reshape(case.target.shape), rows.reshape(case.target.shape)
    else:
        bound = rows.sum() + (t.numel() + 2) * e * ref_rows.detach().abs().sum()
        bound = bound / kept.sum() if case.reduction == "mean" else bound
    assert_within("loss", ours, ref, bound, case.dtype)
    if case.reduction == "mean" and not bool(kept.any()):
        return
    params = [case.input, case.weight]
    ours_g = torch.autograd.grad(ours, params, case.upstream, allow_unused=True)
    ref_g = torch.autograd.grad(ref, params, case.upstream.double(), allow_unused=True)
    _, bound_h, bound_w = tree_bounds(case, row_weights(case.reduction, case.upstream, kept))
    for name, p, a, b, tol in zip(("input", "weight"), params, ours_g, ref_g,
                                  (bound_h, bound_w)):
        a = torch.zeros_like(p) if a is None else a
        assert a.dtype == p.dtype and a.shape == p.shape, name
        assert_within(f"grad {name}", a, b, tol, case.dtype)
    if repeat_bits:
        again = run_tree(case)
        assert same_bits(again, ours)
        for a, b in zip(torch.autograd.grad(again, params, case.upstream, allow_unused=True),
                        ours_g):
            assert (a is None and b is None) or same_bits(a, b)


@given(case=tree_cases())
def test_hierarchical_softmax_loss_matches_reference(case):
    check_tree(case)
    passed("hierarchical_softmax_loss")


@given(case=tree_cases(max_rows=4))
def test_hierarchical_log_prob_sums_to_one(case):
    """HierarchicalSoftmaxLoss.log_prob against the reference, class by class, and
    logsumexp over the classes 0 within the largest per-class bound."""
    V, D = case.tree.num_classes, case.input.shape[-1]
    assume(D > 0)  # the module needs in_features >= 1
    module = fs.HierarchicalSoftmaxLoss(D, V, tree=case.tree, dtype=case.dtype)
    with torch.no_grad():
        module.linear_weight.copy_(case.weight)
    h = case.input.detach()
    ours = module.log_prob(h).reshape(case.target.numel(), V)
    codes, points = case.tree.paths()
    ref = R.hierarchical_log_prob_reference(h.reshape(case.target.numel(), D), case.weight.detach(), codes,
                                            points)
    # Every class's path as a target: the loss bound of its row, for every class.
    every = TreeCase(case.dtype, case.tree, h.reshape(case.target.numel(), D).repeat_interleave(V, 0),
                     case.weight.detach(), torch.arange(V).repeat(ref.shape[0]), -100, "none",
                     case.upstream)
    rows, _, _ = tree_bounds(every, None)
    acc = torch.float64 if case.dtype == torch.float64 else torch.float32
    bound = rows.reshape(-1, V) + 4 * eps(acc) * ref.abs()
    assert_within("log_prob", ours, ref, bound, acc)
    if ref.shape[0]:
        total = torch.logsumexp(ours.double(), 1)
        assert bool((total.abs() <= bound.amax(1) + 4 * V * eps(acc)).all()), total
    passed("HierarchicalSoftmaxLoss.log_prob")


# ---------------------------------------------------------------------------------------
# in-batch softmax
# ---------------------------------------------------------------------------------------


@st.composite
def in_batch_cases(draw):
    dtype = draw(dtypes)
    N, D, M = draw(st.integers(1, 6)), draw(st.integers(0, 6)), draw(st.sampled_from([0, 0, 1, 3]))
    g = torch.Generator().manual_seed(draw(seeds))
    top = draw(st.sampled_from([1e-3, 3.0, EXTREME_LOGIT[dtype]]))
    split = draw(st.floats(0.05, 0.95))
    q = _rows_of_norm(g, N, D, (0.9 * top) ** split)
    c = _rows_of_norm(g, N + M, D, (0.9 * top) ** (1 - split))
    kw = dict(reduction=draw(REDUCTIONS), remove_accidental_hits=draw(st.booleans()),
              temperature=draw(st.sampled_from([0.05, 1.0, 3.0])))
    if draw(st.booleans()):  # few ids: collisions with the positive are common
        ids = st.integers(0, max(1, N // 2))
        kw["item_ids"] = torch.tensor(draw(st.lists(ids, min_size=N, max_size=N)))
        if M:
            kw["extra_ids"] = torch.tensor(draw(st.lists(ids, min_size=M, max_size=M)))
    if M and kw.get("item_ids") is not None and "extra_ids" not in kw:
        kw["remove_accidental_hits"] = False
    if draw(st.booleans()):
        kw["log_q"] = -torch.rand(N, generator=g, dtype=torch.float64) * 20
        if M:
            kw["extra_log_q"] = -torch.rand(M, generator=g, dtype=torch.float64) * 20
    query = with_layout(q.to(dtype).requires_grad_(), draw(layouts))
    items = c.to(dtype).requires_grad_()
    item = with_layout(items[:N], draw(layouts))
    extra = items[N:] if M else None
    shape = () if kw["reduction"] != "none" else (N,)
    upstream = (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    return dtype, query, item, extra, kw, upstream


def in_batch_bounds(query, cands, kw, dtype, row_grad):
    """As loss_cases.forward_bound / backward_bounds with J = N + M candidates per row, the
    logits q.c / T - log_q."""
    q, c = query.detach().double(), cands.detach().double()
    T = kw["temperature"]
    e, (N, D), J = eps(dtype), q.shape, c.shape[0]
    lq = torch.zeros(J, dtype=torch.float64)
    if kw.get("log_q") is not None:
        lq = torch.cat([kw["log_q"]] + ([kw["extra_log_q"]] if J > N else []))
    scale = (q.abs() @ c.abs().T) / T  # [N, J]
    m = (scale + lq.abs()).amax(1)
    delta = (D + 4) * e * scale.amax(1) + 2 * e * lq.abs().max()
    rows = SAFETY * (J + 2) * (delta + e * (1 + m))
    a = row_grad.abs() * SAFETY * (2 * delta + (J + N + 4) * e)
    grad_q = a[:, None] * c.abs().sum(0)[None, :] / T
    grad_c = (a[:, None] * q.abs()).sum(0)[None, :].expand(J, D) / T
    return rows, grad_q, grad_c


def run_in_batch(query, item, extra, kw):
    return fs.in_batch_softmax_loss(query, item, extra_items=extra, **kw)


@given(case=in_batch_cases())
def test_in_batch_softmax_loss_matches_reference(case):
    dtype, query, item, extra, kw, upstream = case
    ours = run_in_batch(query, item, extra, kw)
    assert ours.dtype == dtype
    ref = R.in_batch_softmax_loss(query.double(), item.double(),
                                  extra_items=None if extra is None else extra.double(), **kw)
    cands = item if extra is None else torch.cat([item, extra])
    N, e = query.shape[0], eps(dtype)
    row_grad = row_weights(kw["reduction"], upstream, torch.ones(N, dtype=torch.bool))
    rows, grad_q, grad_c = in_batch_bounds(query, cands, kw, dtype, row_grad)
    ref_rows = R.in_batch_softmax_loss(query.double(), item.double(),
                                       extra_items=None if extra is None else extra.double(),
                                       **dict(kw, reduction="none"))
    rows = rows + 4 * e * ref_rows.detach().abs()
    bound = rows if kw["reduction"] == "none" else (
        rows.sum() + (N + 2) * e * ref_rows.detach().abs().sum()) / (
        N if kw["reduction"] == "mean" else 1)
    assert_within("loss", ours, ref, bound, dtype)
    params = [query, item] + ([extra] if extra is not None else [])
    ours_g = torch.autograd.grad(ours, params, upstream, allow_unused=True)
    ref_g = torch.autograd.grad(ref, params, upstream.double(), allow_unused=True)
    bounds = [grad_q, grad_c[:N]] + ([grad_c[N:]] if extra is not None else [])
    for name, p, a, b, tol in zip(("query", "item", "extra"), params, ours_g, ref_g, bounds):
        assert a.shape == p.shape, name
        assert_within(f"grad {name}", a, b, tol, dtype)
    again = run_in_batch(query, item, extra, kw)
    assert same_bits(again, ours)
    for a, b in zip(torch.autograd.grad(again, params, upstream, allow_unused=True), ours_g):
        assert same_bits(a, b)
    passed("in_batch_softmax_loss")


def test_in_batch_empty_batch_is_nan_mean_and_empty_rows():
    """N = 0: the mean of no rows is NaN (as F.cross_entropy), 'none' is empty, 'sum' is 0."""
    q = torch.zeros(0, 4)
    assert torch.isnan(fs.in_batch_softmax_loss(q, q))
    assert fs.in_batch_softmax_loss(q, q, reduction="none").shape == (0,)
    assert fs.in_batch_softmax_loss(q, q, reduction="sum").item() == 0.0
