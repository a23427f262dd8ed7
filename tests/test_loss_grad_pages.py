"""Above 4 MB the CPU's dense weight gradient of the sampled losses is lazily zeroed memory
(csrc/cpu/zero_pages.h) with only the touched rows written: it must equal the sparse
gradient made dense, every other row must read as zero, and it must accumulate in place."""

import torch

from fastsoftmax import functional as F

V, D = 20_000, 64  # 5.1 MB of float32: the mapped path


def grads(loss_fn, sparse):
    g = torch.Generator().manual_seed(0)
    h = torch.randn(96, D, generator=g).requires_grad_()
    w = (0.1 * torch.randn(V, D, generator=g)).requires_grad_()
    t = torch.randint(0, V, (96,), generator=g)
    loss_fn(h, w, t, sparse, g).backward()
    return w.grad, h.grad


def negative_sampling(h, w, t, sparse, g):
    neg = torch.randint(0, V, (h.shape[0], 5), generator=g)
    return F.negative_sampling_loss(h, w, t, negatives=neg, reduction="sum", sparse=sparse)


def sampled_softmax(h, w, t, sparse, g):
    return F.sampled_softmax_loss(h, w, t, num_sampled=64, generator=g, sparse=sparse)


def test_large_dense_gradients_equal_sparse_and_accumulate():
    for loss_fn in (negative_sampling, sampled_softmax):
        dense, dense_h = grads(loss_fn, False)
        sparse, sparse_h = grads(loss_fn, True)
        assert sparse.is_sparse and not dense.is_sparse and dense.shape == (V, D)
        expected = sparse.coalesce().to_dense()
        assert torch.equal(dense, expected), loss_fn.__name__
        assert torch.equal(dense_h, sparse_h)
        untouched = torch.ones(V, dtype=torch.bool)
        untouched[sparse.coalesce().indices()[0]] = False
        assert untouched.sum() > V // 2 and not dense[untouched].any()
        dense += expected
        torch.testing.assert_close(dense, 2 * expected, rtol=0, atol=0)
