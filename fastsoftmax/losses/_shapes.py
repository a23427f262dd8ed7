"""Argument checks, target shapes and loss reductions shared by every loss.

Shapes: input [*, D], linear_weight [V, D], target int64 [*] or [*, T]; N = the rows of
input. `weight` is a per-class rescaling [V], as in torch.nn.CrossEntropyLoss.
"""

import math
import operator
from typing import Optional, Tuple

import torch
from torch import Tensor

from ..ops import _checks

REDUCTIONS = ("mean", "sum", "none")


def check_inputs(input, linear_weight, target, reduction) -> None:
    """Types, ranks, feature sizes, dtype and device of a loss's main arguments."""
    for name, t in (("input", input), ("linear_weight", linear_weight), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    check_reduction(reduction)
    if input.dim() < 1:
        raise ValueError("input must have at least one dimension [*, D]")
    if linear_weight.dim() != 2:
        raise ValueError(f"linear_weight must be 2-D [V, D], got shape "
                         f"{tuple(linear_weight.shape)}")
    if linear_weight.shape[1] != input.shape[-1]:
        raise ValueError(f"linear_weight has {linear_weight.shape[1]} features per class but "
                         f"input has {input.shape[-1]}")
    if target.dtype != torch.int64:
        raise TypeError(f"target must be an int64 tensor of class ids, got {target.dtype}")
    if target.device != input.device:
        raise ValueError(f"target is on {target.device} but input is on {input.device}")


def check_reduction(reduction) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")


def check_class_weight(weight, num_classes: int, device: torch.device,
                       num_true: int = 1) -> Optional[Tensor]:
    """The per-class rescaling `weight` (torch.nn.CrossEntropyLoss's): None, or a floating
    1-D tensor with one entry per class on the input's device."""
    if weight is None:
        return None
    if not isinstance(weight, Tensor):
        raise TypeError(f"weight (a per-class rescaling, as in nn.CrossEntropyLoss) must be a "
                        f"tensor of shape ({num_classes},), got {type(weight).__name__}")
    if tuple(weight.shape) != (num_classes,):
        hint = (" (the output embedding is now called linear_weight)" if weight.dim() == 2
                else "")
        raise ValueError(f"weight (a per-class rescaling) must have shape ({num_classes},), "
                         f"got {tuple(weight.shape)}{hint}")
    if not weight.is_floating_point():
        raise TypeError(f"weight (a per-class rescaling) must be floating point, got "
                        f"{weight.dtype}")
    if weight.device != device:
        raise ValueError(f"weight is on {weight.device} but input is on {device}")
    if num_true != 1:
        raise ValueError(f"a per-class weight needs one true class per row; target has "
                         f"{num_true} (the weighting of several true classes is undefined)")
    return weight


def check_target_range(safe: Tensor, num_classes: int) -> Tensor:
    """`safe` (the targets, ignored rows replaced by a valid id) once every id is known to lie
    in [0, num_classes) (fastsoftmax.ops._checks.checked_ids: no host sync under
    torch.compile or within deferred checks). The ops check ids too, but the exact losses use
    the targets before any op runs."""
    return _checks.checked_ids(safe, num_classes, "target")


def check_label_smoothing(value) -> float:
    """A float in [0, 1], as F.cross_entropy's label_smoothing."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"label_smoothing must be a float in [0, 1], got {value!r}")
    return float(value)


def as_int(name: str, value) -> int:
    """An integer as a Python int: every numbers.Integral (numpy and torch integer scalars
    too, through __index__), never a bool or a float."""
    try:
        if isinstance(value, bool) or (isinstance(value, Tensor) and value.dtype == torch.bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})") \
            from None


def check_size(name: str, value) -> int:
    """A positive int: Python or numpy/torch integer scalars, never bools or floats."""
    try:
        value = as_int(name, value)
    except TypeError:
        raise ValueError(f"{name} must be a positive int, got {value!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_count(value, name: str) -> int:
    """A positive int (any integer type but bool)."""
    value = as_int(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def check_generator(generator) -> None:
    """None or a CPU torch.Generator, checked where the caller gives it (also when this call
    draws nothing with it): every fastsoftmax draw is a function of a seed taken from a CPU
    generator, so CPU and CUDA draw the same ids."""
    if generator is None:
        return
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator (on the CPU) or None, got "
                        f"{type(generator).__name__}")
    if generator.device.type != "cpu":
        raise ValueError(
            "fastsoftmax samplers take a CPU torch.Generator on every device (the draw is a "
            "function of a seed taken from it, so CPU and CUDA give the same ids); got a "
            f"generator on {generator.device}")


def target_2d(target: Tensor, lead: Tuple[int, ...], num_true: Optional[int]) -> Tensor:
    """target [*] or [*, T] -> [N, T]; num_true=None infers T from the shape."""
    if num_true is not None:
        num_true = check_size("num_true", num_true)
    if tuple(target.shape) == lead and num_true in (None, 1):
        return target.reshape(math.prod(lead), 1)  # explicit N: reshape(-1, 0) is ambiguous
    if (target.dim() == len(lead) + 1 and tuple(target.shape[:-1]) == lead
            and (num_true is None or target.shape[-1] == num_true)):
        return target.reshape(math.prod(lead), target.shape[-1])
    if num_true is None:  # any T: name it, a shape like (8, None) means nothing
        want = f"{lead} or {_shape_text(lead + ('num_true',))}"
    elif num_true == 1:
        want = f"{lead} or {lead + (1,)}"
    else:
        want = f"{lead + (num_true,)}"
    raise ValueError(
        f"target must have shape {want} for input of shape {lead} + (D,), "
        f"got {tuple(target.shape)}"
    )


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def reduce_loss(loss: Tensor, target2d: Tensor, lead, reduction: str, ignore_index: int, dtype,
                row_weight: Optional[Tensor] = None):
    """Per-row losses [N] -> the reduction, in `dtype`. 'mean' divides by the rows whose first
    target is not ignore_index (NaN when there are none, as F.cross_entropy); with per-class
    weights, by the sum of those rows' target weights `row_weight` [N], as F.cross_entropy."""
    if torch.is_autocast_enabled(loss.device.type):
        dtype = loss.dtype  # float32 under autocast, as F.cross_entropy
    if reduction == "none":
        return loss.reshape(lead).to(dtype)
    total = loss.sum()
    if reduction == "sum":
        return total.to(dtype)
    keep = target2d[:, 0] != ignore_index
    if row_weight is None:
        count = keep.sum()
    else:
        count = torch.where(keep, row_weight, torch.zeros_like(row_weight)).sum()
    return (total / count).to(dtype)
