"""The CPU weight-gradient scatter (csrc/cpu/loss_cpu.h) splits the classes among threads by
their pair counts and adds each class's pairs in pair order: its gradient must be the same
bits at every thread count, even when one class holds most pairs, and must equal the float64
sum of the pairs."""

import pytest
import torch

import fastsoftmax  # noqa: F401  (registers the ops)

ops = torch.ops.fastsoftmax
V, D, N, K = 64, 24, 2048, 5


def skewed_ids(shape, g):
    """Half the pairs on class 7, the rest spread over the classes but a few left untouched."""
    spread = torch.randint(0, V - 6, shape, generator=g)
    hot = torch.rand(shape, generator=g) < 0.5
    return torch.where(hot, torch.full_like(spread, 7), spread)


def case(dtype):
    g = torch.Generator().manual_seed(3)
    h = torch.randn(N, D, generator=g).to(dtype)
    w = (0.3 * torch.randn(V, D, generator=g)).to(dtype)
    target = skewed_ids((N, 1), g)
    target[::17] = -100  # ignored rows
    negatives = skewed_ids((N, K), g)
    grad_loss = torch.rand(N, generator=g).to(dtype)
    return h, w, target, negatives, grad_loss


def backward(h, w, target, negatives, grad_loss, sparse, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _, coef = ops.negative_sampling_forward(h, w, target, negatives, -100, sparse, True)
        acc = coef.dtype
        _, grad_w, ids = ops.negative_sampling_backward(
            grad_loss.to(acc), h, w, target, negatives, coef, -100, sparse)
    finally:
        torch.set_num_threads(before)
    return coef, grad_w, ids


def float64_scatter(h, target, negatives, grad_loss, coef):
    classes = torch.cat([target.clamp_min(0), negatives], 1)  # ignored rows: zero coefficients
    contrib = (coef.double() * grad_loss.double()[:, None])[:, :, None] * h.double()[:, None, :]
    return torch.zeros(V, D, dtype=torch.float64).index_add_(
        0, classes.flatten(), contrib.reshape(-1, D))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("sparse", [False, True])
def test_scatter_same_bits_at_every_thread_count(dtype, sparse):
    h, w, target, negatives, grad_loss = case(dtype)
    coef, one, ids = backward(h, w, target, negatives, grad_loss, sparse, 1)
    for threads in (2, 3, 5):
        _, many, many_ids = backward(h, w, target, negatives, grad_loss, sparse, threads)
        assert torch.equal(many, one), threads
        assert torch.equal(many_ids, ids)

    expected = float64_scatter(h, target, negatives, grad_loss, coef)
    touched = torch.unique(torch.cat([target.clamp_min(0).flatten(), negatives.flatten()]))
    assert touched.numel() < V  # some classes are never drawn
    if sparse:
        assert torch.equal(ids, touched)
        got = torch.zeros(V, D, dtype=one.dtype).index_copy_(0, ids, one)
    else:
        assert ids.numel() == 0 and one.shape == (V, D)
        got = one
    tol = {torch.float32: 1e-4, torch.float64: 1e-10, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(got.double(), expected, rtol=tol, atol=tol * expected.abs().max())
    untouched = torch.ones(V, dtype=torch.bool)
    untouched[touched] = False
    assert not got[untouched].any()
