"""The summed exact softmax cross entropy of a causal LM's head, with its gradients computed in
the forward pass, over blocks of rows: what the patch trains with in float32 and float64.

Why not losses/full.py's streamed loss: that one streams blocks of *classes*, so a row's
log-sum-exp is known only after its last block, and its backward computes every block of
logits a second time: four [tokens x D x V] matrix products (logits, the recomputation, the
two gradient products) to the unpatched loss's three. A block of whole *rows* has its
log-sum-exp at once, so its softmax gradient, and with it the gradients of the hidden states,
the weight and the bias, can be formed right away from the same block: three products, one
block of logits held at a time. The cost is the order: the gradients exist from the forward
pass on (the weight's gradient, [V, D], is the size of the one autograd would make in the
backward), and backward only scales them by the loss's incoming gradient, so the loss must
be a scalar reduction (the patch's sum, then its division by the count).

Math, per row n with logits x (capped to c tanh(raw / c) under a softcap), target y:
loss_n = lse(x) - x_y; d loss_n / d x = softmax(x) - onehot(y), times 1 - (x / c)^2 under
the cap; ignored rows (target == ignore_index) contribute nothing, to the loss or gradients.
"""

from typing import Optional

import torch
from torch import Tensor
import torch.nn.functional as F


def applies(hidden: Tensor, weight: Tensor) -> bool:
    """Whether this path is the one to take: a gradient is wanted, the dtypes are float32 or
    float64 (bfloat16/float16 keep losses/full.py's float32 statistics) and no autocast
    changes them, and torch.compile is not tracing (its graph is the streamed loss's)."""
    return (torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
            and hidden.dtype in (torch.float32, torch.float64) and weight.dtype == hidden.dtype
            and not torch.is_autocast_enabled(hidden.device.type)
            and not torch.compiler.is_compiling())


def rows_within(chunk_bytes: int, hidden: Tensor, weight: Tensor) -> int:
    """The rows whose logits take at most chunk_bytes (at least one)."""
    return max(1, chunk_bytes // (hidden.element_size() * max(weight.shape[0], 1)))


def summed_loss_with_gradients(hidden: Tensor, weight: Tensor, bias: Optional[Tensor],
                               target: Tensor, ignore_index: int, softcap: Optional[float],
                               rows_at_once: int) -> Tensor:
    """sum over the rows of hidden [N, D] not ignored of the cross entropy of
    hidden @ weight.T + bias against target [N]; a 0-dim tensor, differentiable in hidden,
    weight and bias. The logits of `rows_at_once` rows (twice that under a softcap) at once."""
    return _LossWithGradients.apply(hidden, weight, bias, target, ignore_index, softcap,
                                    rows_at_once)


class _LossWithGradients(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, target, ignore_index, softcap, rows_at_once):
        want_h, want_w, want_b = ctx.needs_input_grad[:3]
        counted = target != ignore_index
        safe = torch.where(counted, target, torch.zeros_like(target))[:, None]
        grad_h = torch.empty_like(hidden) if want_h else None  # every block writes its rows
        grad_w = torch.zeros_like(weight) if want_w else None
        grad_b = torch.zeros_like(bias) if want_b else None
        total = hidden.new_zeros(())
        for start in range(0, hidden.shape[0], rows_at_once):
            rows = slice(start, start + rows_at_once)
            h, keep = hidden[rows], counted[rows, None]
            x = F.linear(h, weight, bias)
            cap_grad = None
            if softcap is not None:
                x = torch.tanh(x.div_(softcap))
                cap_grad = 1 - x.square()  # d (c tanh(raw / c)) / d raw
                x.mul_(softcap)
            # In place from here on: the block is the only [rows, V] tensor held (two with
            # the cap's derivative).
            true = x.gather(1, safe[rows])
            top = x.amax(1, keepdim=True)
            x.sub_(top).exp_()
            norm = x.sum(1, keepdim=True)
            lse = top + norm.log()
            total += torch.where(keep, lse - true, torch.zeros_like(lse)).sum()
            if not (want_h or want_w or want_b):
                continue
            # softmax - onehot, zero in ignored rows
            x.div_(norm).scatter_add_(1, safe[rows], torch.full_like(true, -1.0))
            x.mul_(keep)
            if cap_grad is not None:
                x.mul_(cap_grad)
            if want_h:
                grad_h[rows] = x @ weight
            if want_w:
                grad_w.addmm_(x.t(), h)
            if want_b:
                grad_b += x.sum(0)
        ctx.grads = grad_h, grad_w, grad_b
        return total

    @staticmethod
    def backward(ctx, g):
        if ctx.grads is None:
            raise RuntimeError("the patched exact loss hands its gradients over in its first "
                               "backward; a second backward through it (retain_graph=True) "
                               "is not supported: compute the loss again")
        grads, ctx.grads = ctx.grads, None  # handed over, not copied: autograd keeps them
        scaled = [None if t is None else t.mul_(g) for t in grads]
        return (*scaled, None, None, None, None)
