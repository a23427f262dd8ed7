"""Sampled softmax, NCE and negative-sampling losses against the float64 reference of
tests/reference.py, with injected samples: losses and every gradient, reductions, num_true,
accidental hits, ignore_index, dtypes and devices; gradcheck and opcheck of every op."""

import pytest
import reference as R
import torch
from sparse_layout import coalesced_rows

import fastsoftmax as fs
from fastsoftmax import functional as FF

N, D, V, S, K = 7, 16, 50, 12, 4
REDUCTIONS = ["mean", "sum", "none"]


def make_case(device, dtype=torch.float32, num_true=1, ignore=False, seed=0, hits=True):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(N, D, generator=g, dtype=torch.float64)
    w = torch.randn(V, D, generator=g, dtype=torch.float64) * 0.5
    b = torch.randn(V, generator=g, dtype=torch.float64)
    target = torch.randint(0, V, (N, num_true), generator=g)
    sampler = fs.LogUniformSampler(V)
    sampled = sampler.candidates(target, S, generator=g)
    if hits:  # make sure accidental hits exist: put two true classes among the candidates
        cand = sampled.sampled_candidates.clone()
        cand[0], cand[1] = target[0, 0], target[3, num_true - 1]
        cand = torch.unique_consecutive(cand)  # still distinct in practice; keep order
        if cand.numel() == S:
            sampled = sampled._replace(
                sampled_candidates=cand, sampled_expected_count=S * sampler.log_prob(cand).exp()
            )
    if ignore:
        target[2] = -100
        target[5] = -100
    negatives = torch.randint(0, V, (N, K), generator=g)
    negatives[1, 0] = target[1, 0]  # a negative equal to the target is kept, as the formula
    cast = dict(device=device, dtype=dtype)
    sampled = fs.SampledValues(*(t.to(device) for t in sampled))
    return dict(
        h=h.to(**cast).requires_grad_(), w=w.to(**cast).requires_grad_(),
        b=b.to(**cast).requires_grad_(), target=target.to(device), sampled=sampled,
        negatives=negatives.to(device),
    )


def run_ours(kind, c, reduction, num_true, hits=True, log_z=0.0, bias=True, shared=False):
    t = c["target"] if num_true > 1 else c["target"][:, 0]
    b = c["b"] if bias else None
    if kind == "softmax":
        return FF.sampled_softmax_loss(c["h"], c["w"], t, linear_bias=b, sampled=c["sampled"],
                                       num_true=num_true, remove_accidental_hits=hits,
                                       reduction=reduction)
    if kind == "nce":
        return FF.nce_loss(c["h"], c["w"], t, linear_bias=b, sampled=c["sampled"],
                           num_true=num_true, remove_accidental_hits=hits, log_z=log_z, reduction=reduction)
    neg = c["negatives"][0] if shared else c["negatives"]
    return FF.negative_sampling_loss(c["h"], c["w"], t, negatives=neg, reduction=reduction)


def run_reference(kind, c, reduction, hits=True, log_z=0.0, bias=True, shared=False,
                  dtype=torch.float64):
    t = c["target"]
    cand, tq, sq = c["sampled"]
    tq = tq.reshape(t.shape)
    h, w = c["h"], c["w"]
    b = c["b"] if bias else None
    if kind == "softmax":
        loss = R.sampled_softmax_reference(h, w, b, t, cand, tq, sq, hits, dtype=dtype)
    elif kind == "nce":
        loss = R.nce_reference(h, w, b, t, cand, tq, sq, hits, log_z, dtype=dtype)
    else:
        neg = c["negatives"][0] if shared else c["negatives"]
        loss = R.negative_sampling_reference(h, w, t, neg, dtype=dtype)
    return R.reduce_reference(loss, t, reduction)


def grads(loss, c, kind, bias=True):
    params = [c["h"], c["w"]] + ([c["b"]] if kind != "negsamp" and bias else [])
    weight = torch.linspace(0.5, 1.5, loss.numel(), dtype=loss.dtype, device=loss.device)
    return torch.autograd.grad((loss.reshape(-1) * weight).sum(), params)


CASES = [
    ("softmax", True), ("softmax", False), ("nce", True), ("nce", False), ("negsamp", False)
]


@pytest.mark.parametrize("kind,hits", CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("num_true", [1, 3])
@pytest.mark.parametrize("ignore", [False, True])
def test_matches_reference(device, kind, hits, reduction, num_true, ignore):
    c = make_case(device, num_true=num_true, ignore=ignore)
    ours = run_ours(kind, c, reduction, num_true, hits)
    ref = run_reference(kind, c, reduction, hits)
    assert ours.dtype == torch.float32
    assert ours.shape == ref.shape == ((N,) if reduction == "none" else ())
    torch.testing.assert_close(ours.double(), ref, rtol=1e-5, atol=1e-5)
    ours_grads = grads(ours, c, kind)
    for a, b in zip(ours_grads, grads(ref, c, kind)):
        torch.testing.assert_close(a.double(), b.double(), rtol=1e-4, atol=1e-5)
    if ignore:
        assert bool((ours_grads[0][[2, 5]] == 0).all())


@pytest.mark.parametrize("kind", ["softmax", "nce", "negsamp"])
def test_no_bias_shared_negatives_and_log_z(device, kind):
    c = make_case(device, num_true=1)
    ours = run_ours(kind, c, "sum", 1, log_z=1.5, bias=False, shared=True)
    ref = run_reference(kind, c, "sum", log_z=1.5, bias=False, shared=True)
    torch.testing.assert_close(ours.double(), ref, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads(ours, c, kind, bias=False), grads(ref, c, kind, bias=False)):
        torch.testing.assert_close(a.double(), b.double(), rtol=1e-4, atol=1e-5)


def test_leading_dims_and_learnable_log_z(device):
    c = make_case(device)
    h3 = c["h"].detach()[:6].reshape(2, 3, D).requires_grad_()
    t3 = c["target"][:6, 0].reshape(2, 3)
    log_z = torch.tensor(0.7, device=device, requires_grad=True)
    ours = FF.nce_loss(h3, c["w"], t3, linear_bias=c["b"], sampled=c["sampled"][:1] + (
        c["sampled"][1][:6], c["sampled"][2]), log_z=log_z, reduction="none")
    assert ours.shape == (2, 3)
    ours.sum().backward()
    log_z64 = log_z.detach().double().requires_grad_()
    ref = R.nce_reference(h3.reshape(6, D), c["w"], c["b"], c["target"][:6], c["sampled"][0],
                          c["sampled"][1][:6], c["sampled"][2], False, log_z64)
    ref.sum().backward()
    torch.testing.assert_close(ours.reshape(-1).double(), ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(log_z.grad.double(), log_z64.grad, rtol=1e-4, atol=1e-5)


def test_extreme_logits_are_finite(device):
    c = make_case(device)
    for key in ("h", "w"):
        c[key] = (c[key].detach() * 300).requires_grad_()
    for kind in ("softmax", "nce", "negsamp"):
        loss = run_ours(kind, c, "sum", 1)
        ref = run_reference(kind, c, "sum")
        assert torch.isfinite(loss)
        torch.testing.assert_close(loss.double(), ref, rtol=1e-4, atol=1e-2)
        assert all(bool(torch.isfinite(g).all()) for g in grads(loss, c, kind))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["softmax", "nce", "negsamp"])
def test_low_precision_within_torch_error(device, dtype, kind):
    """Our fp16/bf16 error (float32 accumulation) is judged against the error of the same
    reference computed by plain PyTorch in that dtype."""
    c = make_case(device, dtype=dtype, num_true=3)
    ours = run_ours(kind, c, "none", 3)
    ref = run_reference(kind, c, "none")
    plain = run_reference(kind, c, "none", dtype=dtype)
    assert ours.dtype == dtype

    def err(x, y):
        x, y = x.detach().double(), y.detach().double()
        return float((x - y).abs().max() / y.abs().max())

    assert err(ours, ref) <= 2 * err(plain, ref) + 1e-3
    for a, b, p in zip(grads(ours, c, kind), grads(ref, c, kind), grads(plain, c, kind)):
        assert a.dtype == dtype
        assert err(a, b) <= 2 * err(p, b) + 2e-3


def test_gradcheck_float64():
    c = make_case("cpu", dtype=torch.float64, num_true=3, ignore=True)
    cand, tq, sq = c["sampled"]
    log_z = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)

    def softmax(h, w, b):
        return FF.sampled_softmax_loss(h, w, c["target"], linear_bias=b, sampled=(cand, tq, sq),
                                       num_true=3, reduction="none")

    def nce(h, w, b, z):
        return FF.nce_loss(h, w, c["target"], linear_bias=b, sampled=(cand, tq, sq), num_true=3,
                           log_z=z, remove_accidental_hits=True, reduction="sum")

    def negsamp(h, w):
        return FF.negative_sampling_loss(h, w, c["target"], negatives=c["negatives"],
                                         reduction="mean")

    assert torch.autograd.gradcheck(softmax, (c["h"], c["w"], c["b"]))
    assert torch.autograd.gradcheck(nce, (c["h"], c["w"], c["b"], log_z))
    assert torch.autograd.gradcheck(negsamp, (c["h"], c["w"]))


def _op_samples(device, dtype):
    c = make_case(device, dtype=dtype, num_true=3, ignore=True)
    h, w, b = c["h"], c["w"], c["b"]
    t = c["target"]
    cand, tq, sq = c["sampled"]
    z = torch.tensor(0.2, device=device)
    ns = fs.ops.negative_sampling_forward
    sl = fs.ops.sampled_logits_forward
    return c, [
        (fs.ops._overload("negative_sampling_forward"),
         (h, w, t, c["negatives"], -100, False, True)),
        (fs.ops._overload("negative_sampling_forward"),
         (h, w, t, c["negatives"][0], -100, True, True)),
        (fs.ops._overload("negative_sampling_forward"),  # eval: no gradient pieces
         (h.detach(), w.detach(), t, c["negatives"], -100, False, False)),
        (fs.ops._overload("sampled_logits_forward"),
         (h, w, b, t, cand, tq.reshape(t.shape), sq, z, 0, True, -100, False, True)),
        (fs.ops._overload("sampled_logits_forward"),
         (h, w, None, t, cand, tq.reshape(t.shape), sq, z, 1, False, -100, True, True)),
        (fs.ops._overload("sampled_logits_forward"),  # eval: no gradient pieces
         (h.detach(), w.detach(), b.detach(), t, cand, tq.reshape(t.shape), sq, z, 0, True,
          -100, False, False)),
    ], ns, sl


def test_opcheck(device):
    c, cases, _, _ = _op_samples(device, torch.float32)
    for op, args in cases:
        torch.library.opcheck(op, args)
    h, w, t = c["h"].detach(), c["w"].detach(), c["target"]
    loss, coef = fs.ops._op("negative_sampling_forward")(h, w, t, c["negatives"], -100,
                                                                  False, True)
    g = torch.rand_like(loss)
    torch.library.opcheck(fs.ops._overload("negative_sampling_backward"),
                          (g, h, w, t, c["negatives"], coef, -100, False))
    cand, tq, sq = c["sampled"]
    z = torch.tensor(0.0, device=device)
    loss, gl, gt = fs.ops._op("sampled_logits_forward")(
        h, w, c["b"].detach(), t, cand, tq.reshape(t.shape), sq, z, 0, True, -100, False, True)
    torch.library.opcheck(fs.ops._overload("sampled_logits_backward"),
                          (g, h, w, t, cand, gl, gt, True, -100, False))


def test_opcheck_sparse_backward(device):
    c, _, _, _ = _op_samples(device, torch.float32)
    h, w, t = c["h"].detach(), c["w"].detach(), c["target"]
    loss, coef = fs.ops._op("negative_sampling_forward")(h, w, t, c["negatives"], -100,
                                                                  True, True)
    args = (torch.rand_like(loss), h, w, t, c["negatives"], coef, -100, True)
    torch.library.opcheck(fs.ops._overload("negative_sampling_backward"), args)
    cand, tq, sq = c["sampled"]
    z = torch.tensor(0.0, device=device)
    _, gl, gt = fs.ops._op("sampled_logits_forward")(
        h, w, c["b"].detach(), t, cand, tq.reshape(t.shape), sq, z, 0, True, -100, True, True)
    torch.library.opcheck(fs.ops._overload("sampled_logits_backward"),
                          (args[0], h, w, t, cand, gl, gt, True, -100, True))
    _, rows, ids = fs.ops._op("negative_sampling_backward")(*args)
    dense = fs.ops._op("negative_sampling_backward")(*args[:-1], False)[1]
    rows, ids = coalesced_rows(rows, ids, V, t.numel() + c["negatives"].numel())
    # Bit for bit on the CPU. CUDA's dense path adds the rows' contributions with atomics, in
    # arrival order, so the two sum in different orders there (seen: 1 ulp on an H200).
    exact = torch.device(device).type == "cpu"
    torch.testing.assert_close(rows, dense[ids], rtol=0 if exact else 1e-5,
                               atol=0 if exact else 1e-6)
    untouched = torch.ones(V, dtype=torch.bool, device=device)
    untouched[ids] = False
    assert bool((dense[untouched] == 0).all())


def test_loss_candidates_are_the_samplers_candidates():
    """The losses draw through the sampler's own candidate code: same ids, same expected
    counts (TF's shortcut included), same refusal of impossible unique draws."""
    import fastsoftmax.functional as FF

    sampler = fs.UnigramSampler(torch.tensor([5.0, 0.0, 3.0, 1.0, 0.0, 2.0] * 50))
    true = torch.tensor([[0], [2], [5]])
    for seed in range(5):  # small sets, so some need no rejection (tries == num_sampled)
        a = FF.draw_candidates(sampler, true, 3, torch.Generator().manual_seed(seed))
        b = sampler.candidates(true, 3, generator=torch.Generator().manual_seed(seed))
        for x, y in zip(a, b):
            assert torch.equal(x, y)
    with pytest.raises(ValueError, match="distinct"):
        FF.sampled_softmax_loss(torch.randn(3, 4), torch.randn(300, 4), true.squeeze(1),
                                num_sampled=201, sampler=sampler)
