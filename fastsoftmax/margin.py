"""The margin (hinge) functionals under the module path they had before the loss families
moved to fastsoftmax.losses: a plain re-export of fastsoftmax.losses.margin."""

from .losses.margin import (check_margin, full_margin_ranking_loss, full_warp_loss,
                            multi_margin_loss, sampled_margin_ranking_loss, warp_loss)

__all__ = ["check_margin", "full_margin_ranking_loss", "full_warp_loss", "multi_margin_loss",
           "sampled_margin_ranking_loss", "warp_loss"]
