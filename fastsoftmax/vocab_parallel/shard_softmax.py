"""One rank's part of the exact softmax, with a hand-written backward that recomputes the
logit blocks instead of keeping them (as Cut Cross-Entropy and Megatron-LM's vocab-parallel
cross entropy avoid holding the [N, V/W] logits for backward).

Forward, per block of the shard's logits x [n, c] (full_softmax._stream): the shard's
log-sum-exp lse_r [N], the sum of the logits at the row's targets that this shard owns
true_r [N] and, for label smoothing, sum_c a_c x_c over the shard total_r [N].

Backward, given the gradients g_lse, g_true, g_total of those three, the gradient of logit
x[n, c] is
    G = g_lse[n] exp(x[n, c] - lse_r[n]) + g_true[n] (count of c among row n's targets)
        + g_total[n] a_c
(d lse_r / dx = the shard's softmax), and with G per block: dL/dh = G W_block,
dL/dW_block = G^T h, dL/db_block = sum over rows of G. Nothing is sent here: the mappings
around this function carry the collectives.
"""

from typing import Optional

import torch
from torch import Tensor

from ..full_softmax import _acc_dtype, _blocks, _logit_blocks, _stream


class _ShardSoftmaxStats(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, bias, targets, class_sum, chunk_bytes):
        rows, classes = h.shape[0], weight.shape[0]
        # When the shard's logits fit one block of chunk_bytes they are kept for backward
        # (what the single-process layer's F.cross_entropy keeps too): recomputing them would
        # cost a fourth matrix product. Otherwise they are recomputed block by block.
        keep = _blocks(rows, classes, chunk_bytes) == (max(rows, 1), classes)
        with torch.no_grad():
            if keep:
                logits = torch.nn.functional.linear(h, weight, bias).to(_acc_dtype(h))
                out = _stream(h, weight, bias, chunk_bytes, targets, class_sum) \
                    if rows == 0 else _from_block(logits, targets, class_sum)
            else:
                logits = h.new_empty(0)
                out = _stream(h, weight, bias, chunk_bytes, targets, class_sum)
        lse, true = out[0], out[1]
        total = out[2] if class_sum is not None else torch.zeros_like(lse)
        ctx.chunk_bytes, ctx.has_bias, ctx.keep = chunk_bytes, bias is not None, keep
        ctx.save_for_backward(h, weight, bias if bias is not None else h.new_empty(0),
                              targets, class_sum if class_sum is not None else h.new_empty(0),
                              lse, logits)
        ctx.has_sum = class_sum is not None
        return lse, true, total

    @staticmethod
    def backward(ctx, g_lse, g_true, g_total):
        h, weight, bias, targets, class_sum, lse, kept = ctx.saved_tensors
        bias = bias if ctx.has_bias else None
        acc = _acc_dtype(h)
        if not ctx.keep:
            grad_h = torch.zeros(h.shape, dtype=acc, device=h.device)
            grad_w = torch.zeros(weight.shape, dtype=acc, device=h.device)
            grad_b = torch.zeros(weight.shape[0], dtype=acc, device=h.device) \
                if ctx.has_bias else None
        g_lse = g_lse.to(acc)
        g_true = g_true.to(acc)
        blocks = ([(slice(0, h.shape[0]), 0, kept)] if ctx.keep else
                  _logit_blocks(h, weight, bias, ctx.chunk_bytes))
        for rows, c0, logits in blocks:
            c = logits.shape[1]
            grad = (logits - lse[rows, None]).exp_().mul_(g_lse[rows, None])
            t = targets[rows] - c0
            inside = (t >= 0) & (t < c)
            add = torch.where(inside, g_true[rows, None].expand_as(t),
                              torch.zeros((), dtype=acc, device=h.device))
            grad.scatter_add_(1, t.clamp(0, c - 1), add)
            if ctx.has_sum:
                grad.add_(g_total.to(acc)[rows, None] * class_sum[c0:c0 + c][None, :])
            if ctx.keep:  # the one block: no zero-filled buffers to add into
                grad_h = grad @ weight.to(acc)
                grad_w = grad.t() @ h.to(acc)
                grad_b = grad.sum(0) if ctx.has_bias else None
                break
            grad_h[rows] += grad @ weight[c0:c0 + c].to(acc)
            grad_w[c0:c0 + c] += grad.t() @ h[rows].to(acc)
            if grad_b is not None:
                grad_b[c0:c0 + c] += grad.sum(0)
        return (grad_h.to(h.dtype), grad_w.to(weight.dtype),
                None if grad_b is None else grad_b.to(bias.dtype), None, None, None)


def _from_block(logits: Tensor, targets: Tensor, class_sum: Optional[Tensor]):
    """_stream's figures of one block holding every logit (the same operations, so the
    same values)."""
    c = logits.shape[1]
    inside = (targets >= 0) & (targets < c)
    picked = logits.gather(1, targets.clamp(0, c - 1))
    true = torch.where(inside, picked, torch.zeros_like(picked)).sum(1)
    lse = torch.logsumexp(logits, 1)
    if class_sum is None:
        return lse, true
    return lse, true, logits @ class_sum.to(logits.dtype)


def shard_softmax_stats(h: Tensor, weight: Tensor, bias: Optional[Tensor], targets: Tensor,
                        class_sum: Optional[Tensor], chunk_bytes: int):
    """(lse_r, true_r, total_r) of this rank's shard, each [N] in the accumulation dtype;
    total_r is zeros without `class_sum`. Differentiable in h, weight and bias."""
    return _ShardSoftmaxStats.apply(h, weight, bias, targets, class_sum, chunk_bytes)
