"""Sampled output-layer losses: sampled softmax, NCE and negative sampling.

Shapes: input [*, D], weight [V, D], bias [V], target int64 [*] or [*, num_true]. Any
leading dims. Losses are computed per row in float32 (float64 for float64 input) and
returned in the input's dtype; `reduction='mean'` averages over rows not ignored (NaN when
every row is ignored or the batch is empty, as F.cross_entropy); 'sum' of an empty batch is 0
and 'none' returns shape [*].

Sampled softmax and NCE follow TensorFlow's `_compute_sampled_logits`: the logit of class c
is input.weight[c] + bias[c] - log(expected_count(c)), for the row's true classes and for one
candidate set shared by the batch; with `remove_accidental_hits` a sampled class equal to
one of the row's true classes is left out of that row. Negative sampling (word2vec) draws K
negatives per row (or K shared) and needs neither bias nor log-Q.
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import ops
from .samplers import LogUniformSampler, SampledValues, Sampler, UniformSampler

_REDUCTIONS = ("mean", "sum", "none")


def _check_common(input, weight, target, reduction) -> None:
    for name, t in (("input", input), ("weight", weight), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if input.dim() < 1:
        raise ValueError("input must have at least one dimension [*, D]")
    if weight.dim() != 2:
        raise ValueError(f"weight must be 2-D [V, D], got shape {tuple(weight.shape)}")
    if weight.shape[1] != input.shape[-1]:
        raise ValueError(
            f"weight has {weight.shape[1]} features per class but input has {input.shape[-1]}"
        )
    if target.dtype != torch.int64:
        raise TypeError(f"target must be an int64 tensor of class ids, got {target.dtype}")
    if target.device != input.device:
        raise ValueError(f"target is on {target.device} but input is on {input.device}")


def _target_2d(target: Tensor, lead: Tuple[int, ...], num_true: Optional[int]) -> Tensor:
    """target [*] or [*, T] -> [N, T]; num_true=None infers T from the shape."""
    if num_true is not None and (isinstance(num_true, bool) or not isinstance(num_true, int)
                                 or num_true < 1):
        raise ValueError(f"num_true must be a positive int, got {num_true!r}")
    if tuple(target.shape) == lead and num_true in (None, 1):
        return target.reshape(-1, 1)
    if (target.dim() == len(lead) + 1 and tuple(target.shape[:-1]) == lead
            and (num_true is None or target.shape[-1] == num_true)):
        return target.reshape(-1, target.shape[-1])
    want = f"{lead} or {lead + (num_true,)}" if num_true in (None, 1) else f"{lead + (num_true,)}"
    raise ValueError(
        f"target must have shape {want} for input of shape {lead} + (D,), "
        f"got {tuple(target.shape)}"
    )


def _reduce(loss: Tensor, target2d: Tensor, lead, reduction: str, ignore_index: int, dtype):
    if torch.is_autocast_enabled(loss.device.type):
        dtype = loss.dtype  # float32 under autocast, as F.cross_entropy
    if reduction == "none":
        return loss.reshape(lead).to(dtype)
    total = loss.sum()
    if reduction == "sum":
        return total.to(dtype)
    count = (target2d[:, 0] != ignore_index).sum()
    return (total / count).to(dtype)


def _check_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def _check_sampler(sampler, num_classes: int, device: torch.device) -> Sampler:
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sampler must be a fastsoftmax Sampler, got {type(sampler).__name__}")
    if sampler.num_classes != num_classes:
        raise ValueError(
            f"sampler draws from {sampler.num_classes} classes but weight has {num_classes}"
        )
    if sampler.device != device:
        raise ValueError(
            f"sampler is on {sampler.device} but input is on {device} (use sampler.to(device))"
        )
    return sampler


def draw_candidates(
    sampler: Sampler, true_classes: Tensor, num_sampled: int,
    generator: Optional[torch.Generator] = None,
) -> SampledValues:
    """`sampler.candidates(true_classes, num_sampled, unique=True)` without its host-side id
    check, so that it traces under torch.compile; the loss ops check every id natively.
    `true_classes` must hold valid ids (ignored rows replaced by any valid id)."""
    return sampler._draw_candidates(true_classes, num_sampled, True, generator)


def _sampled_loss(mode, input, weight, target, bias, num_sampled, sampler, sampled, num_true,
                  remove_accidental_hits, log_z, reduction, ignore_index, generator, sparse):
    _check_common(input, weight, target, reduction)
    lead = tuple(input.shape[:-1])
    t2 = _target_2d(target, lead, num_true)
    h = input.reshape(-1, input.shape[-1])
    V = weight.shape[0]
    if sampled is None:
        if num_sampled is None:
            raise ValueError("give either num_sampled (and optionally sampler) or sampled")
        num_sampled = _check_count(num_sampled, "num_sampled")
        if num_sampled > V:
            raise ValueError(f"cannot draw {num_sampled} distinct candidates from {V} classes")
        if sampler is None:
            sampler = LogUniformSampler(V, device=input.device)
        sampler = _check_sampler(sampler, V, input.device)
        safe = torch.where(t2 == ignore_index, torch.zeros_like(t2), t2)
        sampled = draw_candidates(sampler, safe, num_sampled, generator)
    else:
        if not (isinstance(sampled, tuple) and len(sampled) == 3):
            raise TypeError("sampled must be a SampledValues triple (sampler.candidates(...))")
        if num_sampled is not None and num_sampled != sampled[0].shape[0]:
            raise ValueError(
                f"num_sampled={num_sampled} but sampled holds {sampled[0].shape[0]} candidates"
            )
    candidates, true_count, sampled_count = sampled
    if not isinstance(log_z, Tensor):
        log_z = torch.tensor(float(log_z), device=input.device)
    true_count = true_count.reshape(t2.shape)
    loss, _, _ = ops.sampled_logits_forward(
        h, weight, bias, t2, candidates, true_count, sampled_count, log_z.reshape(()),
        mode, bool(remove_accidental_hits), int(ignore_index), bool(sparse),
    )
    return _reduce(loss, t2, lead, reduction, ignore_index, input.dtype)


def sampled_softmax_loss(
    input: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Optional[Tensor] = None,
    *,
    num_sampled: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    sampled: Optional[SampledValues] = None,
    num_true: int = 1,
    remove_accidental_hits: bool = True,
    reduction: str = "mean",
    ignore_index: int = -100,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    """Softmax cross entropy over [true..., sampled...] logits with label mass 1/num_true on
    each true class (tf.nn.sampled_softmax_loss). One candidate set of `num_sampled` distinct
    classes is drawn from `sampler` (default LogUniformSampler) per call, shared by the batch,
    unless `sampled` is given."""
    return _sampled_loss(ops.MODE_SOFTMAX, input, weight, target, bias, num_sampled, sampler,
                         sampled, num_true, remove_accidental_hits, 0.0, reduction,
                         ignore_index, generator, False)


def nce_loss(
    input: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Optional[Tensor] = None,
    *,
    num_sampled: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    sampled: Optional[SampledValues] = None,
    num_true: int = 1,
    remove_accidental_hits: bool = False,
    log_z=0.0,
    reduction: str = "mean",
    ignore_index: int = -100,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    """Noise-contrastive estimation (tf.nn.nce_loss): per row, the sum of sigmoid cross
    entropies of the true logits (label 1/num_true) and sampled logits (label 0), every logit
    shifted by -log_z (a float, or a tensor to learn it; 0 = self-normalised)."""
    return _sampled_loss(ops.MODE_NCE, input, weight, target, bias, num_sampled, sampler,
                         sampled, num_true, remove_accidental_hits, log_z, reduction,
                         ignore_index, generator, False)


def negative_sampling_loss(
    input: Tensor,
    weight: Tensor,
    target: Tensor,
    *,
    num_negatives: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    negatives: Optional[Tensor] = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    """word2vec's loss: per row, -sum_true log s(w_t.h) - sum_k log s(-w_k.h). target [*] or
    [*, T]; negatives int64 [*, K] (per row) or [K] (shared). When not given, K =
    `num_negatives` per-row negatives are drawn from `sampler` (default uniform). Negatives
    equal to a true class are kept, as in the formula (word2vec.c skips them)."""
    return _negative_sampling(input, weight, target, num_negatives, sampler, negatives,
                              reduction, ignore_index, generator, False)


def _negative_sampling(input, weight, target, num_negatives, sampler, negatives, reduction,
                       ignore_index, generator, sparse):
    _check_common(input, weight, target, reduction)
    lead = tuple(input.shape[:-1])
    t2 = _target_2d(target, lead, None)
    h = input.reshape(-1, input.shape[-1])
    V = weight.shape[0]
    if negatives is None:
        if num_negatives is None:
            raise ValueError("give either num_negatives (and optionally sampler) or negatives")
        num_negatives = _check_count(num_negatives, "num_negatives")
        if sampler is None:
            sampler = UniformSampler(V, device=input.device)
        sampler = _check_sampler(sampler, V, input.device)
        neg = sampler.sample(h.shape[0], num_negatives, generator=generator)
    else:
        if not isinstance(negatives, Tensor):
            raise TypeError(f"negatives must be a tensor, got {type(negatives).__name__}")
        if num_negatives is not None and num_negatives != negatives.shape[-1]:
            raise ValueError(
                f"num_negatives={num_negatives} but negatives has {negatives.shape[-1]} per row"
            )
        if negatives.dim() == 1:
            neg = negatives
        elif negatives.dim() == len(lead) + 1 and tuple(negatives.shape[:-1]) == lead:
            neg = negatives.reshape(-1, negatives.shape[-1])
        else:
            raise ValueError(
                f"negatives must have shape {lead + ('K',)} (per row) or (K,) (shared), got "
                f"{tuple(negatives.shape)}"
            )
    loss, _ = ops.negative_sampling_forward(h, weight, t2, neg, int(ignore_index), bool(sparse))
    return _reduce(loss, t2, lead, reduction, ignore_index, input.dtype)


__all__ = ["draw_candidates", "nce_loss", "negative_sampling_loss", "sampled_softmax_loss"]
