"""Negative sampling (word2vec's objective): the functional and its module
NegativeSamplingLoss. K negatives per row (or K shared by the batch), no bias and no log-Q
correction:

    loss = -sum_t log s(w_t.h) - sum_k log s(-w_k.h),    w = linear_weight, s the sigmoid.

Shapes: input [*, D], linear_weight [V, D], target int64 [*] or [*, T], negatives int64
[*, K] (per row) or [K] (shared); `weight` [V] is a per-class rescaling.
"""

from typing import Optional, Union

import torch
from torch import Tensor

from .. import ops
from ._layer_parts import COMMON_ARGS, SAMPLER_ARGS, refuse_label_smoothing
from ._reduction import finish, loss_rows
from ._shapes import check_generator
from ..samplers import Sampler, UniformSampler
from ._sampling import SampledLayer, draw_negatives, negatives_as_rows, sampler_for
from .full import with_layer_keywords


def _negative_ids(negatives, num_negatives, sampler, lead, rows, num_classes, device,
                  generator) -> Tensor:
    """The negatives [N, K] or [K]: as given, or drawn per row (default sampler: uniform)."""
    if negatives is None:
        sampler, num_negatives = sampler_for(sampler, num_negatives, "num_negatives",
                                             "negatives", num_classes, device, UniformSampler)
        return sampler.sample(rows, num_negatives, generator=generator)
    if not isinstance(negatives, Tensor):
        raise TypeError(f"negatives must be a tensor, got {type(negatives).__name__}")
    if num_negatives is not None and num_negatives != negatives.shape[-1]:
        raise ValueError(
            f"num_negatives={num_negatives} but negatives has {negatives.shape[-1]} per row"
        )
    return negatives_as_rows(negatives, "negatives", lead, rows)


def _rescale_rows(loss: Tensor, t2: Tensor, weight: Optional[Tensor], ignore_index: int):
    """(loss * weight[target], weight[target]) per row; ignored rows keep their zero loss."""
    if weight is None:
        return loss, None
    safe = torch.where(t2[:, 0] == ignore_index, torch.zeros_like(t2[:, 0]), t2[:, 0])
    row_weight = weight.to(loss.dtype)[safe]
    return loss * row_weight, row_weight


def negative_sampling_loss(
    input: Tensor, linear_weight: Tensor, target: Tensor, *,
    weight: Optional[Tensor] = None,
    num_negatives: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    negatives: Optional[Tensor] = None,
    reduction: str = "mean", ignore_index: int = -100,
    generator: Optional[torch.Generator] = None, sparse: bool = False, normalizer=None,
) -> Tensor:
    """word2vec's loss: per row, -sum_true log s(w_t.h) - sum_k log s(-w_k.h). target [*] or
    [*, T]; negatives int64 [*, K] (per row) or [K] (shared). When not given, K =
    `num_negatives` per-row negatives are drawn from `sampler` (default uniform). Negatives
    equal to a true class are kept, as in the formula (word2vec.c skips them). `sparse` as in
    sampled_softmax_loss. `weight` [V] scales each row's whole loss by the weight of its
    true class, as for nce_loss. `normalizer` as in sampled_softmax_loss."""
    lead, t2, h, weight = loss_rows(input, linear_weight, target, reduction, None, weight,
                                    normalizer)
    check_generator(generator)
    neg = _negative_ids(negatives, num_negatives, sampler, lead, h.shape[0],
                        linear_weight.shape[0], input.device, generator)
    loss, _ = ops.negative_sampling_forward(h, linear_weight, t2, neg, int(ignore_index),
                                            bool(sparse))
    loss, row_weight = _rescale_rows(loss, t2, weight, ignore_index)
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, row_weight, normalizer)


@with_layer_keywords
class NegativeSamplingLoss(SampledLayer):
    __doc__ = """word2vec's negative-sampling output layer: `num_negatives` negatives per row (or
    shared by the batch when `shared`), no bias. Default sampler: unigram^power when `counts`
    are given, else uniform. In eval: the exact full softmax of linear.weight. There is no
    bias (word2vec has none). In training `weight` scales each row's whole loss by the weight
    of its true class.

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        num_negatives: K, the negatives drawn per row (with replacement).
        shared: draw one set of K negatives for the whole batch (default False: per row).
        label_smoothing: only 0.0; any other value is refused (a sum of logistic losses has
            no smoothed target).""" + SAMPLER_ARGS.format(default="uniform") + \
        COMMON_ARGS.replace("bias: learn a bias `linear.bias` [V] (default False, as torch's "
                            "module).", "bias: only False (word2vec's objective has no bias).")

    num_samples_arg, has_bias = "num_negatives", False
    distinct_samples = False  # negatives are drawn with replacement: K may exceed V

    def __init__(self, in_features: int, num_classes: int, num_negatives: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, vocab=None,
                 power: float = 0.75, shared: bool = False, sparse: bool = False, **layer):
        refuse_label_smoothing("NegativeSamplingLoss", layer.get("label_smoothing", 0.0))
        if layer.get("bias"):
            raise ValueError("NegativeSamplingLoss has no bias: word2vec's objective, "
                             "-log s(w_t.h) - sum_k log s(-w_k.h), has none (bias must be False)")
        super().__init__(in_features, num_classes, num_negatives, sampler=sampler, counts=counts,
                         vocab=vocab, power=power, sparse=sparse, default_sampler="uniform",
                         **layer)
        self.shared = bool(shared)

    def training_loss(self, input, target, generator=None):
        negatives = draw_negatives(self.sampler, input, self.num_negatives, self.shared,
                                   generator)
        return negative_sampling_loss(
            input, self.linear_weight, target, weight=self.weight, negatives=negatives,
            reduction=self.reduction, ignore_index=self.ignore_index, sparse=self.sparse)


__all__ = ["NegativeSamplingLoss", "negative_sampling_loss"]
