"""z_loss (PaLM), softcap (Gemma 2), return_lse and the accumulation-correct reduction
(reduction='sum' with a normalizer) against tests/reference.py in float64: losses and
gradients on the one-block and the streamed path, gradcheck, micro-batches that sum to the
full batch, FullSoftmaxLoss, and the refusals."""

import itertools

import pytest
import reference as R
import torch

import fastsoftmax as fs
from fastsoftmax import functional as FF

N, D, V, S, K = 12, 6, 30, 8, 3
ONE_BLOCK, STREAMED = 2**30, 256  # chunk_bytes: every logit in one block, or 9 classes a block


def _case(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    h = (2 * torch.randn(N, D, generator=g, dtype=dtype)).requires_grad_()
    w = torch.randn(V, D, generator=g, dtype=dtype).requires_grad_()
    b = torch.randn(V, generator=g, dtype=dtype).requires_grad_()
    target = torch.randint(0, V, (N,), generator=g)
    target[[2, 7]] = -100
    class_weight = torch.rand(V, generator=g, dtype=dtype) + 0.5
    return h, w, b, target, class_weight


OPTIONS = list(itertools.product([None, 1.5], [0.0, 0.05], [False, True], [0.0, 0.2]))


@pytest.mark.parametrize("chunk_bytes", [ONE_BLOCK, STREAMED])
@pytest.mark.parametrize("softcap,z_loss,weighted,eps", OPTIONS)
def test_matches_reference(chunk_bytes, softcap, z_loss, weighted, eps):
    h, w, b, target, cw = _case()
    cw = cw if weighted else None
    for reduction in ("none", "sum", "mean"):
        want, want_lse = R.full_softmax_extras_reference(h, w, b, target, cw, eps, z_loss,
                                                         softcap)
        got, lse = FF.full_softmax_loss(h, w, target, linear_bias=b, weight=cw,
                                        label_smoothing=eps, reduction=reduction,
                                        chunk_bytes=chunk_bytes, z_loss=z_loss,
                                        softcap=softcap, return_lse=True)
        ref = R.weighted_reduce_reference(want, target[:, None], reduction, cw)
        torch.testing.assert_close(got, ref)
        torch.testing.assert_close(lse, want_lse)
        grads = torch.autograd.grad(got.sum() + lse.sum(), (h, w, b))
        ref_grads = torch.autograd.grad(ref.sum() + want_lse.sum(), (h, w, b))
        for ours, theirs in zip(grads, ref_grads):
            torch.testing.assert_close(ours, theirs)


def test_options_change_the_loss():
    """Each option is really applied (a reference that ignored it would fail above too)."""
    h, w, b, target, _ = _case()
    plain = FF.full_softmax_loss(h, w, target, linear_bias=b)
    for option in (dict(z_loss=0.1), dict(softcap=1.0)):
        assert not torch.allclose(FF.full_softmax_loss(h, w, target, linear_bias=b, **option),
                                  plain)


def test_lse_is_the_logsumexp_of_every_row_and_keeps_the_shape():
    h, w, b, target, _ = _case()
    h3, t3 = h.reshape(3, 4, D), target.reshape(3, 4)
    for chunk_bytes in (ONE_BLOCK, STREAMED):
        loss, lse = FF.full_softmax_loss(h3, w, t3, linear_bias=b, reduction="none",
                                         return_lse=True, chunk_bytes=chunk_bytes)
        assert loss.shape == lse.shape == (3, 4)
        torch.testing.assert_close(lse, torch.logsumexp(h3 @ w.T + b, -1))


@pytest.mark.parametrize("chunk_bytes", [ONE_BLOCK, STREAMED])
def test_gradcheck(chunk_bytes):
    h, w, b, target, cw = _case()

    def loss(h, w, b):
        out, lse = FF.full_softmax_loss(h, w, target, linear_bias=b, weight=cw,
                                        label_smoothing=0.1, z_loss=0.02, softcap=2.0,
                                        return_lse=True, chunk_bytes=chunk_bytes)
        return out, lse

    assert torch.autograd.gradcheck(loss, (h, w, b))


def _split_and_accumulate(loss_fn, h, target, normalizer, parts=3):
    """Sum of micro-batch losses and their accumulated input gradient."""
    grad, total = torch.zeros_like(h), 0.0
    for rows in torch.arange(h.shape[0]).tensor_split(parts):
        hh = h.detach()[rows].requires_grad_()
        loss = loss_fn(hh, target[rows], rows, dict(reduction="sum", normalizer=normalizer))
        loss.backward()
        grad[rows] += hh.grad
        total = total + loss.detach()
    return total, grad


LOSSES = {
    "full": lambda h, w, b, t, rows, sampled, neg, cw, r: FF.full_softmax_loss(
        h, w, t, linear_bias=b, weight=cw, z_loss=0.01, softcap=3.0, chunk_bytes=STREAMED,
        **r),
    "sampled_softmax": lambda h, w, b, t, rows, sampled, neg, cw, r: FF.sampled_softmax_loss(
        h, w, t, linear_bias=b, weight=cw, sampled=sampled, **r),
    "nce": lambda h, w, b, t, rows, sampled, neg, cw, r: FF.nce_loss(
        h, w, t, linear_bias=b, weight=cw, sampled=sampled, **r),
    "negative_sampling": lambda h, w, b, t, rows, sampled, neg, cw, r: FF.negative_sampling_loss(
        h, w, t, weight=cw, negatives=neg[rows], **r),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("weighted", [False, True])
def test_micro_batches_sum_to_the_full_batch_mean(name, weighted):
    h, w, b, target, cw = _case(seed=1)
    cw = cw if weighted else None
    g = torch.Generator().manual_seed(2)
    sampled = fs.LogUniformSampler(V).candidates(target.clamp(min=0)[:, None], S, generator=g)
    neg = torch.randint(0, V, (N, K), generator=g)
    loss = LOSSES[name]

    def micro(hh, t, rows, reduction):  # the rows' own expected counts of their targets
        rows_sampled = sampled._replace(true_expected_count=sampled.true_expected_count[rows])
        return loss(hh, w.detach(), b.detach(), t, rows, rows_sampled, neg, cw, reduction)

    hh = h.detach().requires_grad_()
    full = micro(hh, target, torch.arange(N), dict(reduction="mean"))
    full.backward()
    normalizer = FF.mean_normalizer(target, weight=cw)
    for given in (normalizer, float(normalizer)):
        total, grad = _split_and_accumulate(micro, h, target, given)
        torch.testing.assert_close(total, full.detach())
        torch.testing.assert_close(grad, hh.grad)
    # 'mean' per micro-batch is not the full batch's mean: the ignored rows are uneven.
    uneven = sum(micro(h.detach()[rows], target[rows], rows, dict(reduction="mean"))
                 for rows in torch.arange(N).tensor_split(3))
    assert not torch.allclose(uneven, 3 * full.detach())


def test_full_softmax_layer_takes_the_options():
    h, w, b, target, _ = _case()
    layer = fs.FullSoftmaxLoss(D, V, bias=True, z_loss=0.03, softcap=2.5, dtype=torch.float64)
    with torch.no_grad():
        layer.linear_weight.copy_(w)
        layer.linear_bias.copy_(b)
    want, _ = R.full_softmax_extras_reference(h, w, b, target, z_loss=0.03, softcap=2.5)
    want = R.reduce_reference(want, target[:, None], "mean")
    for training in (True, False):
        layer.train(training)
        torch.testing.assert_close(layer(h, target), want)
    capped = 2.5 * torch.tanh((h @ w.T + b) / 2.5)
    torch.testing.assert_close(layer.log_prob(h), torch.log_softmax(capped, 1))
    torch.testing.assert_close(layer.predict(h), capped.argmax(1))


@pytest.mark.parametrize("kwargs,match", [
    (dict(normalizer=4.0), "reduction='sum'"),
    (dict(reduction="sum", normalizer=0.0), "positive"),
    (dict(reduction="sum", normalizer=-2), "positive"),
    (dict(reduction="sum", normalizer=float("nan")), "positive"),
    (dict(reduction="sum", normalizer=True), "positive"),
    (dict(reduction="sum", normalizer=torch.ones(2)), "one-element"),
    (dict(softcap=0.0), "softcap"),
    (dict(softcap=-1.0), "softcap"),
    (dict(softcap=float("inf")), "softcap"),
    (dict(z_loss=-0.1), "z_loss"),
    (dict(z_loss=float("nan")), "z_loss"),
])
def test_bad_options_are_refused(kwargs, match):
    h, w, b, target, _ = _case()
    with pytest.raises(ValueError, match=match):
        FF.full_softmax_loss(h, w, target, **kwargs)


def test_sampled_paths_refuse_full_softmax_options():
    h, w, b, target, _ = _case()
    with pytest.raises(TypeError, match="return_lse"):
        FF.full_softmax_loss(h, w, target, return_lse=1)
    for option in (dict(z_loss=0.1), dict(softcap=30.0)):
        with pytest.raises(ValueError, match="full_softmax_loss"):
            FF.sampled_softmax_loss(h, w, target, num_sampled=4, **option)
    with pytest.raises(ValueError, match="reduction='sum'"):
        FF.nce_loss(h, w, target, num_sampled=4, normalizer=3.0)
    with pytest.raises(ValueError, match="z_loss"):
        fs.FullSoftmaxLoss(D, V, z_loss=-1.0)


def test_compile_fullgraph_with_the_options():
    h, w, b, target, cw = _case()
    normalizer = FF.mean_normalizer(target, weight=cw)

    def loss(h, w, b):
        return FF.full_softmax_loss(h, w, target, linear_bias=b, weight=cw, z_loss=0.01,
                                    softcap=2.0, return_lse=True, reduction="sum",
                                    normalizer=normalizer, chunk_bytes=STREAMED)

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    for ours, eager in zip(compiled(h, w, b), loss(h, w, b)):
        torch.testing.assert_close(ours, eager)


def test_compiled_eval_layer_skips_the_gradient_pieces():
    """Under torch.compile the eval forward of the sampled losses traces need_grad=False."""
    h, w, b, target, _ = _case()
    neg = torch.randint(0, V, (N, K), generator=torch.Generator().manual_seed(4))

    def loss(h, w):
        return fs.ops.negative_sampling_forward(h, w, target.clamp(min=0)[:, None], neg,
                                                -100, False)

    with torch.no_grad():
        _, coef = torch.compile(loss, fullgraph=True, backend="aot_eager")(h, w)
    assert coef.shape[0] == 0


@pytest.mark.parametrize("chunk_bytes", [ONE_BLOCK, STREAMED])
def test_a_second_backward_with_retain_graph_gives_the_same_gradients(chunk_bytes):
    """The hand-written backward overwrites the blocks it recomputes, never the kept one."""
    h, w, b, target, _ = _case()
    loss = FF.full_softmax_loss(h, w, target, linear_bias=b, softcap=2.0, chunk_bytes=chunk_bytes)
    first = torch.autograd.grad(loss, (h, w, b), retain_graph=True)
    second = torch.autograd.grad(loss, (h, w, b))
    for a, c in zip(first, second):
        assert torch.equal(a, c)
