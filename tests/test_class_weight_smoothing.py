"""Per-class `weight` and `label_smoothing`, as in nn.CrossEntropyLoss: exact F.cross_entropy in
eval (every head, the streamed path too), the candidate semantics of
fastsoftmax/losses/_smoothing.py in training (against tests/reference.py, float64 and
gradcheck), and clear refusals."""

import pytest
import torch
import torch.nn.functional as F
from reference import (candidate_smoothing_reference, negative_sampling_reference,
                       nce_reference, weighted_reduce_reference)

import fastsoftmax as fs
from fastsoftmax import functional as FF

D, V, N = 6, 40, 12
REDUCTIONS = ["mean", "sum", "none"]


def case(seed=0, dtype=torch.float64, num_true=1, ignore=True, hits=True):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(N, D, generator=g, dtype=dtype).requires_grad_()
    w = (torch.randn(V, D, generator=g, dtype=dtype) * 0.5).requires_grad_()
    b = (torch.randn(V, generator=g, dtype=dtype) * 0.5).requires_grad_()
    t = torch.randint(0, V, (N, num_true), generator=g)
    if ignore:
        t[3] = -100
    sampler = fs.UnigramSampler(torch.rand(V, generator=g, dtype=torch.float64) + 0.1)
    safe = torch.where(t == -100, torch.zeros_like(t), t)
    sampled = sampler.candidates(safe, 15, generator=torch.Generator().manual_seed(seed))
    if hits:  # make sure some rows hit one of the candidates
        t[0, 0], t[1, 0] = sampled[0][0], sampled[0][4]
        safe = torch.where(t == -100, torch.zeros_like(t), t)
        sampled = sampler.candidates(safe, 15, generator=torch.Generator().manual_seed(seed))
    class_weight = torch.rand(V, generator=g, dtype=dtype) + 0.25
    return h, w, b, t, sampled, class_weight


# ---- eval: exact F.cross_entropy -------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("chunk", [None, 4 * 8 * 16])
@pytest.mark.parametrize("name", ["full", "sampled", "nce", "neg"])
def test_eval_matches_cross_entropy_with_weight_and_smoothing(name, chunk, reduction):
    h, _, _, t, _, class_weight = case()
    eps = 0.2 if name in ("full", "sampled") else 0.0
    head = fs.make_head(name, D, V, num_sampled=5, weight=class_weight, label_smoothing=eps,
                        reduction=reduction, dtype=torch.float64).eval()
    if chunk is not None:
        head.chunk_bytes = chunk  # streams blocks of 16 classes: the logaddexp path
    logits = F.linear(h, head.linear_weight, head.linear_bias)
    ref = F.cross_entropy(logits, t[:, 0], weight=class_weight, label_smoothing=eps,
                          reduction=reduction)
    ours = head(h, t[:, 0])
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
    g_ours = torch.autograd.grad(ours.sum(), [h, head.linear_weight])
    g_ref = torch.autograd.grad(ref.sum(), [h, head.linear_weight])
    for a, r in zip(g_ours, g_ref):
        torch.testing.assert_close(a, r, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("chunk", [None, 4 * 8 * 16])
def test_eval_smoothing_with_several_true_classes_is_cross_entropy_of_probabilities(chunk):
    h, w, b, t, _, _ = case(num_true=3, ignore=False, hits=False)
    eps = 0.3
    kw = {} if chunk is None else {"chunk_bytes": chunk}
    ours = FF.full_softmax_loss(h, w, t, linear_bias=b, label_smoothing=eps, reduction="none",
                                **kw)
    probs = torch.zeros(N, V, dtype=h.dtype).scatter_add_(1, t, torch.full(t.shape, 1 / 3.0,
                                                                          dtype=h.dtype))
    ref = F.cross_entropy(F.linear(h, w, b), probs, label_smoothing=eps, reduction="none")
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)


def test_crossentropy_habit_weight_ones_is_the_unweighted_loss():
    torch.manual_seed(0)
    layer = fs.SampledSoftmaxLoss(D, V, 5, weight=torch.ones(V))
    plain = fs.SampledSoftmaxLoss(D, V, 5)
    plain.load_state_dict({k: v for k, v in layer.state_dict().items() if k != "weight"})
    h, t = torch.randn(N, D), torch.randint(0, V, (N,))
    g = torch.Generator()
    for mode in (True, False):
        layer.train(mode), plain.train(mode)
        torch.testing.assert_close(layer(h, t, generator=g.manual_seed(1)),
                                   plain(h, t, generator=g.manual_seed(1)))


def test_hierarchical_softmax_weight_rescales_rows():
    h, _, _, t, _, class_weight = case()
    counts = torch.arange(V, 0, -1).double()
    m = fs.HierarchicalSoftmaxLoss(D, V, counts, weight=class_weight, dtype=torch.float64)
    torch.nn.init.normal_(m.linear_weight)
    plain = fs.HierarchicalSoftmaxLoss(D, V, counts, reduction="none", dtype=torch.float64)
    plain.linear_weight.data.copy_(m.linear_weight.data)
    rows = plain(h, t[:, 0])
    keep = t[:, 0] != -100
    expected = (rows * class_weight[t[:, 0].clamp(min=0)])[keep].sum() / \
        class_weight[t[keep][:, 0]].sum()
    torch.testing.assert_close(m(h, t[:, 0]), expected)
    # the exact model: the same as F.cross_entropy(weight=) over its log-probabilities
    ref = F.nll_loss(m.log_prob(h), t[:, 0], weight=class_weight)
    torch.testing.assert_close(m(h, t[:, 0]), ref)


# ---- training: the candidate semantics -------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("hits", [True, False])
@pytest.mark.parametrize("weighted,eps,num_true", [
    (True, 0.0, 1), (False, 0.25, 1), (True, 0.25, 1), (False, 0.4, 3), (True, 1.0, 1)])
def test_sampled_softmax_matches_candidate_reference(weighted, eps, num_true, hits, reduction):
    h, w, b, t, sampled, class_weight = case(num_true=num_true, hits=hits)
    cw = class_weight if weighted else None
    target = t if num_true > 1 else t[:, 0]
    ours = FF.sampled_softmax_loss(h, w, target, linear_bias=b, weight=cw, label_smoothing=eps,
                                   sampled=sampled, remove_accidental_hits=hits, num_true=num_true,
                                   reduction=reduction)
    ref = candidate_smoothing_reference(h, w, b, t, *sampled, hits, cw, eps)
    ref = weighted_reduce_reference(ref, t, reduction, cw)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    params = [h, w, b]
    for a, r in zip(torch.autograd.grad(ours.sum(), params), torch.autograd.grad(ref.sum(),
                                                                                  params)):
        torch.testing.assert_close(a, r, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_repeated_true_classes_and_repeated_candidates(weighted):
    """A true class listed twice in a row, and candidates drawn with replacement (a class
    sampled twice): each sampled column equal to a true class is left out once."""
    h, w, b, _, _, class_weight = case(hits=False)
    sampler = fs.UniformSampler(V)
    g = torch.Generator().manual_seed(5)
    num_true = 1 if weighted else 3
    t = torch.randint(0, V, (N, num_true), generator=g)
    sampled = sampler.candidates(t, 30, unique=False, generator=g)
    cand = sampled[0]
    t[:, 0] = cand[torch.arange(N) % 30]  # every row hits, some hit a class drawn twice
    if num_true > 1:
        t[:, 1] = t[:, 0]
    sampled = (cand, sampler.candidates(t, 30, unique=False)[1], sampled[2])
    assert len(set(cand.tolist())) < 30
    cw = class_weight if weighted else None
    target = t if num_true > 1 else t[:, 0]
    ours = FF.sampled_softmax_loss(h, w, target, linear_bias=b, weight=cw, label_smoothing=0.3,
                                   sampled=sampled, num_true=num_true, reduction="none")
    ref = candidate_smoothing_reference(h, w, b, t, *sampled, True, cw, 0.3)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)


def test_smoothing_zero_and_weight_none_leave_the_loss_unchanged():
    h, w, b, t, sampled, _ = case()
    base = FF.sampled_softmax_loss(h, w, t[:, 0], linear_bias=b, sampled=sampled,
                                   reduction="none")
    again = FF.sampled_softmax_loss(h, w, t[:, 0], linear_bias=b, sampled=sampled,
                                    reduction="none", label_smoothing=0.0, weight=None)
    assert torch.equal(base, again)


def test_gradcheck_weighted_smoothed_sampled_softmax():
    h, w, b, t, sampled, class_weight = case(ignore=True)
    fn = lambda h, w, b: FF.sampled_softmax_loss(  # noqa: E731
        h, w, t[:, 0], linear_bias=b, weight=class_weight, label_smoothing=0.3,
        sampled=sampled, reduction="mean")
    assert torch.autograd.gradcheck(fn, (h, w, b))


def test_sparse_gradient_with_smoothing_equals_dense():
    h, w, b, t, sampled, class_weight = case()
    grads = []
    for sparse in (False, True):
        loss = FF.sampled_softmax_loss(h, w, t[:, 0], linear_bias=b, weight=class_weight,
                                       label_smoothing=0.2, sampled=sampled, sparse=sparse)
        gw, = torch.autograd.grad(loss, [w])
        assert gw.is_sparse == sparse
        grads.append(gw.to_dense())
    torch.testing.assert_close(grads[0], grads[1])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nce_and_negative_sampling_weight_scales_each_row(reduction):
    h, w, b, t, sampled, class_weight = case(hits=False)
    neg = torch.randint(0, V, (N, 4), generator=torch.Generator().manual_seed(3))
    ours = [
        FF.nce_loss(h, w, t[:, 0], linear_bias=b, weight=class_weight, sampled=sampled,
                    reduction=reduction),
        FF.negative_sampling_loss(h, w, t[:, 0], weight=class_weight, negatives=neg,
                                  reduction=reduction),
    ]
    rows = [nce_reference(h, w, b, t, *sampled), negative_sampling_reference(h, w, t, neg)]
    safe = t[:, 0].clamp(min=0)
    for got, row in zip(ours, rows):
        ref = weighted_reduce_reference(row * class_weight[safe], t, reduction, class_weight)
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)


# ---- refusals -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["nce", "neg", "hs"])
def test_label_smoothing_is_refused_where_it_has_no_meaning(name):
    counts = torch.arange(V, 0, -1).double()
    with pytest.raises(ValueError, match="does not support label_smoothing"):
        fs.make_head(name, D, V, num_sampled=5, counts=counts, label_smoothing=0.1)
    h, t = torch.randn(2, D), torch.zeros(2, dtype=torch.int64)
    call = {  # the functionals have no such keyword at all
        "nce": lambda: FF.nce_loss(h, torch.randn(V, D), t, num_sampled=3, label_smoothing=0.1),
        "neg": lambda: FF.negative_sampling_loss(h, torch.randn(V, D), t, num_negatives=3,
                                                 label_smoothing=0.1),
        "hs": lambda: FF.hierarchical_softmax_loss(h, torch.randn(V - 1, D), t,
                                                   fs.ClassTree.huffman(counts),
                                                   label_smoothing=0.1),
    }[name]
    with pytest.raises(TypeError, match="label_smoothing"):
        call()


def test_bad_weight_and_smoothing_values_get_a_sentence():
    h, w, b, t, sampled, class_weight = case()
    call = lambda **kw: FF.sampled_softmax_loss(h, w, t[:, 0], sampled=sampled, **kw)  # noqa
    with pytest.raises(ValueError, match=r"per-class rescaling\) must have shape \(40,\)"):
        call(weight=class_weight[:-1])
    with pytest.raises(ValueError, match="now called linear_weight"):
        call(weight=w)
    with pytest.raises(TypeError, match="floating point"):
        call(weight=torch.ones(V, dtype=torch.int64))
    with pytest.raises(TypeError, match="must be a tensor"):
        call(weight=[1.0] * V)
    with pytest.raises(ValueError, match=r"label_smoothing must be a float in \[0, 1\]"):
        call(label_smoothing=1.5)
    with pytest.raises(ValueError, match="one true class per row"):
        FF.sampled_softmax_loss(h, w, t.expand(N, 2).contiguous().clamp(min=0),
                                num_sampled=4, num_true=2, weight=class_weight)
    with pytest.raises(ValueError, match="linear_weight"):  # the old tying habit
        fs.SampledSoftmaxLoss(D, V, 5, weight=torch.nn.Parameter(torch.zeros(V, D)))
