"""The exact loss that the Hugging Face patch trains with in float32/float64
(fastsoftmax/integrations/_loss_with_gradients.py: gradients formed in the forward pass, over
blocks of rows) against the plain float64 cross entropy of whole logits."""

import pytest
import torch

from fastsoftmax.integrations._loss_with_gradients import applies, summed_loss_with_gradients
from reference import full_softmax_extras_reference

N, D, V = 11, 6, 23


def _inputs(dtype=torch.float64, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(N, D, generator=g, dtype=dtype).requires_grad_()
    w = torch.randn(V, D, generator=g, dtype=dtype).requires_grad_()
    b = torch.randn(V, generator=g, dtype=dtype).requires_grad_() if bias else None
    target = torch.randint(0, V, (N,), generator=g)
    target[[1, 4, 5]] = -100
    return h, w, b, target


def _grads(loss, tensors):
    return torch.autograd.grad(loss, [t for t in tensors if t is not None])


@pytest.mark.parametrize("softcap", [None, 1.5])
@pytest.mark.parametrize("rows_at_once", [1, 4, N])
def test_loss_and_gradients_equal_the_whole_logits_reference(rows_at_once, softcap):
    h, w, b, target = _inputs()
    # An incoming gradient other than 1 (the patch divides by the count): backward scales.
    got = summed_loss_with_gradients(h, w, b, target, -100, softcap, rows_at_once) / 7
    rows, _ = full_softmax_extras_reference(h, w, b, target, softcap=softcap)
    want = rows.sum() / 7
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)
    for g, r in zip(_grads(got, (h, w, b)), _grads(want, (h, w, b))):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)


def test_only_the_gradients_asked_for_are_formed():
    h, w, _, target = _inputs(bias=False)
    w.requires_grad_(False)  # a frozen lm_head (LoRA)
    loss = summed_loss_with_gradients(h, w, None, target, -100, None, 3)
    (grad_h,) = torch.autograd.grad(loss, h)
    rows, _ = full_softmax_extras_reference(h, w, None, target)
    torch.testing.assert_close(grad_h, torch.autograd.grad(rows.sum(), h)[0])


def test_float32_within_float32_rounding():
    h, w, b, target = _inputs(torch.float32)
    got = summed_loss_with_gradients(h, w, b, target, -100, None, 4)
    rows, _ = full_softmax_extras_reference(h, w, b, target)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), rows.sum(), rtol=1e-6, atol=0)


def test_a_second_backward_is_refused_with_a_sentence():
    h, w, b, target = _inputs()
    loss = summed_loss_with_gradients(h, w, b, target, -100, None, 4)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="second backward"):
        loss.backward()


def test_applies_only_where_a_gradient_is_wanted_in_float32_or_float64():
    h, w, _, _ = _inputs()
    assert applies(h, w)
    with torch.no_grad():
        assert not applies(h, w)
    assert not applies(h.detach(), w.detach())
    assert not applies(h.bfloat16(), w.bfloat16())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not applies(h.float(), w.float())
