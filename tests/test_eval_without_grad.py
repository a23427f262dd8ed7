"""The loss forwards keep their gradient pieces (negative sampling's coef [N, T + K], sampled
logits' grad_logits [N, S] and grad_true [N, T]) only when a backward can follow; in eval
they come back with 0 rows, the losses unchanged. And the op wrappers route to a namespace
through fastsoftmax.ops.namespace, never by swapping a module global."""

import pytest
import torch

import fastsoftmax as fs
from fastsoftmax import functional as FF
from fastsoftmax import ops

N, D, V, S, K, T = 9, 8, 40, 10, 3, 2


def _case(device, dtype=torch.float64):
    g = torch.Generator().manual_seed(3)
    h = torch.randn(N, D, generator=g, dtype=dtype).to(device)
    w = (0.5 * torch.randn(V, D, generator=g, dtype=dtype)).to(device)
    b = torch.randn(V, generator=g, dtype=dtype).to(device)
    target = torch.randint(0, V, (N, T), generator=g).to(device)
    target[4] = -100
    negatives = torch.randint(0, V, (N, K), generator=g).to(device)
    sampled = fs.LogUniformSampler(V).candidates(target.clamp(min=0).cpu(), S, generator=g)
    sampled = fs.SampledValues(*(t.to(device) for t in sampled))
    return h, w, b, target, negatives, sampled


def _sampled_args(h, w, b, target, sampled, mode):
    cand, tq, sq = sampled
    z = torch.tensor(0.3, dtype=torch.float64, device=h.device)
    return (h, w, b, target, cand, tq.reshape(target.shape), sq, z, mode, True, -100, False)


@pytest.mark.parametrize("grad_off", ["no_grad", "nothing_requires_grad"])
def test_eval_forward_keeps_no_gradient_pieces(device, grad_off):
    h, w, b, target, negatives, sampled = _case(device)
    leaves = [t.clone().requires_grad_(grad_off == "no_grad") for t in (h, w, b)]
    train_ns, coef = ops.negative_sampling_forward(h, w, target, negatives, -100, False, True)
    context = torch.no_grad() if grad_off == "no_grad" else torch.enable_grad()
    with context:
        eval_ns, no_coef = ops.negative_sampling_forward(leaves[0], leaves[1], target,
                                                         negatives, -100, False)
    assert tuple(coef.shape) == (N, T + K) and tuple(no_coef.shape) == (0, T + K)
    torch.testing.assert_close(eval_ns, train_ns, rtol=0, atol=0)
    for mode in (ops.MODE_SOFTMAX, ops.MODE_NCE):
        train = ops.sampled_logits_forward(*_sampled_args(h, w, b, target, sampled, mode),
                                           need_grad=True)
        with context:
            out = ops.sampled_logits_forward(*_sampled_args(*leaves, target, sampled, mode))
        assert tuple(train[1].shape) == (N, S) and tuple(train[2].shape) == (N, T)
        assert tuple(out[1].shape) == (0, S) and tuple(out[2].shape) == (0, T)
        torch.testing.assert_close(out[0], train[0], rtol=0, atol=0)


def test_training_forward_keeps_them(device):
    h, w, b, target, negatives, sampled = _case(device)
    h.requires_grad_()
    _, coef = ops.negative_sampling_forward(h, w, target, negatives, -100, False)
    _, grad_logits, _ = ops.sampled_logits_forward(*_sampled_args(h, w, b, target, sampled, 0))
    assert coef.shape[0] == N and grad_logits.shape[0] == N


def test_functional_losses_equal_in_eval_and_training(device):
    h, w, b, target, negatives, sampled = _case(device)
    for loss in (
        lambda h, w: FF.negative_sampling_loss(h, w, target, negatives=negatives),
        lambda h, w: FF.sampled_softmax_loss(h, w, target, linear_bias=b, sampled=sampled,
                                             num_true=T),
        lambda h, w: FF.nce_loss(h, w, target, linear_bias=b, sampled=sampled, num_true=T),
    ):
        train = loss(h.clone().requires_grad_(), w)
        with torch.no_grad():
            torch.testing.assert_close(loss(h, w), train.detach(), rtol=0, atol=0)


def test_backward_of_an_eval_forward_is_refused():
    h, w, b, target, negatives, sampled = _case("cpu")
    h.requires_grad_()
    loss, _ = ops.negative_sampling_forward(h, w, target, negatives, -100, False, False)
    with pytest.raises(RuntimeError, match="need_grad=False"):
        loss.sum().backward()
    loss, _, _ = ops.sampled_logits_forward(*_sampled_args(h, w, b, target, sampled, 0),
                                            need_grad=False)
    with pytest.raises(RuntimeError, match="need_grad=False"):
        loss.sum().backward()


def test_gradcheck_still_exact():
    h, w, b, target, negatives, sampled = _case("cpu")
    h, w = h.requires_grad_(), w.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda h, w: FF.negative_sampling_loss(h, w, target, negatives=negatives), (h, w))
    assert torch.autograd.gradcheck(
        lambda h, w: FF.sampled_softmax_loss(h, w, target, sampled=sampled, num_true=T),
        (h, w))


def test_namespace_routes_and_restores():
    assert ops.current_namespace() == ops.DEFAULT_NAMESPACE
    assert not hasattr(ops, "_LIB")  # no module global to swap
    with pytest.raises(KeyError):
        with ops.namespace("aten"):
            assert ops._overload("mm") is torch.ops.aten.mm.default
            raise KeyError("leave the block by an error")
    assert ops.current_namespace() == ops.DEFAULT_NAMESPACE


def test_register_ties_the_python_parts_to_a_library():
    """ops.register with a torch.library.Library of its own: a namespace of the same schemas
    gets fake kernels and autograd, and loses them again with the library."""
    name = "fastsoftmax_regtest"
    schemas = torch.library.Library(name, "DEF")
    for op in ops.losses.PARTS.fakes:  # the loss family's schemas, under another name
        real = getattr(torch.ops.fastsoftmax, op).default
        schemas.define(str(real._schema).split("::", 1)[1])
        schemas.impl(op, real, "CPU")
    parts = torch.library.Library(name, "FRAGMENT")
    ops.losses.PARTS.register(name, lib=parts)
    try:
        h, w, _, target, negatives, _ = _case("cpu")
        with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
            fake = mode.from_tensor
            loss, coef = torch.ops.fastsoftmax_regtest.negative_sampling_forward(
                fake(h), fake(w), fake(target), fake(negatives), -100, False, False)
        assert tuple(loss.shape) == (N,) and tuple(coef.shape) == (0, T + K)
        hh = h.clone().requires_grad_()
        with ops.namespace(name):
            got = FF.negative_sampling_loss(hh, w, target, negatives=negatives)
        got.backward()
        want_h = h.clone().requires_grad_()
        FF.negative_sampling_loss(want_h, w, target, negatives=negatives).backward()
        torch.testing.assert_close(hh.grad, want_h.grad, rtol=0, atol=0)
    finally:
        parts._destroy()
        schemas._destroy()
