"""Property-based tests of the margin ops (margin_rank_forward / _backward, row_scores_forward
/ _backward) against a reference that does the CPU kernel's arithmetic one step at a time in
the accumulation dtype (numpy float32 or float64 scalars), so that the CPU results can be
asserted bit for bit: hinge sums in column order, WARP's first violator and its weight
L(floor((V - 1) / N)) (summed from the small terms up to r = 64, the asymptotic series
beyond), every score's gradient. Drawn: every dtype and layout, N and C from 0, V from 1,
per-row or shared candidates with accidental hits, ignored rows, scores on a grid of halves
(so that z = margin - s_y + s_j hits 0 exactly) or spread widely, any finite margin.

The emulated CUDA kernels must give the same bits for WARP and for every score's gradient;
their row sums (a block reduction) agree within a summation-order bound."""

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_emulator import AVAILABLE as EMULATED, emulated_cuda
from fastsoftmax import ops
from fuzz_support import dtypes, layouts, passed, with_layout

seeds = st.integers(0, 2**32 - 1)


def harmonic(r: int) -> float:
    """csrc/common/margin_math.h's harmonic(r), operation for operation."""
    if r <= 0:
        return 0.0
    if r <= 64:
        s = 0.0
        for i in range(r, 0, -1):
            s += 1.0 / i
        return s
    x = float(r)
    x2 = 1.0 / (x * x)
    return math.log(x) + 0.57721566490153286061 + 0.5 / x - \
        x2 * (1.0 / 12 - x2 * (1.0 / 120 - x2 * (1.0 / 252)))


def margin_reference(scores, target_score, target, cand, margin, p, mode, V, grad, ignore):
    """(loss [N], grad_scores [N, C], grad_target [N]) in the accumulation dtype, as numpy."""
    acc = np.float64 if scores.dtype == torch.float64 else np.float32
    tacc = torch.float64 if acc is np.float64 else torch.float32
    s, ts = scores.to(tacc).numpy(), target_score.to(tacc).numpy()
    g = grad.to(tacc).numpy()
    N, C = s.shape
    loss, gs, gt = np.zeros(N, acc), np.zeros((N, C), acc), np.zeros(N, acc)
    for n in range(N):
        y = int(target[n])
        if y == ignore:
            continue
        row = (cand[n] if cand.dim() == 2 else cand).tolist()
        base = acc(margin) - ts[n]
        if mode == ops.MODE_WARP:
            trials = 0
            for j in range(C):
                if row[j] == y:
                    continue
                trials += 1
                z = base + s[n, j]
                if z > 0:
                    w = acc(harmonic((V - 1) // trials))
                    loss[n], gs[n, j] = w * z, g[n] * w
                    gt[n] = -gs[n, j]
                    break
            continue
        total = acc(0)
        for j in range(C):
            if row[j] == y:
                continue
            z = base + s[n, j]
            if z > 0:
                loss[n] += acc(1) if p == 0 else (z if p == 1 else z * z)
                gs[n, j] = g[n] * (acc(1) if p == 1 else (acc(2) * z if p == 2 else acc(0)))
                total += gs[n, j]
        gt[n] = -total
    return loss, gs, gt


@st.composite
def margin_cases(draw):
    g = torch.Generator().manual_seed(draw(seeds))
    dtype = draw(dtypes)
    N, C, V = draw(st.integers(0, 5)), draw(st.integers(0, 10)), draw(st.integers(1, 12))
    mode = draw(st.sampled_from([ops.MODE_HINGE, ops.MODE_WARP]))
    p = draw(st.sampled_from([0, 1, 2])) if mode == ops.MODE_HINGE else 1
    on_grid = draw(st.booleans())
    if on_grid:  # halves: z = 0 exactly on some columns
        scores = torch.randint(-6, 7, (N, C), generator=g) / 2.0
        target_score = torch.randint(-6, 7, (N,), generator=g) / 2.0
        margin = draw(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.5]))
    else:
        scale = draw(st.sampled_from([1e-3, 1.0, 30.0]))
        scores = torch.randn(N, C, generator=g, dtype=torch.float64) * scale
        target_score = torch.randn(N, generator=g, dtype=torch.float64) * scale
        margin = draw(st.floats(-3, 3, allow_nan=False))
    scores = with_layout(scores.to(dtype), draw(layouts))
    shared = draw(st.booleans())
    cand = torch.randint(0, V, (C,) if shared else (N, C), generator=g)
    target = torch.randint(0, V, (N,), generator=g)
    if N and C and not shared:
        cand[0, 0] = target[0]  # an accidental hit
    if N > 1 and draw(st.booleans()):
        target[1] = -100
    grad = torch.rand(N, generator=g, dtype=torch.float64) * 2
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    return (scores, target_score.to(dtype), target, cand, margin, p, mode, V, grad.to(acc))


def run(case):
    scores, ts, target, cand, margin, p, mode, V, grad = case
    args = (scores, ts, target, cand, margin, p, mode, V, -100)
    loss = ops.margin_rank_forward(*args)
    gs, gt = ops._op("margin_rank_backward")(grad, *args)
    return loss, gs, gt


def check(case, exact_sums):
    scores, ts, target, cand, margin, p, mode, V, grad = case
    loss, gs, gt = run(case)
    ref_loss, ref_gs, ref_gt = margin_reference(scores, ts, target, cand, margin, p, mode, V,
                                                grad, -100)
    assert loss.dtype == grad.dtype and gs.dtype == scores.dtype and gt.dtype == ts.dtype
    assert torch.equal(gs, torch.from_numpy(ref_gs).to(scores.dtype))
    if exact_sums or mode == ops.MODE_WARP:
        assert torch.equal(loss, torch.from_numpy(ref_loss))
        assert torch.equal(gt, torch.from_numpy(ref_gt).to(ts.dtype))
        return
    # A row sum in another order: within C rounding steps of the sum of |terms|.
    eps = torch.finfo(grad.dtype).eps
    C = max(scores.shape[1], 1)
    bound = 2 * C * eps * torch.from_numpy(np.abs(ref_gs)).double().sum(1)
    assert bool(((gt.double() - torch.from_numpy(ref_gt).double()).abs()
                 <= bound + torch.finfo(ts.dtype).eps * torch.from_numpy(ref_gt).abs()).all())
    z = (margin - ts.double())[:, None] + scores.double()
    terms = torch.where(z > 0, z.clamp_min(0) ** max(p, 1) if p else torch.ones_like(z), 0)
    bound = 2 * C * eps * (terms.sum(1) + 1e-30)
    assert bool(((loss.double() - torch.from_numpy(ref_loss).double()).abs() <= bound).all())


@given(case=margin_cases())
def test_margin_ops_equal_the_reference_bit_for_bit_on_cpu(case):
    check(case, exact_sums=True)
    again = run(case)  # and again: the same bits
    first = run(case)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    passed("margin_rank_forward/backward")


@settings(max_examples=max(10, settings().max_examples // 10))
@given(case=margin_cases())
def test_emulated_margin_ops_match_the_reference(case):
    if not EMULATED:
        return
    with emulated_cuda():
        check(case, exact_sums=False)
    passed("cuda_emu: margin_rank_forward/backward")


@given(seed=seeds, dtype=dtypes, layout=layouts, n=st.integers(0, 5), k=st.integers(0, 6),
       v=st.integers(1, 9), d=st.integers(0, 7), bias=st.booleans())
def test_row_scores_within_rounding_of_float64(seed, dtype, layout, n, k, v, d, bias):
    g = torch.Generator().manual_seed(seed)
    h = with_layout(torch.randn(n, d, generator=g, dtype=torch.float64).to(dtype), layout)
    w = torch.randn(v, d, generator=g, dtype=torch.float64).to(dtype)
    b = torch.randn(v, generator=g, dtype=torch.float64).to(dtype) if bias else None
    ids = torch.randint(0, v, (n, k), generator=g)
    s = ops.row_scores(h, w, b, ids)
    h64, w64 = h.double(), w.double()
    want = torch.einsum("nd,nkd->nk", h64, w64[ids]) + (b.double()[ids] if bias else 0)
    eps = torch.finfo(s.dtype).eps
    size = torch.einsum("nd,nkd->nk", h64.abs(), w64[ids].abs()) + (
        b.double()[ids].abs() if bias else 0)
    assert bool(((s.double() - want).abs() <= 2 * (d + 1) * eps * size + 1e-300).all())
    grad = torch.rand(n, k, generator=g, dtype=torch.float64).to(s.dtype)
    first = ops._op("row_scores_backward")(grad, h, w, ids, bias, False)
    again = ops._op("row_scores_backward")(grad, h, w, ids, bias, False)
    assert all(torch.equal(a, c) for a, c in zip(first, again))
    gw = torch.zeros(v, d, dtype=torch.float64).index_add_(
        0, ids.reshape(-1), (grad.double()[:, :, None] * h64[:, None, :]).reshape(n * k, d))
    gw_size = torch.zeros(v, d, dtype=torch.float64).index_add_(
        0, ids.reshape(-1), (grad.double().abs()[:, :, None] * h64.abs()[:, None, :])
        .reshape(n * k, d))
    tol = 2 * (n * k + 1) * eps + torch.finfo(dtype).eps
    subnormal_step = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps
    assert bool(((first[1].double() - gw).abs() <= tol * gw_size + subnormal_step).all())
    passed("row_scores_forward/backward")
