"""The margin losses' computations below their functionals (fastsoftmax.losses.margin): the
scores of each row's target and negatives, and the exact hinge sum over the whole vocabulary,
streamed both ways: per row

    sum_{c != t_n} max(0, margin - s_t + s_c)^p,   s_c = h_n.w_c + b_c,

computed over blocks of at most `chunk_bytes` of scores in the forward, and the blocks made
again in the backward instead of being kept. So no [N, V] block larger than the budget exists
in training either (autograd would otherwise keep every block for the backward, N·V scores
in all). When all the scores fit in one block, that block is kept: making it again would
cost a second product for no memory saved. The per-block hinge reduction and its gradient
dL/ds are the native ops margin_rank_forward / margin_rank_backward; the products are
torch's (BLAS / cuBLAS):

    grad_h += G W_blk,   grad_W_blk += Gᵀ h,   grad_b_blk += column sums of G

for each block's score gradient G [n, c], and the target scores' gradient g_t [N] adds
g_t w_t to grad_h, g_t h to grad_W[t] and g_t to grad_b[t].
"""

from typing import Optional

import torch
from torch import Tensor

from .. import ops
from ._streaming import acc_dtype, logit_blocks, one_block


def scores(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor], safe: Tensor,
           neg: Optional[Tensor] = None):
    """The target scores s(h_n, safe[n]) [N] and, with per-row negatives neg [N, K] or shared
    ones [K], their scores [N, K], in the accumulation dtype. Per-row ids go through the
    native fused gather-dots (ops.row_scores: no [N, K, D] block of gathered rows, and one
    weight-gradient scatter for the targets and negatives together); shared negatives are
    one matrix product."""
    if neg is not None and neg.dim() == 2:
        s = ops.row_scores(h, linear_weight, linear_bias, torch.cat([safe[:, None], neg], 1))
        return s[:, 0], s[:, 1:]
    s_t = ops.row_scores(h, linear_weight, linear_bias, safe[:, None])[:, 0]
    if neg is None:
        return s_t
    s = h @ linear_weight[neg].T
    if linear_bias is not None:
        s = s + linear_bias[neg]
    return s_t, s.to(s_t.dtype)


class StreamedHinge(torch.autograd.Function):
    """(h [N, D], linear_weight [V, D], linear_bias [V] or None, t [N], safe [N], margin, p,
    ignore_index, chunk_bytes) -> per-row hinge sums [N] in the accumulation dtype. `safe`
    is t with ignored rows as class 0 (valid ids)."""

    @staticmethod
    def forward(ctx, h, linear_weight, linear_bias, t, safe, margin, p, ignore_index,
                chunk_bytes):
        V = linear_weight.shape[0]
        s_t = ops.row_scores(h, linear_weight, linear_bias, safe[:, None])[:, 0]
        out = torch.zeros(h.shape[0], dtype=s_t.dtype, device=h.device)
        keep = one_block(h.shape[0], V, chunk_bytes)
        kept = None
        for rows, c0, logits in logit_blocks(h, linear_weight, linear_bias, chunk_bytes):
            classes = torch.arange(c0, c0 + logits.shape[1], device=h.device)
            out[rows] += ops.margin_rank_forward(logits, s_t[rows], t[rows], classes, margin,
                                                 p, ops.MODE_HINGE, V, ignore_index)
            kept = logits if keep else None  # one block: kept for the backward
        ctx.save_for_backward(h, linear_weight, linear_bias, t, safe, s_t, kept)
        ctx.options = (margin, p, ignore_index, chunk_bytes)
        return out

    @staticmethod
    def backward(ctx, grad):
        h, linear_weight, linear_bias, t, safe, s_t, kept = ctx.saved_tensors
        margin, p, ignore_index, chunk_bytes = ctx.options
        V, acc = linear_weight.shape[0], acc_dtype(h)
        grad = grad.contiguous().to(acc)
        hc, wc = h.to(acc), linear_weight.to(acc)
        grad_h = torch.zeros_like(hc)
        grad_w = torch.zeros_like(wc)
        grad_b = torch.zeros(V, dtype=acc, device=h.device)
        grad_t = torch.zeros_like(s_t)
        blocks = logit_blocks(h, linear_weight, linear_bias, chunk_bytes) if kept is None else \
            [(slice(0, h.shape[0]), 0, kept)]
        for rows, c0, logits in blocks:
            c1 = c0 + logits.shape[1]
            classes = torch.arange(c0, c1, device=h.device)
            g, g_t = ops.margin_rank_backward(grad[rows], logits, s_t[rows], t[rows], classes,
                                              margin, p, ops.MODE_HINGE, V, ignore_index)
            grad_t[rows] += g_t
            grad_h[rows] += g @ wc[c0:c1]
            grad_w[c0:c1] += g.T @ hc[rows]
            grad_b[c0:c1] += g.sum(0)
        grad_h += grad_t[:, None] * wc[safe]
        grad_w.index_add_(0, safe, grad_t[:, None] * hc)
        grad_b.index_add_(0, safe, grad_t)
        return (grad_h.to(h.dtype), grad_w.to(linear_weight.dtype),
                None if linear_bias is None else grad_b.to(linear_bias.dtype)) + (None,) * 6


__all__ = ["StreamedHinge", "scores"]
