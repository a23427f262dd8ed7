"""The exact hinge sum over the whole vocabulary, streamed both ways: per row

    sum_{c != t_n} max(0, margin - s_t + s_c)^p,   s_c = h_n.w_c + b_c,

computed over blocks of at most `chunk_bytes` of scores in the forward, and the blocks made
again in the backward instead of being kept. So no [N, V] block larger than the budget exists
in training either (autograd would otherwise keep every block for the backward, N·V scores
in all). When all the scores fit in one block, that block is kept: making it again would
cost a second product for no memory saved. The per-block hinge reduction and its gradient dL/ds are the native ops
margin_rank_forward / margin_rank_backward; the products are torch's (BLAS / cuBLAS):

    grad_h += G W_blk,   grad_W_blk += Gᵀ h,   grad_b_blk += column sums of G

for each block's score gradient G [n, c], and the target scores' gradient g_t [N] adds
g_t w_t to grad_h, g_t h to grad_W[t] and g_t to grad_b[t].
"""

import torch

from . import ops
from .full_softmax import _blocks, _logit_blocks


def _acc(t):
    return torch.float64 if t.dtype == torch.float64 else torch.float32


class StreamedHinge(torch.autograd.Function):
    """(h [N, D], weight [V, D], bias [V] or None, t [N], safe [N], margin, p, ignore_index,
    chunk_bytes) -> per-row hinge sums [N] in the accumulation dtype. `safe` is t with ignored
    rows as class 0 (valid ids)."""

    @staticmethod
    def forward(ctx, h, weight, bias, t, safe, margin, p, ignore_index, chunk_bytes):
        V = weight.shape[0]
        s_t = ops.row_scores(h, weight, bias, safe[:, None])[:, 0]
        out = torch.zeros(h.shape[0], dtype=s_t.dtype, device=h.device)
        one_block = _blocks(h.shape[0], V, chunk_bytes) == (max(h.shape[0], 1), V)
        kept = None
        for rows, c0, logits in _logit_blocks(h, weight, bias, chunk_bytes):
            classes = torch.arange(c0, c0 + logits.shape[1], device=h.device)
            out[rows] += ops.margin_rank_forward(logits, s_t[rows], t[rows], classes, margin,
                                                 p, ops.MODE_HINGE, V, ignore_index)
            kept = logits if one_block else None  # one block: kept for the backward
        ctx.save_for_backward(h, weight, bias, t, safe, s_t, kept)
        ctx.options = (margin, p, ignore_index, chunk_bytes)
        return out

    @staticmethod
    def backward(ctx, grad):
        h, weight, bias, t, safe, s_t, kept = ctx.saved_tensors
        margin, p, ignore_index, chunk_bytes = ctx.options
        V, acc = weight.shape[0], _acc(h)
        grad = grad.contiguous().to(acc)
        hc, wc = h.to(acc), weight.to(acc)
        grad_h = torch.zeros_like(hc)
        grad_w = torch.zeros_like(wc)
        grad_b = torch.zeros(V, dtype=acc, device=h.device)
        grad_t = torch.zeros_like(s_t)
        backward_op = ops._op("margin_rank_backward")
        blocks = _logit_blocks(h, weight, bias, chunk_bytes) if kept is None else \
            [(slice(0, h.shape[0]), 0, kept)]
        for rows, c0, logits in blocks:
            c1 = c0 + logits.shape[1]
            classes = torch.arange(c0, c1, device=h.device)
            g, g_t = backward_op(grad[rows], logits, s_t[rows], t[rows], classes, margin, p,
                                 ops.MODE_HINGE, V, ignore_index)
            grad_t[rows] += g_t
            grad_h[rows] += g @ wc[c0:c1]
            grad_w[c0:c1] += g.T @ hc[rows]
            grad_b[c0:c1] += g.sum(0)
        grad_h += grad_t[:, None] * wc[safe]
        grad_w.index_add_(0, safe, grad_t[:, None] * hc)
        grad_b.index_add_(0, safe, grad_t)
        return (grad_h.to(h.dtype), grad_w.to(weight.dtype),
                None if bias is None else grad_b.to(bias.dtype)) + (None,) * 6
