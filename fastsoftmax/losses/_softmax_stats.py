"""The exact softmax's per-row figures over a range of classes, with a hand-written backward
that recomputes the logit blocks instead of keeping them, so that training holds one block
of logits at a time (what Cut Cross-Entropy and Megatron-LM's vocabulary-parallel cross
entropy do), not all N x V of them. The single-process full softmax (losses/full.py) uses it
over all classes, each vocabulary-parallel rank over its shard (vocab_parallel/).

Forward, per block of logits x [n, c] (softcap-capped; _streaming.stream): the log-sum-exp
lse [N], the sum of the logits at the row's targets inside the range true [N] and, for label
smoothing, sum_c a_c x_c total [N].

Backward, given the gradients g_lse, g_true, g_total of those three, the gradient of logit
x[n, c] is
    G = g_lse[n] exp(x[n, c] - lse[n]) + g_true[n] (count of c among row n's targets)
        + g_total[n] a_c
(d lse / dx = the softmax), times 1 - (x / softcap)^2 under a softcap (the derivative of
softcap * tanh(raw / softcap)). With G per block: dL/dh = G W_block, dL/dW_block = G^T h,
dL/db_block = sum over rows of G. The products run in the input's dtype (bf16 on tensor
cores), as autograd runs F.linear's backward; the sums across blocks in float32 (float64).
"""

from typing import Optional

import torch
from torch import Tensor

from ._streaming import (acc_dtype, all_logits, block_figures, blocks, logit_blocks, one_block,
                         stream)


class _SoftmaxStats(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, linear_weight, linear_bias, targets, class_sum, chunk_bytes, softcap):
        rows, classes = h.shape[0], linear_weight.shape[0]
        # When the logits fit one block of chunk_bytes they are kept for backward (what
        # F.cross_entropy keeps too): recomputing them would cost a fourth matrix product.
        # Otherwise they are recomputed block by block.
        keep = one_block(rows, classes, chunk_bytes)
        with torch.no_grad():
            if keep and rows:
                logits = all_logits(h, linear_weight, linear_bias, softcap)
                out = block_figures(logits, targets, class_sum)
            else:
                logits = h.new_empty(0)
                out = stream(h, linear_weight, linear_bias, chunk_bytes, targets, class_sum,
                             softcap)
        lse, true = out[0], out[1]
        total = out[2] if class_sum is not None else torch.zeros_like(lse)
        ctx.chunk_bytes, ctx.softcap, ctx.keep = chunk_bytes, softcap, keep and bool(rows)
        ctx.has_bias, ctx.has_sum = linear_bias is not None, class_sum is not None
        empty = h.new_empty(0)
        ctx.save_for_backward(h, linear_weight,
                              linear_bias if linear_bias is not None else empty, targets,
                              class_sum if class_sum is not None else empty, lse, logits)
        return lse, true, total

    @staticmethod
    def backward(ctx, g_lse, g_true, g_total):
        h, linear_weight, linear_bias, targets, class_sum, lse, kept = ctx.saved_tensors
        linear_bias = linear_bias if ctx.has_bias else None
        acc, dtype = acc_dtype(h), linear_weight.dtype
        rows_at_once = ctx.keep or blocks(h.shape[0], linear_weight.shape[0],
                                          ctx.chunk_bytes)[0] >= h.shape[0]
        # Each class block's weight gradient is written once when every row is in one block
        # of rows: then it goes straight into the weight's dtype, as autograd's would.
        grad_h = torch.zeros(h.shape, dtype=acc, device=h.device)
        grad_w = torch.zeros(linear_weight.shape, dtype=dtype if rows_at_once else acc,
                             device=h.device)
        grad_b = torch.zeros(linear_weight.shape[0], dtype=acc, device=h.device) \
            if ctx.has_bias else None
        g_lse = torch.zeros_like(lse) if g_lse is None else g_lse.to(acc)
        g_true = torch.zeros_like(lse) if g_true is None else g_true.to(acc)
        g_total = None if g_total is None or not ctx.has_sum else g_total.to(acc)
        parts = ([(slice(0, h.shape[0]), 0, kept)] if ctx.keep else
                 logit_blocks(h, linear_weight, linear_bias, ctx.chunk_bytes, ctx.softcap))
        for rows, c0, logits in parts:
            c = logits.shape[1]
            cap = None if ctx.softcap is None else 1 - (logits / ctx.softcap).square()
            # A recomputed block is ours to overwrite (one block less at the peak); the kept
            # one is not (a second backward with retain_graph reads it again).
            grad = logits if not ctx.keep else logits.clone()
            grad.sub_(lse[rows, None]).exp_().mul_(g_lse[rows, None])
            t = targets[rows] - c0
            inside = (t >= 0) & (t < c)
            add = torch.where(inside, g_true[rows, None].expand_as(t),
                              torch.zeros((), dtype=acc, device=h.device))
            grad.scatter_add_(1, t.clamp(0, c - 1), add)
            if g_total is not None:
                grad.add_(g_total[rows, None] * class_sum[c0:c0 + c][None, :])
            if cap is not None:
                grad.mul_(cap)
            if grad_b is not None:
                grad_b[c0:c0 + c] += grad.sum(0)
            grad = grad.to(dtype)
            grad_h[rows] += grad @ linear_weight[c0:c0 + c]
            grad_w[c0:c0 + c] += grad.t() @ h[rows]
        return (grad_h.to(h.dtype), grad_w.to(dtype),
                None if grad_b is None else grad_b.to(linear_bias.dtype), None, None, None, None)


def softmax_stats(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor],
                  targets: Tensor, class_sum: Optional[Tensor], chunk_bytes: int,
                  softcap: Optional[float] = None):
    """(lse, true, total) over the classes of `linear_weight`, each [N] in the accumulation
    dtype; total is zeros without `class_sum`. Differentiable in h, linear_weight and
    linear_bias (not in class_sum); targets outside [0, V) count in no row's true."""
    return _SoftmaxStats.apply(h, linear_weight, linear_bias, targets, class_sum, chunk_bytes,
                               softcap)
