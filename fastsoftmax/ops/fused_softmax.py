"""The fused exact softmax's two torch ops, `fastsoftmax::fused_softmax_stats` and its
backward: the per-row figures (lse, true, total) of fastsoftmax/losses/_softmax_stats.py and
their gradients, computed by the Triton kernels of ops/_triton_softmax.py, whose logit tiles
live in registers and are recomputed in backward, so no block of logits reaches memory.

Defined here with torch.library.custom_op (the kernels are Python, not part of the compiled
extension's schema file), each beside its fake kernel and autograd formula: autograd, fake
tensors and torch.compile see one opaque op each, and torch.library.opcheck checks them.
Triton is imported only when an op runs (it is optional). Which calls take these ops is
fastsoftmax.losses.fused's policy (resolve()).
"""

from typing import Optional, Tuple

import torch
from torch import Tensor


def device_mismatch(h: Tensor, **others: Optional[Tensor]) -> Optional[str]:
    """Which of `others` (None skipped) lie on another device than the input, or None. A
    kernel given pointers of two devices reads the wrong memory instead of failing."""
    away = [f"{name} on {t.device}" for name, t in others.items()
            if t is not None and t.device != h.device]
    if not away:
        return None
    return f"the input is on {h.device} but " + ", ".join(away)


def _acc(h: Tensor) -> torch.dtype:
    return torch.float64 if h.dtype == torch.float64 else torch.float32


@torch.library.custom_op("fastsoftmax::fused_softmax_stats", mutates_args=())
def fused_softmax_stats(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor],
                        targets: Tensor, class_sum: Optional[Tensor], softcap: Optional[float]
                        ) -> Tuple[Tensor, Tensor, Tensor]:
    """(lse, true, total) [N] in the accumulation dtype over every class of linear_weight, as
    losses/_softmax_stats.softmax_stats (total is zeros without class_sum)."""
    _check_devices(h, linear_weight=linear_weight, linear_bias=linear_bias, targets=targets,
                   class_sum=class_sum)
    from . import _triton_softmax
    return _triton_softmax.forward(h.contiguous(), linear_weight.contiguous(),
                                   _contiguous(linear_bias), targets.contiguous(),
                                   _contiguous(class_sum), softcap)


@fused_softmax_stats.register_fake
def _(h, linear_weight, linear_bias, targets, class_sum, softcap):
    return tuple(h.new_empty(h.shape[0], dtype=_acc(h)) for _ in range(3))


@torch.library.custom_op("fastsoftmax::fused_softmax_stats_backward", mutates_args=())
def fused_softmax_stats_backward(h: Tensor, linear_weight: Tensor,
                                 linear_bias: Optional[Tensor], targets: Tensor,
                                 class_sum: Optional[Tensor], softcap: Optional[float],
                                 lse: Tensor, g_lse: Tensor, g_true: Tensor, g_total: Tensor
                                 ) -> Tuple[Tensor, Tensor, Tensor]:
    """(grad_h, grad_w, grad_b) in the inputs' dtypes (grad_b empty without a bias)."""
    _check_devices(h, linear_weight=linear_weight, linear_bias=linear_bias, targets=targets,
                   class_sum=class_sum, lse=lse, g_lse=g_lse, g_true=g_true, g_total=g_total)
    from . import _triton_softmax
    acc = _acc(h)
    grad_h, grad_w, grad_b = _triton_softmax.backward(
        h.contiguous(), linear_weight.contiguous(), _contiguous(linear_bias),
        targets.contiguous(), _contiguous(class_sum), softcap, lse.contiguous(),
        *(g.to(acc).contiguous() for g in (g_lse, g_true, g_total)))
    grad_b = h.new_empty(0) if grad_b is None else grad_b.to(linear_bias.dtype)
    return grad_h.to(h.dtype), grad_w.to(linear_weight.dtype), grad_b


@fused_softmax_stats_backward.register_fake
def _(h, linear_weight, linear_bias, targets, class_sum, softcap, lse, g_lse, g_true, g_total):
    grad_b = h.new_empty(0) if linear_bias is None else torch.empty_like(linear_bias)
    return torch.empty_like(h), torch.empty_like(linear_weight), grad_b


def _check_devices(h: Tensor, **others: Optional[Tensor]) -> None:
    reason = device_mismatch(h, **others)
    if reason is not None:
        raise ValueError(f"the fused softmax ops take tensors of one device: {reason}")


def _contiguous(t: Optional[Tensor]) -> Optional[Tensor]:
    return None if t is None else t.contiguous()


def _setup_context(ctx, inputs, output):
    h, linear_weight, linear_bias, targets, class_sum, softcap = inputs
    ctx.softcap = softcap
    ctx.save_for_backward(h, linear_weight, linear_bias, targets, class_sum, output[0])


def _backward(ctx, g_lse, g_true, g_total):
    h, linear_weight, linear_bias, targets, class_sum, lse = ctx.saved_tensors
    zeros = torch.zeros_like(lse)
    grad_h, grad_w, grad_b = fused_softmax_stats_backward(
        h, linear_weight, linear_bias, targets, class_sum, ctx.softcap, lse,
        *(zeros if g is None else g for g in (g_lse, g_true, g_total)))
    return grad_h, grad_w, (grad_b if linear_bias is not None else None), None, None, None


fused_softmax_stats.register_autograd(_backward, setup_context=_setup_context)


__all__ = ["device_mismatch", "fused_softmax_stats", "fused_softmax_stats_backward"]
