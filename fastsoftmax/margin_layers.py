"""The margin (hinge) output layers of the family (fastsoftmax.nn): MultiMarginLoss (the
multiclass hinge loss, exact in training and eval), SampledMarginRankingLoss (the memory
networks' ranking loss over sampled negatives in training, exact over the vocabulary in eval)
and WARPLoss (WARP in training, the exact loss it estimates in eval). Registered as the heads
'multi_margin', 'margin_ranking' and 'warp'; the functionals are in fastsoftmax.margin.

Like every layer of the family they hold the output embedding as the nn.Linear `linear` and
have `log_prob` and `predict` (the softmax and argmax of the same scores).
"""

from typing import Optional, Union

from torch import Tensor

from . import margin as M
from . import nn as _nn
from ._layer_parts import SAMPLER_ARGS
from .margin import check_margin
from .nn import _LinearLayer, _SampledLayer, _with_layer_keywords, register_head
from .samplers import Sampler


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


def _refuse_label_smoothing(layer: str, value) -> None:
    if value != 0.0:
        raise ValueError(f"{layer} does not support label_smoothing (got {value!r}): a hinge "
                         f"loss has no target distribution to smooth")


def _no_class_weight(layer: str, weight) -> None:
    if weight is not None:
        raise ValueError(f"{layer} does not take a per-class weight: its loss is a sum of "
                         f"hinges over classes (MultiMarginLoss takes weight=)")


@_with_layer_keywords
class MultiMarginLoss(_LinearLayer):
    __doc__ = """torch.nn.MultiMarginLoss on the scores input.linear.weightᵀ + linear.bias over
    all V classes, exact in training and eval, streamed in blocks of `chunk_bytes` (see
    fastsoftmax.margin.multi_margin_loss). It has no sampled training mode.

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
        _refuse_label_smoothing("MultiMarginLoss", layer.get("label_smoothing", 0.0))
        super().__init__(in_features, num_classes, **layer)
        self.margin = check_margin(margin, allow_negative=True)
        self.p = M._check_p(p)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        return M.multi_margin_loss(
            input, self.linear_weight, target, linear_bias=self.linear_bias,
            margin=self.margin, p=self.p, weight=self.weight,
            reduction=self.reduction if reduction is None else reduction,
            ignore_index=self.ignore_index, chunk_bytes=self.chunk_bytes)

    def training_loss(self, input, target, generator=None):
        return self.full_loss(input, target)  # exact: draws nothing

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, margin={self.margin}, p={self.p}"


class _MarginSampledLayer(_SampledLayer):
    """A ranking layer: K candidates per row drawn from the sampler (default uniform)."""

    num_samples_arg = "num_sampled"

    def __init__(self, in_features, num_classes, num_sampled, *, margin, sampler, counts,
                 vocab, power, **layer):
        name = type(self).__name__
        _refuse_label_smoothing(name, layer.get("label_smoothing", 0.0))
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


class SampledMarginRankingLoss(_MarginSampledLayer):
    __doc__ = """The margin-ranking loss of the memory networks. Training: per row
    sum_k max(0, γ - s(x, y) + s(x, ỹ_k)) over K negatives drawn per row (negatives equal
    to the target left out); eval: the exact sum over every class y' != y
    (fastsoftmax.margin.full_margin_ranking_loss). With `negatives_reduction='mean'` the
    training loss averages over the row's kept negatives and the eval loss divides the exact
    sum by V - 1.""" + _RANKING_ARGS + """
        negatives_reduction: 'sum' (default) or 'mean' over the negatives.""" + \
        _SAMPLING_ARGS + _LAYER_ARGS

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 margin: float = 1.0, negatives_reduction: str = "sum",
                 sampler: Union[Sampler, str, None] = None, counts=None, vocab=None,
                 power: float = 0.75, **layer):
        if negatives_reduction not in ("sum", "mean"):
            raise ValueError(f"negatives_reduction must be 'sum' or 'mean', got "
                             f"{negatives_reduction!r}")
        super().__init__(in_features, num_classes, num_sampled, margin=margin, sampler=sampler,
                         counts=counts, vocab=vocab, power=power, **layer)
        self.negatives_reduction = negatives_reduction

    def training_loss(self, input, target, generator=None):
        return M.sampled_margin_ranking_loss(
            input, self.linear_weight, target, num_sampled=self.num_sampled,
            sampler=self.sampler, margin=self.margin, linear_bias=self.linear_bias,
            reduction=self.reduction, generator=generator, ignore_index=self.ignore_index,
            negatives_reduction=self.negatives_reduction)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        reduction = self.reduction if reduction is None else reduction
        loss = M.full_margin_ranking_loss(
            input, self.linear_weight, target, margin=self.margin,
            linear_bias=self.linear_bias, reduction=reduction,
            ignore_index=self.ignore_index, chunk_bytes=self.chunk_bytes)
        if self.negatives_reduction == "mean":
            loss = loss / max(self.num_classes - 1, 1)
        return loss


class WARPLoss(_MarginSampledLayer):
    __doc__ = """WARP (Weston et al., 2011). Training: K candidates drawn per row up front, the
    first violator in draw order weighted by L(floor((V - 1) / N)), N its trial count
    (fastsoftmax.margin.warp_loss); eval: the loss WARP estimates, L(r) / r times the sum of
    the r violators' hinges (fastsoftmax.margin.full_warp_loss).""" + _RANKING_ARGS + \
        _SAMPLING_ARGS + _LAYER_ARGS

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 margin: float = 1.0, sampler: Union[Sampler, str, None] = None, counts=None,
                 vocab=None, power: float = 0.75, **layer):
        super().__init__(in_features, num_classes, num_sampled, margin=margin, sampler=sampler,
                         counts=counts, vocab=vocab, power=power, **layer)

    def training_loss(self, input, target, generator=None):
        return M.warp_loss(
            input, self.linear_weight, target, num_sampled=self.num_sampled,
            sampler=self.sampler, margin=self.margin, linear_bias=self.linear_bias,
            reduction=self.reduction, generator=generator, ignore_index=self.ignore_index)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        return M.full_warp_loss(
            input, self.linear_weight, target, margin=self.margin,
            linear_bias=self.linear_bias,
            reduction=self.reduction if reduction is None else reduction,
            ignore_index=self.ignore_index, chunk_bytes=self.chunk_bytes)


for _layer in (SampledMarginRankingLoss, WARPLoss):
    _with_layer_keywords(_layer).__init__.__doc__ = _layer.__doc__
MultiMarginLoss.__init__.__doc__ = MultiMarginLoss.__doc__

# Also fastsoftmax.nn.<name>, beside the rest of the family: nn.py imports its other layers
# from their own modules, but it is at the 400-line limit, so the names are added from here.
for _layer in (MultiMarginLoss, SampledMarginRankingLoss, WARPLoss):
    setattr(_nn, _layer.__name__, _layer)
    _nn.__all__.append(_layer.__name__)

register_head("multi_margin", MultiMarginLoss)
register_head("margin_ranking", SampledMarginRankingLoss)
register_head("warp", WARPLoss)

__all__ = ["MultiMarginLoss", "SampledMarginRankingLoss", "WARPLoss"]
