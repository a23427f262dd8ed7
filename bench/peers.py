"""Peers the loss benchmarks time fastsoftmax against: PyTorch's own exact
`torch.nn.functional.linear_cross_entropy` (unchunked, and chunked through
`torch.nn.LinearCrossEntropyOptions`), and the hierarchical softmax written in plain PyTorch
(gather the [N, L, D] path weights, batched dot, log-sigmoid, autograd).
"""

import os

import torch
import torch.nn.functional as F

import fastsoftmax as fs
from common import randn_on

HAS_LCE = hasattr(F, "linear_cross_entropy") and hasattr(torch.nn, "LinearCrossEntropyOptions")


def lce_variants(n, v, device, chunk_rows):
    """(provider name, options) of linear_cross_entropy to time at N rows and V classes:
    the default (unchunked: one [N, V] logits tensor), the chunked path with its automatic
    chunk size, and the chunked path with `chunk_rows` rows per chunk. The unchunked path is
    left out where its float32 logits and their gradient would not fit in memory."""
    if not HAS_LCE:
        return []
    opts = torch.nn.LinearCrossEntropyOptions
    variants = []
    if 3 * n * v * 4 < 0.5 * _memory_bytes(device):
        variants.append(("lce", None))
    else:
        print(f"linear_cross_entropy unchunked skipped at N={n} V={v}: its [N, V] logits and "
              "their gradient would not fit in memory")
    variants.append(("lce_chunked_auto", opts()))
    if chunk_rows < n:
        variants.append(("lce_chunked", opts(batch_chunk_size=chunk_rows)))
    return variants


def _memory_bytes(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def lce_loss(options):
    def fn(h, w, b, t):
        return F.linear_cross_entropy(h, w, t, linear_bias=b, reduction="sum", options=options)
    return fn


def check_lce(device, dtype, chunk_rows):
    """Every linear_cross_entropy variant against F.cross_entropy(F.linear(...)), loss and
    gradients, on a small case (the options are what is checked; scale changes nothing)."""
    g = torch.Generator().manual_seed(0)
    n, d, v = 512, 64, 5000
    w = (torch.randn(v, d, generator=g) * 0.05).to(device, dtype).requires_grad_()
    b = torch.zeros(v).to(device, dtype).requires_grad_()
    h = torch.randn(n, d, generator=g).to(device, dtype).requires_grad_()
    t = torch.randint(0, v, (n,), generator=g).to(device)
    ref = F.cross_entropy(F.linear(h, w, b).float(), t, reduction="sum")
    ref_grads = torch.autograd.grad(ref, [h, w, b])
    tol = 2e-3 if dtype == torch.float32 else 5e-2
    for name, options in lce_variants(n, v, device, min(chunk_rows, n // 4)):
        loss = lce_loss(options)(h, w, b, t)
        grads = torch.autograd.grad(loss, [h, w, b])
        torch.testing.assert_close(loss.float(), ref, rtol=tol, atol=tol * n)
        for a, r in zip(grads, ref_grads):
            err = float((a.float() - r.float()).abs().max() / r.float().abs().max())
            if err > 10 * tol:
                raise AssertionError(f"{name}: gradient differs from F.cross_entropy ({err:.2e})")


# ---- hierarchical softmax ---------------------------------------------------------------------

def hs_ours(h, w, t, tree):
    return fs.functional.hierarchical_softmax_loss(h, w, t, tree, reduction="sum")


def hs_plain(h, w, t, points, signs, valid):
    """-sum_j log sigmoid(sign_j w_{p_j}.h) with the path weights gathered as [N, L, D]."""
    p = points[t]  # [N, L], padding points at node 0 and is masked out
    scores = torch.bmm(w[p], h.unsqueeze(2)).squeeze(2)  # [N, L]
    return -(F.logsigmoid(signs[t] * scores) * valid[t]).sum()


def make_hs(device, dtype, shape):
    """Zipfian counts (c_k ~ 1/k), word2vec.c's Huffman tree, targets drawn from the same
    unigram distribution (as a language model's targets), inner weights [V - 1, D] and a full
    [V, D] softmax weight for linear_cross_entropy."""
    n, d, v = shape
    g = torch.Generator().manual_seed(0)
    counts = (1e7 / torch.arange(1, v + 1, dtype=torch.float64)).ceil()
    tree = fs.ClassTree.huffman(counts).to(device)
    t = fs.UnigramSampler(counts, power=1.0).to(device).sample(n, generator=g)
    w = (randn_on(device, v - 1, d, generator=g) * 0.05).to(dtype).requires_grad_()
    h = randn_on(device, n, d, generator=g).to(dtype).requires_grad_()
    w_full = (randn_on(device, v, d, generator=g) * 0.05).to(dtype).requires_grad_()
    codes, points = tree.paths()
    valid = points >= 0
    signs = torch.where(valid, 1 - 2 * codes.long(), 0).to(dtype)
    return dict(h=h, w=w, t=t, tree=tree, w_full=w_full, points=points.clamp_min(0),
                signs=signs, valid=valid.to(dtype), mean_depth=float(tree.lengths[t].float().mean()))
