"""The margin (hinge) losses against torch.nn.MultiMarginLoss and the float64 references of
tests/reference_margin.py: multi_margin_loss, full and sampled margin ranking, WARP; losses
and gradients, reductions, ignore_index, dtypes and devices (CPU and the CUDA kernels,
emulated or real); gradcheck, opcheck, and the errors of bad input."""

import pytest
import reference as R
import torch

import fastsoftmax as fs
from fastsoftmax import functional as FF

N, D, V, K = 7, 6, 11, 5
SMALL_CHUNK = 4 * 3 * N  # three classes per block: the vocabulary streams in 4 blocks


def make_case(device, dtype=torch.float64, seed=0, ignore=False, bias=True):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(N, D, generator=g, dtype=torch.float64)
    w = torch.randn(V, D, generator=g, dtype=torch.float64) * 0.5
    b = torch.randn(V, generator=g, dtype=torch.float64) * 0.3
    t = torch.randint(0, V, (N,), generator=g)
    neg = torch.randint(0, V, (N, K), generator=g)
    neg[1, 0] = t[1]  # accidental hits: left out of the row
    neg[4, 2] = t[4]
    if ignore:
        t[3] = -100
    cast = dict(device=device, dtype=dtype)
    return dict(h=h.to(**cast).requires_grad_(), w=w.to(**cast).requires_grad_(),
                b=b.to(**cast).requires_grad_() if bias else None, t=t.to(device),
                neg=neg.to(device), cw=torch.rand(V, generator=g, dtype=torch.float64))


def grads(loss, c):
    leaves = [c["h"], c["w"]] + ([c["b"]] if c["b"] is not None else [])
    return torch.autograd.grad(loss.sum(), leaves)


def close(a, b, tol=1e-9):
    torch.testing.assert_close(a.double().cpu(), b.double().cpu(), rtol=tol, atol=tol)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("margin", [1.0, 0.3, -0.2])
def test_multi_margin_matches_torch(device, p, reduction, weighted, margin):
    c = make_case(device)
    cw = c["cw"].to(device) if weighted else None
    ours = FF.multi_margin_loss(c["h"], c["w"], c["t"], linear_bias=c["b"], margin=margin, p=p,
                                weight=cw, reduction=reduction, chunk_bytes=SMALL_CHUNK)
    logits = torch.nn.functional.linear(c["h"], c["w"], c["b"])
    theirs = torch.nn.MultiMarginLoss(p=p, margin=margin, weight=cw, reduction=reduction)(
        logits, c["t"])
    close(ours, theirs)
    for a, b in zip(grads(ours, c), grads(theirs, c)):
        close(a, b)


def test_multi_margin_ignore_index_and_leading_dims(device):
    c = make_case(device, ignore=True)
    h = c["h"].reshape(N, 1, D)
    ours = FF.multi_margin_loss(h, c["w"], c["t"].reshape(N, 1), linear_bias=c["b"], p=2,
                                weight=c["cw"].to(device), reduction="none",
                                chunk_bytes=SMALL_CHUNK)
    assert ours.shape == (N, 1)
    ref = R.multi_margin_reference(c["h"].detach().cpu(), c["w"].detach().cpu(),
                                   c["b"].detach().cpu(), c["t"].cpu(), p=2, class_weight=c["cw"])
    close(ours.reshape(N), ref)
    assert ours[3, 0] == 0
    mean = FF.multi_margin_loss(c["h"], c["w"], c["t"], linear_bias=c["b"], p=2)
    close(mean, R.multi_margin_reference(c["h"].detach().cpu(), c["w"].detach().cpu(),
                                         c["b"].detach().cpu(), c["t"].cpu(), p=2).sum() / (N - 1))


@pytest.mark.parametrize("kind", ["ranking", "ranking_mean", "warp"])
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_sampled_losses_match_reference(device, kind, shared, bias):
    c = make_case(device, ignore=True, bias=bias)
    neg = c["neg"][1] if shared else c["neg"]  # row 1's negatives hold its target
    b = c["b"]
    if kind == "warp":
        loss = FF.warp_loss(c["h"], c["w"], c["t"], sampled=neg, linear_bias=b, margin=0.8,
                            reduction="none")
        ref_fn = lambda h, w, b: R.warp_reference(h, w, b, c["t"].cpu(), neg.cpu(), 0.8)  # noqa
    else:
        mean = kind == "ranking_mean"
        loss = FF.sampled_margin_ranking_loss(
            c["h"], c["w"], c["t"], sampled=neg, linear_bias=b, margin=0.8, reduction="none",
            negatives_reduction="mean" if mean else "sum")
        ref_fn = lambda h, w, b: R.ranking_reference(h, w, b, c["t"].cpu(), neg.cpu(), 0.8,  # noqa
                                                     mean=mean)
    leaves = [x.detach().cpu().requires_grad_() for x in (c["h"], c["w"])]
    bias_leaf = b.detach().cpu().requires_grad_() if bias else None
    ref = ref_fn(*leaves, bias_leaf)
    close(loss, ref)
    assert loss[3] == 0  # the ignored row
    ref_grads = torch.autograd.grad(ref.sum(), leaves + ([bias_leaf] if bias else []))
    for a, r in zip(grads(loss, c), ref_grads):
        close(a, r)


@pytest.mark.parametrize("kind", ["ranking", "warp"])
def test_exact_losses_match_reference(device, kind):
    c = make_case(device, ignore=True)
    fn = FF.full_margin_ranking_loss if kind == "ranking" else FF.full_warp_loss
    ref_fn = R.full_ranking_reference if kind == "ranking" else R.full_warp_reference
    loss = fn(c["h"], c["w"], c["t"], linear_bias=c["b"], margin=0.7, reduction="none",
              chunk_bytes=SMALL_CHUNK)
    leaves = [x.detach().cpu().requires_grad_() for x in (c["h"], c["w"], c["b"])]
    ref = ref_fn(*leaves, c["t"].cpu(), 0.7)
    close(loss, ref)
    for a, r in zip(grads(loss, c), torch.autograd.grad(ref.sum(), leaves)):
        close(a, r)
    whole = fn(c["h"], c["w"], c["t"], linear_bias=c["b"], margin=0.7)  # one block
    close(whole, ref.sum() / (N - 1))


def test_warp_rank_weight_beyond_the_exact_sum():
    """V = 1001: L(floor(1000 / N)) up to L(1000), past the r <= 64 exact sum (asymptotic
    series there)."""
    g = torch.Generator().manual_seed(3)
    Vb = 1001
    h = torch.randn(4, 3, generator=g, dtype=torch.float64)
    w = torch.randn(Vb, 3, generator=g, dtype=torch.float64)
    t = torch.tensor([0, 1, 2, 3])
    neg = torch.randint(4, Vb, (4, 40), generator=g)
    loss = FF.warp_loss(h, w, t, sampled=neg, margin=5.0, reduction="none")  # first violates
    close(loss, R.warp_reference(h, w, None, t, neg, 5.0), tol=1e-12)
    assert R.harmonic_reference(1000) == pytest.approx(7.485470860550345, rel=1e-15)


def test_gradcheck_float64():
    c = make_case("cpu", ignore=True)
    t, neg = c["t"], c["neg"]
    cases = [
        lambda h, w, b: FF.multi_margin_loss(h, w, t, linear_bias=b, p=2, margin=0.9,
                                             weight=c["cw"], chunk_bytes=SMALL_CHUNK),
        lambda h, w, b: FF.multi_margin_loss(h, w, t, linear_bias=b, reduction="none"),
        lambda h, w, b: FF.sampled_margin_ranking_loss(h, w, t, sampled=neg, linear_bias=b,
                                                       reduction="sum"),
        lambda h, w, b: FF.sampled_margin_ranking_loss(h, w, t, sampled=neg[0], linear_bias=b,
                                                       negatives_reduction="mean"),
        lambda h, w, b: FF.warp_loss(h, w, t, sampled=neg, linear_bias=b, margin=0.5),
        lambda h, w, b: FF.full_margin_ranking_loss(h, w, t, linear_bias=b,
                                                    chunk_bytes=SMALL_CHUNK),
        lambda h, w, b: FF.full_warp_loss(h, w, t, linear_bias=b, chunk_bytes=SMALL_CHUNK),
    ]
    for fn in cases:
        assert torch.autograd.gradcheck(fn, (c["h"], c["w"], c["b"]))


def _op_args(device, dtype, mode, shared):
    g = torch.Generator().manual_seed(5)
    s = torch.randn(N, K, generator=g).to(device=device, dtype=dtype)
    ts = torch.randn(N, generator=g).to(device=device, dtype=dtype)
    t = torch.randint(0, V, (N,), generator=g)
    t[2] = -100
    cand = torch.randint(0, V, (K,) if shared else (N, K), generator=g)
    return s, ts, t.to(device), cand.to(device), 0.6, 2 if mode == 0 else 1, mode, V, -100


@pytest.mark.parametrize("mode", [fs.ops.MODE_HINGE, fs.ops.MODE_WARP])
@pytest.mark.parametrize("shared", [False, True])
def test_opcheck(device, mode, shared):
    args = _op_args(device, torch.float32, mode, shared)
    s, ts = args[0].requires_grad_(), args[1].requires_grad_()
    torch.library.opcheck(fs.ops._overload("margin_rank_forward"), (s, ts) + args[2:])
    g = torch.rand(N, device=device)
    torch.library.opcheck(fs.ops._overload("margin_rank_backward"),
                          (g, s.detach(), ts.detach()) + args[2:])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("mode", [fs.ops.MODE_HINGE, fs.ops.MODE_WARP])
def test_low_precision_accumulates_in_float32(device, dtype, mode):
    args = _op_args(device, dtype, mode, False)
    s, ts = args[0], args[1]
    loss = fs.ops.margin_rank_forward(*args)
    assert loss.dtype == torch.float32
    # The op's own float32 maths on the rounded scores: the low-precision storage costs
    # nothing beyond the inputs' rounding.
    want = fs.ops.margin_rank_forward(s.float(), ts.float(), *args[2:])
    close(loss, want, tol=1e-6)
    gs, gt = fs.ops._op("margin_rank_backward")(torch.ones(N, device=device), *args)
    assert gs.dtype == dtype and gt.dtype == dtype
    ws, wt = fs.ops._op("margin_rank_backward")(torch.ones(N, device=device), s.float(),
                                               ts.float(), *args[2:])
    tol = 1e-2 if dtype != torch.float32 else 1e-6
    close(gs, ws, tol=tol)
    close(gt, wt, tol=tol)


def test_cuda_kernels_match_cpu_bit_for_bit_per_column(cuda_backend):
    """Per column (the gradient of each score, WARP's loss) the CUDA kernels compute what the
    CPU does; the row sums differ only by summation order."""
    device, enter = cuda_backend
    for mode in (fs.ops.MODE_HINGE, fs.ops.MODE_WARP):
        for shared in (False, True):
            args = _op_args("cpu", torch.float32, mode, shared)
            cpu = fs.ops.margin_rank_forward(*args)
            g = torch.rand(N)
            cpu_grads = fs.ops._op("margin_rank_backward")(g, *args)
            moved = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
            with enter():
                gpu = fs.ops.margin_rank_forward(*moved).cpu()
                gpu_grads = fs.ops._op("margin_rank_backward")(g.to(device), *moved)
            torch.testing.assert_close(gpu, cpu, rtol=1e-6, atol=1e-6)
            assert torch.equal(gpu_grads[0].cpu(), cpu_grads[0])
            torch.testing.assert_close(gpu_grads[1].cpu(), cpu_grads[1], rtol=1e-6, atol=1e-6)


def test_bad_input_is_a_clear_error(device):
    c = make_case(device)
    h, w, t, neg = c["h"], c["w"], c["t"], c["neg"]
    bad_t = t.clone()
    bad_t[0] = V
    with pytest.raises(ValueError, match=r"target ids must lie in \[0, 11\)"):
        FF.multi_margin_loss(h, w, bad_t)
    with pytest.raises(ValueError, match=r"target ids must lie in \[0, 11\)"):
        FF.sampled_margin_ranking_loss(h, w, bad_t, sampled=neg)
    with pytest.raises(ValueError, match="p must be 1 or 2"):
        FF.multi_margin_loss(h, w, t, p=3)
    with pytest.raises(ValueError, match="p must be 1 or 2"):
        FF.multi_margin_loss(h, w, t, p=True)
    with pytest.raises(ValueError, match="margin must be a finite number >= 0"):
        FF.sampled_margin_ranking_loss(h, w, t, sampled=neg, margin=-1.0)
    with pytest.raises(ValueError, match="margin must be a finite number"):
        FF.multi_margin_loss(h, w, t, margin=float("nan"))
    with pytest.raises(ValueError, match="features per class"):
        FF.multi_margin_loss(h[:, :3], w, t)
    with pytest.raises(ValueError, match="target must have shape"):
        FF.warp_loss(h, w, t[:3], sampled=neg)
    with pytest.raises(ValueError, match=r"sampled must have shape \(7, 'K'\)"):
        FF.warp_loss(h, w, t, sampled=neg[:3])
    bad_neg = neg.clone()
    bad_neg[2, 1] = -1
    with pytest.raises(ValueError, match=r"sampled ids must lie in \[0, 11\)"):
        FF.sampled_margin_ranking_loss(h, w, t, sampled=bad_neg)
    with pytest.raises(TypeError, match="sampled must be an int64 tensor"):
        FF.warp_loss(h, w, t, sampled=neg.float())
    with pytest.raises(ValueError, match="give either num_sampled"):
        FF.sampled_margin_ranking_loss(h, w, t)
    with pytest.raises(ValueError, match="num_sampled=3 but sampled holds 5"):
        FF.sampled_margin_ranking_loss(h, w, t, num_sampled=3, sampled=neg)
    with pytest.raises(ValueError, match="negatives_reduction must be one of"):
        FF.sampled_margin_ranking_loss(h, w, t, sampled=neg, negatives_reduction="max")
    with pytest.raises(ValueError, match="weight must be a floating 1-D tensor"):
        FF.multi_margin_loss(h, w, t, weight=torch.ones(V + 1, device=device))
    with pytest.raises(ValueError, match="linear_bias must have shape"):
        FF.multi_margin_loss(h, w, t, linear_bias=torch.zeros(V - 1, device=device))
    with pytest.raises(TypeError, match="unexpected keyword argument 'gamma'"):
        FF.sampled_margin_ranking_loss(h, w, t, sampled=neg, gamma=1.0)
    with pytest.raises(ValueError, match="sampler draws from 4 classes"):
        FF.warp_loss(h, w, t, num_sampled=2, sampler=fs.UniformSampler(4))


def test_op_checks_before_any_kernel(device):
    args = list(_op_args(device, torch.float32, fs.ops.MODE_HINGE, False))
    op = fs.ops._op("margin_rank_forward")
    with pytest.raises(ValueError, match="p must be 1 or 2, got 3"):
        op(*args[:5], 3, *args[6:])
    with pytest.raises(ValueError, match="unknown margin-loss mode 7"):
        op(*args[:6], 7, *args[7:])
    with pytest.raises(ValueError, match=r"candidates must be \[C\] \(shared\) or \[N, C\]"):
        op(args[0], args[1], args[2], args[3][:, :2], *args[4:])
    bad = args[3].clone()
    bad[0, 0] = V
    with pytest.raises(ValueError, match=r"candidates ids must lie in \[0, 11\)"):
        op(args[0], args[1], args[2], bad, *args[4:])
    with pytest.raises(TypeError, match="target_score and scores must have the same dtype"):
        op(args[0], args[1].double(), *args[2:])


@pytest.mark.parametrize("bias", [False, True])
def test_row_scores_op(device, bias):
    """The fused gather-dots of per-row candidates against gather + bmm, gradients included
    (repeated ids: their weight gradients add), and opcheck."""
    c = make_case(device, dtype=torch.float32, bias=bias)
    ids = torch.cat([c["neg"], c["neg"][:, :2]], 1)  # every row repeats two candidates
    b = c["b"]
    s = fs.ops.row_scores(c["h"], c["w"], b, ids)
    want = torch.bmm(c["w"][ids], c["h"].unsqueeze(2)).squeeze(2)
    want = want + b[ids] if bias else want
    close(s, want, tol=1e-5)
    g = torch.rand_like(s)
    for a, r in zip(grads(s * g, c), grads(want * g, c)):
        close(a, r, tol=1e-5)
    args = (c["h"], c["w"], b, ids)
    torch.library.opcheck(fs.ops._overload("row_scores_forward"), args)
    torch.library.opcheck(fs.ops._overload("row_scores_backward"),
                          (g, c["h"].detach(), c["w"].detach(), ids, bias, False))


def test_row_scores_weight_gradient_deterministic_on_cuda(cuda_backend):
    """Under torch.use_deterministic_algorithms the CUDA weight gradient is the sorted
    scatter's: bit-identical run to run, and equal to the CPU's within float rounding."""
    device, enter = cuda_backend
    c = make_case("cpu", dtype=torch.float32)
    h, w, ids = c["h"].detach(), c["w"].detach(), c["neg"]
    g = torch.rand(N, K)
    cpu = fs.ops._op("row_scores_backward")(g, h, w, ids, True, True)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with enter():
            runs = [fs.ops._op("row_scores_backward")(g.to(device), h.to(device), w.to(device),
                                                      ids.to(device), True, True)
                    for _ in range(2)]
    finally:
        torch.use_deterministic_algorithms(before)
    assert all(torch.equal(a, b) for a, b in zip(*runs))
    for a, b in zip(runs[0], cpu):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-6, atol=1e-6)
