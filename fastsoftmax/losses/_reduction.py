"""The options every loss can take beside torch's reductions: a caller-given normaliser that
keeps the loss exact under gradient accumulation, and the checks of the full-softmax extras
(z_loss, softcap) that the sampled losses refuse.

Gradient accumulation: a batch split into micro-batches, each loss `reduction='mean'`, sums
to the full batch's mean only when every micro-batch holds the same count of (weighted)
targets. `reduction='sum', normalizer=M` divides each micro-batch's sum by M; with M the
full batch's count (`mean_normalizer` of the whole batch's target), the micro-batch losses
sum to the full-batch mean, ignore_index and per-class weights included.
"""

import math
import numbers
from typing import NamedTuple, Optional, Tuple, Union

import torch
from torch import Tensor

from ._shapes import check_class_weight, check_inputs, reduce_loss, target_2d

Normalizer = Union[float, int, Tensor]


class LossRows(NamedTuple):
    lead: Tuple[int, ...]  # the leading dims [*] of input [*, D]
    target: Tensor  # [N, T]
    rows: Tensor  # input as [N, D]
    weight: Optional[Tensor]  # [V], the per-class rescaling


def loss_rows(input, linear_weight, target, reduction, num_true, weight,
              normalizer) -> LossRows:
    """The checks and reshapes every loss begins with: its main arguments, reduction and
    normalizer, target as [N, T] (num_true None: T from the shape), input as [N, D]."""
    check_inputs(input, linear_weight, target, reduction)
    check_normalizer(normalizer, reduction)
    lead = tuple(input.shape[:-1])
    t2 = target_2d(target, lead, num_true)
    rows = input.reshape(math.prod(lead), input.shape[-1])
    return LossRows(lead, t2, rows, check_class_weight(weight, linear_weight.shape[0],
                                                       input.device, t2.shape[1]))


def check_normalizer(normalizer: Optional[Normalizer], reduction: str) -> None:
    if normalizer is None:
        return
    if reduction != "sum":
        raise ValueError(f"normalizer divides the summed loss: use it with reduction='sum', "
                         f"got reduction={reduction!r}")
    if isinstance(normalizer, Tensor):
        if normalizer.numel() != 1 or (not normalizer.is_floating_point()
                                       and normalizer.dtype not in (torch.int32, torch.int64)):
            raise ValueError(f"normalizer must be a number or a one-element tensor, got a "
                             f"{normalizer.dtype} tensor of shape {tuple(normalizer.shape)}")
        return  # its value may live on a device: not read here (no host sync)
    if isinstance(normalizer, bool) or not isinstance(normalizer, numbers.Real) \
            or not math.isfinite(normalizer) or normalizer <= 0:
        raise ValueError(f"normalizer must be a positive finite number (the full batch's "
                         f"target count, see mean_normalizer), got {normalizer!r}")


def finish(loss: Tensor, target2d: Tensor, lead, reduction: str, ignore_index: int, dtype,
           row_weight: Optional[Tensor], normalizer: Optional[Normalizer]) -> Tensor:
    """reduce_loss, or with a normaliser the sum divided by it (in the accumulation dtype,
    then cast as reduce_loss casts)."""
    if normalizer is None:
        return reduce_loss(loss, target2d, lead, reduction, ignore_index, dtype, row_weight)
    total = reduce_loss(loss, target2d, lead, "sum", ignore_index, loss.dtype, row_weight)
    if isinstance(normalizer, Tensor):
        normalizer = normalizer.to(device=total.device, dtype=total.dtype).reshape(())
    out = total / normalizer
    return out if torch.is_autocast_enabled(loss.device.type) else out.to(dtype)


def mean_normalizer(target: Tensor, *, weight: Optional[Tensor] = None,
                    ignore_index: int = -100, num_true: int = 1) -> Tensor:
    """The divisor of `reduction='mean'` for `target` ([*], or [*, num_true]): the count of
    rows not ignored or, with a per-class `weight` [V], the sum of their targets' weights.
    Give the full batch's value as `normalizer=` to each micro-batch's 'sum' loss."""
    if not isinstance(target, Tensor) or target.dtype != torch.int64:
        raise TypeError("target must be an int64 tensor of class ids")
    if isinstance(num_true, bool) or not isinstance(num_true, int) or num_true < 1:
        raise ValueError(f"num_true must be a positive int, got {num_true!r}")
    first = target.reshape(-1, num_true)[:, 0] if target.numel() else target.reshape(-1)
    keep = first != ignore_index
    if weight is None:
        return keep.sum()
    if num_true != 1:
        raise ValueError("a per-class weight needs one true class per row (num_true=1)")
    safe = torch.where(keep, first, torch.zeros_like(first))
    return torch.where(keep, weight[safe], torch.zeros_like(weight[safe])).sum()


def check_z_loss(z_loss) -> float:
    if isinstance(z_loss, bool) or not isinstance(z_loss, numbers.Real) \
            or not math.isfinite(z_loss) or z_loss < 0:
        raise ValueError(f"z_loss must be a finite float >= 0 (the weight of logsumexp^2), "
                         f"got {z_loss!r}")
    return float(z_loss)


def check_softcap(softcap) -> Optional[float]:
    if softcap is None:
        return None
    if isinstance(softcap, bool) or not isinstance(softcap, numbers.Real) \
            or not math.isfinite(softcap) or softcap <= 0:
        raise ValueError(f"softcap must be None or a positive finite float (logits become "
                         f"softcap * tanh(logits / softcap)), got {softcap!r}")
    return float(softcap)


def refuse_full_softmax_extras(loss_name: str, z_loss=0.0, softcap=None) -> None:
    """The sampled losses see a sampled subset of the logits inside the op: their logsumexp
    is not the full softmax's, and a cap would have to act inside the kernel."""
    for name, value, off in (("z_loss", z_loss, 0.0), ("softcap", softcap, None)):
        if value != off:
            raise ValueError(
                f"{loss_name} does not support {name}: it needs the full softmax's "
                f"logsumexp (or, for softcap, each logit before the sampled correction); "
                f"use full_softmax_loss / FullSoftmaxLoss for it")
