"""The margin (hinge) output layers under the module path they had before the loss families
moved to fastsoftmax.losses: a plain re-export of fastsoftmax.losses.margin (fastsoftmax.nn
registers them as the heads 'multi_margin', 'margin_ranking' and 'warp')."""

from .losses.margin import MultiMarginLoss, SampledMarginRankingLoss, WARPLoss

__all__ = ["MultiMarginLoss", "SampledMarginRankingLoss", "WARPLoss"]
