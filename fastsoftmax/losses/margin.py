"""Margin (hinge) losses over the output embedding, functionals and modules: the multiclass
hinge loss of torch.nn.functional.multi_margin_loss (MultiMarginLoss, exact in training and
eval), the margin-ranking loss of the memory networks, exact over the vocabulary or over K
sampled negatives (SampledMarginRankingLoss: sampled in training, exact in eval), and WARP
(WARPLoss: WARP in training, the exact loss it estimates in eval).

Every score is s(x, c) = input.linear_weight[c] + linear_bias[c]. The scores are matrix
products done by torch (BLAS / cuBLAS); the per-row hinge reduction and its gradient are the
native op `margin_rank_forward` / `margin_rank_backward` (fastsoftmax.ops.margin). The exact
losses stream the vocabulary in blocks of at most `chunk_bytes` of scores and make the blocks
again in the backward (fastsoftmax/losses/_margin_stream.py): no [N, V] block larger than that
exists, in training or in eval. Like every layer of the family the modules hold the output
embedding as the nn.Linear `linear` and have `log_prob` and `predict` (the softmax and argmax
of the same scores).

Shapes: input [*, D], linear_weight [V, D], linear_bias [V], target int64 [*] (a row whose
target is ignore_index contributes nothing; 'mean' averages over the other rows).
Samples are drawn as a separate step (or given): the ops take them as input, and backward
never redraws them.
"""

import math
import numbers
from typing import Optional, Union

import torch
from torch import Tensor

from .. import ops
from ..ops import _checks
from ._layer_parts import SAMPLER_ARGS, refuse_label_smoothing
from ._margin_stream import StreamedHinge, scores
from ._reduction import finish, loss_rows
from ._shapes import check_generator, check_target_range
from ._streaming import CHUNK_BYTES
from ..samplers import Sampler, UniformSampler
from ._sampling import SampledLayer, negatives_as_rows, sampler_for
from .full import LinearLayer, with_layer_keywords

_NEGATIVES_REDUCTIONS = ("sum", "mean")
_NO_SMOOTHING = "a hinge loss has no target distribution to smooth"


def check_margin(margin, *, allow_negative: bool) -> float:
    """`margin` as a float, or a ValueError: a finite number (>= 0 unless allow_negative)."""
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) \
            or not math.isfinite(margin) or (margin < 0 and not allow_negative):
        need = "a finite number" if allow_negative else "a finite number >= 0"
        raise ValueError(f"margin must be {need}, got {margin!r}")
    return float(margin)


def _check_p(p) -> int:
    if isinstance(p, bool) or not isinstance(p, numbers.Integral) or int(p) not in (1, 2):
        raise ValueError(f"p must be 1 or 2 (as torch.nn.functional.multi_margin_loss), "
                         f"got {p!r}")
    return int(p)


def _rows(input, linear_weight, target, reduction, linear_bias, ignore_index):
    """(lead, target [N, 1], input [N, D], target [N], target [N] with ignored rows as
    class 0)."""
    lead, t2, h, _ = loss_rows(input, linear_weight, target, reduction, 1, None, None)
    if linear_bias is not None and (not isinstance(linear_bias, Tensor)
                                    or tuple(linear_bias.shape) != (linear_weight.shape[0],)):
        shape = tuple(linear_bias.shape) if isinstance(linear_bias, Tensor) else linear_bias
        raise ValueError(f"linear_bias must have shape ({linear_weight.shape[0]},), got {shape}")
    t = t2[:, 0]
    return lead, t2, h, t, torch.where(t == ignore_index, torch.zeros_like(t), t)


def _stream_hinge(h, linear_weight, linear_bias, t, safe, margin, p, ignore_index,
                  chunk_bytes) -> Tensor:
    """sum over classes c != t_n of max(0, margin - s_t + s_c)^p per row [N] (p = 0: the
    count of violators), over blocks of at most chunk_bytes of scores, in the forward and
    (made again) in the backward."""
    # The op checks ids too, but the exact losses gather the target rows before any op runs.
    safe = check_target_range(safe, linear_weight.shape[0])
    return StreamedHinge.apply(h, linear_weight, linear_bias, t, safe, margin, p, ignore_index,
                               chunk_bytes)


def multi_margin_loss(
    input: Tensor, linear_weight: Tensor, target: Tensor, *,
    linear_bias: Optional[Tensor] = None, margin: float = 1.0, p: int = 1,
    weight: Optional[Tensor] = None, reduction: str = "mean", ignore_index: int = -100,
    chunk_bytes: int = CHUNK_BYTES,
) -> Tensor:
    """torch.nn.functional.multi_margin_loss of the scores x = input.linear_weightᵀ +
    linear_bias over all V classes, exact, streamed in blocks of `chunk_bytes`:

        loss_n = sum_{i != y} weight[y] * max(0, margin - x[y] + x[i])^p / V

    (`weight` [V] multiplies each row by its target's weight after the power, as torch's
    kernel does; 'mean' divides by the number of rows, not by the weights). p is 1 or 2.
    Rows whose target is `ignore_index` contribute 0 and are not counted by 'mean' (torch's
    function has no ignore_index; with none ignored the two agree)."""
    lead, t2, h, t, safe = _rows(input, linear_weight, target, reduction, linear_bias,
                                 ignore_index)
    p, margin = _check_p(p), check_margin(margin, allow_negative=True)
    V = linear_weight.shape[0]
    if weight is not None:
        if not isinstance(weight, Tensor) or weight.dim() != 1 or weight.shape[0] != V \
                or not weight.is_floating_point():
            raise ValueError(f"weight must be a floating 1-D tensor with one entry per class "
                             f"({V}), got {getattr(weight, 'shape', weight)!r}")
    loss = _stream_hinge(h, linear_weight, linear_bias, t, safe, margin, p, int(ignore_index),
                         chunk_bytes) / V
    if weight is not None:
        loss = loss * weight.to(loss.dtype)[safe]
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, None, None)


def full_margin_ranking_loss(
    input: Tensor, linear_weight: Tensor, target: Tensor, *, margin: float = 1.0,
    linear_bias: Optional[Tensor] = None, reduction: str = "mean", ignore_index: int = -100,
    chunk_bytes: int = CHUNK_BYTES,
) -> Tensor:
    """The exact margin-ranking loss of the memory networks over the whole vocabulary,
    per row sum_{y' != y} max(0, margin - s(x, y) + s(x, y')), streamed in blocks of
    `chunk_bytes` (multi_margin_loss with p = 1, times V)."""
    lead, t2, h, t, safe = _rows(input, linear_weight, target, reduction, linear_bias,
                                 ignore_index)
    margin = check_margin(margin, allow_negative=False)
    loss = _stream_hinge(h, linear_weight, linear_bias, t, safe, margin, 1, int(ignore_index),
                         chunk_bytes)
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, None, None)


def full_warp_loss(input: Tensor, linear_weight: Tensor, target: Tensor, *,
                   margin: float = 1.0, linear_bias: Optional[Tensor] = None,
                   reduction: str = "mean", ignore_index: int = -100,
                   chunk_bytes: int = CHUNK_BYTES) -> Tensor:
    """The loss WARP estimates (Weston et al., 2011), exact: with r the number of violating
    classes (y' != y with margin - s_y + s_y' > 0) and S the sum of their hinges, per row
    L(r) * S / r (0 when r = 0), L(r) = 1 + 1/2 + ... + 1/r held constant in the gradient.
    Streamed in blocks of `chunk_bytes`."""
    lead, t2, h, t, safe = _rows(input, linear_weight, target, reduction, linear_bias,
                                 ignore_index)
    args = (h, linear_weight, linear_bias, t, safe, check_margin(margin, allow_negative=False))
    with torch.no_grad():
        r = _stream_hinge(*args, 0, int(ignore_index), chunk_bytes)
    total = _stream_hinge(*args, 1, int(ignore_index), chunk_bytes)
    # L(r) = digamma(r + 1) + Euler's gamma, exactly the harmonic number for integer r.
    rank_weight = torch.where(r > 0, (torch.special.digamma(r + 1) + 0.5772156649015329)
                              / r.clamp_min(1), torch.zeros_like(r))
    return finish(total * rank_weight, t2, lead, reduction, ignore_index, input.dtype, None,
                  None)


def _negatives(h, V, lead, num_sampled, sampler, sampled, generator):
    """The candidates [N, K] (per row) or [K] (shared): `sampled` as given, else drawn per
    row from `sampler` (default: uniform) with replacement."""
    check_generator(generator)
    if sampled is None:
        sampler, num_sampled = sampler_for(sampler, num_sampled, "num_sampled", "sampled", V,
                                           h.device, UniformSampler)
        return sampler.sample(h.shape[0], num_sampled, generator=generator)
    if isinstance(sampled, tuple) and len(sampled) == 3:  # a SampledValues triple: shared
        sampled = sampled[0]
    if not isinstance(sampled, Tensor) or sampled.dtype != torch.int64:
        raise TypeError("sampled must be an int64 tensor of class ids, [*, K] (per row) or "
                        "[K] (shared)")
    if num_sampled is not None and num_sampled != sampled.shape[-1]:
        raise ValueError(f"num_sampled={num_sampled} but sampled holds {sampled.shape[-1]} "
                         f"per row")
    if sampled.device != h.device:
        raise ValueError(f"sampled is on {sampled.device} but input is on {h.device}")
    neg = negatives_as_rows(sampled, "sampled", lead, h.shape[0])
    return _checks.checked_ids(neg, V, "sampled")


def _sampled_margin(mode, input, linear_weight, target, num_sampled, sampler, margin,
                    linear_bias, reduction, ignore_index, generator, sampled, per_negative):
    lead, t2, h, t, safe = _rows(input, linear_weight, target, reduction, linear_bias,
                                 ignore_index)
    margin = check_margin(margin, allow_negative=False)
    V = linear_weight.shape[0]
    safe = check_target_range(safe, V)
    neg = _negatives(h, V, lead, num_sampled, sampler, sampled, generator)
    s_t, s_neg = scores(h, linear_weight, linear_bias, safe, neg)
    loss = ops.margin_rank_forward(s_neg, s_t, t, neg, margin, 1, mode, V, int(ignore_index))
    if per_negative == "mean":  # over the row's negatives that are not its target
        kept = (neg != t[:, None]) if neg.dim() == 2 else (neg[None, :] != t[:, None])
        loss = loss / kept.sum(1).clamp_min(1).to(loss.dtype)
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, None, None)


def sampled_margin_ranking_loss(
    input: Tensor, linear_weight: Tensor, target: Tensor, *,
    num_sampled: Optional[int] = None, sampler: Optional[Sampler] = None, margin: float = 1.0,
    linear_bias: Optional[Tensor] = None, reduction: str = "mean",
    generator: Optional[torch.Generator] = None, sampled: Optional[Tensor] = None,
    ignore_index: int = -100, negatives_reduction: str = "sum",
) -> Tensor:
    """The margin-ranking loss over K sampled negatives: per row
    sum_k max(0, margin - s(x, y) + s(x, ỹ_k)), negatives equal to the target left out
    (accidental hits). `negatives_reduction='mean'` divides by the row's negatives kept.

    The negatives are `sampled` (int64 [*, K] per row, or [K] shared by the batch, also as
    the SampledValues of sampler.candidates) or, when not given, K = `num_sampled` per row
    drawn with replacement from `sampler` (default uniform over the V classes) with
    `generator`. With the uniform sampler, the sum's expectation times V / K is the exact
    loss of full_margin_ranking_loss."""
    if negatives_reduction not in _NEGATIVES_REDUCTIONS:
        raise ValueError(f"negatives_reduction must be one of {_NEGATIVES_REDUCTIONS}, got "
                         f"{negatives_reduction!r}")
    return _sampled_margin(ops.MODE_HINGE, input, linear_weight, target, num_sampled, sampler,
                           margin, linear_bias, reduction, ignore_index, generator, sampled,
                           negatives_reduction)


def warp_loss(input: Tensor, linear_weight: Tensor, target: Tensor, *,
              num_sampled: Optional[int] = None, sampler: Optional[Sampler] = None,
              margin: float = 1.0, linear_bias: Optional[Tensor] = None,
              reduction: str = "mean", generator: Optional[torch.Generator] = None,
              sampled: Optional[Tensor] = None, ignore_index: int = -100) -> Tensor:
    """WARP (Weston et al., 2011) on a block of K candidates drawn up front, in draw order:
    the first candidate ỹ (not the target) with s(x, ỹ) > s(x, y) - margin is the violator;
    N its 1-based trial count (draws equal to the target are no trials), the rank estimate
    r = floor((V - 1) / N), and the row's loss L(r) * (margin - s(x, y) + s(x, ỹ)) with
    L(r) = 1 + 1/2 + ... + 1/r; 0 when none of the K violates. This is WARP's sampling
    until a violator is found, stopped after K trials, with the draws made in one step so
    that the loss is deterministic given `sampled` ([*, K] per row, or [K] shared; drawn
    per row from `sampler`, default uniform, when not given)."""
    return _sampled_margin(ops.MODE_WARP, input, linear_weight, target, num_sampled, sampler,
                           margin, linear_bias, reduction, ignore_index, generator, sampled,
                           "sum")


# Docstring text of the layer keywords (torch.nn.LinearCrossEntropyLoss's) as the margin
# layers read them.
_LAYER_ARGS = """
        out_features: only () (one class id per row); any other value is refused.
        bias: learn a bias `linear.bias` [V] added to every score (default False).
        linear_weight: an existing nn.Parameter [V, D] as the output embedding (pass
            embedding.weight to tie them); default: a new one, N(0, 1/D). Held as
            `linear.weight`, as in torch.nn.LinearCrossEntropyLoss.
        reduction: 'mean' (over the rows not ignored), 'sum' or 'none'.
        ignore_index: target value whose rows contribute nothing (default None: -100).
        label_smoothing: only 0.0 (a hinge loss has no target distribution to smooth).
        options: only None.
        device, dtype: of the parameters and buffers, as for torch.nn.Linear."""

_SAMPLING_ARGS = SAMPLER_ARGS.format(default="uniform").split("        sparse:")[0].rstrip()


def _no_class_weight(layer: str, weight) -> None:
    if weight is not None:
        raise ValueError(f"{layer} does not take a per-class weight: its loss is a sum of "
                         f"hinges over classes (MultiMarginLoss takes weight=)")


@with_layer_keywords
class MultiMarginLoss(LinearLayer):
    __doc__ = """torch.nn.MultiMarginLoss on the scores input.linear.weightᵀ + linear.bias over
    all V classes, exact in training and eval, streamed in blocks of `chunk_bytes` (see
    multi_margin_loss). It has no sampled training mode.

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        margin: the hinge's margin (default 1.0).
        p: 1 or 2, the power of each hinge (default 1).
        weight: per-class weight [V]: row n's loss is multiplied by weight[target_n], and
            'mean' divides by the number of rows (torch.nn.MultiMarginLoss's rule).""" + \
        _LAYER_ARGS

    def __init__(self, in_features: int, num_classes: int, *, margin: float = 1.0, p: int = 1,
                 **layer):
        refuse_label_smoothing("MultiMarginLoss", layer.get("label_smoothing", 0.0),
                               _NO_SMOOTHING)
        super().__init__(in_features, num_classes, **layer)
        self.margin = check_margin(margin, allow_negative=True)
        self.p = _check_p(p)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        return multi_margin_loss(
            input, self.linear_weight, target, linear_bias=self.linear_bias,
            margin=self.margin, p=self.p, weight=self.weight,
            reduction=self.reduction if reduction is None else reduction,
            ignore_index=self.ignore_index, chunk_bytes=self.chunk_bytes)

    def training_loss(self, input, target, generator=None):
        return self.full_loss(input, target)  # exact: draws nothing

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, margin={self.margin}, p={self.p}"


class _MarginSampledLayer(SampledLayer):
    """A ranking layer: K candidates per row drawn from the sampler (default uniform)."""

    num_samples_arg = "num_sampled"

    def __init__(self, in_features, num_classes, num_sampled, *, margin, sampler, counts,
                 vocab, power, **layer):
        name = type(self).__name__
        refuse_label_smoothing(name, layer.get("label_smoothing", 0.0), _NO_SMOOTHING)
        _no_class_weight(name, layer.get("weight"))
        super().__init__(in_features, num_classes, num_sampled, sampler=sampler, counts=counts,
                         vocab=vocab, power=power, sparse=False, default_sampler="uniform",
                         **layer)
        self.margin = check_margin(margin, allow_negative=False)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, num_sampled={self.num_sampled}, margin={self.margin}"


_RANKING_ARGS = """

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        num_sampled: K, the candidates drawn per row (with replacement).
        margin: γ >= 0 (default 1.0).
        weight: only None (a per-class weight is MultiMarginLoss's)."""


@with_layer_keywords
class SampledMarginRankingLoss(_MarginSampledLayer):
    __doc__ = """The margin-ranking loss of the memory networks. Training: per row
    sum_k max(0, γ - s(x, y) + s(x, ỹ_k)) over K negatives drawn per row (negatives equal
    to the target left out); eval: the exact sum over every class y' != y
    (full_margin_ranking_loss). With `negatives_reduction='mean'` the
    training loss averages over the row's kept negatives and the eval loss divides the exact
    sum by V - 1.""" + _RANKING_ARGS + """
        negatives_reduction: 'sum' (default) or 'mean' over the negatives.""" + \
        _SAMPLING_ARGS + _LAYER_ARGS

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 margin: float = 1.0, negatives_reduction: str = "sum",
                 sampler: Union[Sampler, str, None] = None, counts=None, vocab=None,
                 power: float = 0.75, **layer):
        if negatives_reduction not in _NEGATIVES_REDUCTIONS:
            raise ValueError(f"negatives_reduction must be 'sum' or 'mean', got "
                             f"{negatives_reduction!r}")
        super().__init__(in_features, num_classes, num_sampled, margin=margin, sampler=sampler,
                         counts=counts, vocab=vocab, power=power, **layer)
        self.negatives_reduction = negatives_reduction

    def training_loss(self, input, target, generator=None):
        return sampled_margin_ranking_loss(
            input, self.linear_weight, target, num_sampled=self.num_sampled,
            sampler=self.sampler, margin=self.margin, linear_bias=self.linear_bias,
            reduction=self.reduction, generator=generator, ignore_index=self.ignore_index,
            negatives_reduction=self.negatives_reduction)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        reduction = self.reduction if reduction is None else reduction
        loss = full_margin_ranking_loss(
            input, self.linear_weight, target, margin=self.margin,
            linear_bias=self.linear_bias, reduction=reduction,
            ignore_index=self.ignore_index, chunk_bytes=self.chunk_bytes)
        if self.negatives_reduction == "mean":
            loss = loss / max(self.num_classes - 1, 1)
        return loss


@with_layer_keywords
class WARPLoss(_MarginSampledLayer):
    __doc__ = """WARP (Weston et al., 2011). Training: K candidates drawn per row up front, the
    first violator in draw order weighted by L(floor((V - 1) / N)), N its trial count
    (warp_loss); eval: the loss WARP estimates, L(r) / r times the sum of
    the r violators' hinges (full_warp_loss).""" + _RANKING_ARGS + \
        _SAMPLING_ARGS + _LAYER_ARGS

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 margin: float = 1.0, sampler: Union[Sampler, str, None] = None, counts=None,
                 vocab=None, power: float = 0.75, **layer):
        super().__init__(in_features, num_classes, num_sampled, margin=margin, sampler=sampler,
                         counts=counts, vocab=vocab, power=power, **layer)

    def training_loss(self, input, target, generator=None):
        return warp_loss(
            input, self.linear_weight, target, num_sampled=self.num_sampled,
            sampler=self.sampler, margin=self.margin, linear_bias=self.linear_bias,
            reduction=self.reduction, generator=generator, ignore_index=self.ignore_index)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        return full_warp_loss(
            input, self.linear_weight, target, margin=self.margin,
            linear_bias=self.linear_bias,
            reduction=self.reduction if reduction is None else reduction,
            ignore_index=self.ignore_index, chunk_bytes=self.chunk_bytes)


__all__ = ["MultiMarginLoss", "SampledMarginRankingLoss", "WARPLoss", "check_margin",
           "full_margin_ranking_loss", "full_warp_loss", "multi_margin_loss",
           "sampled_margin_ranking_loss", "warp_loss"]
