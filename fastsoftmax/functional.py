"""The functional form of every loss family, gathered in one namespace (as
torch.nn.functional gathers torch's): each family's module under fastsoftmax.losses holds
its functionals beside its layers, and this module only re-exports them.

The names follow torch.nn.functional.linear_cross_entropy everywhere: `linear_weight` [V, D]
and `linear_bias` [V] are the output embedding, `weight` [V] a per-class rescaling as in
F.cross_entropy (renamed in 0.1: `weight`/`bias` used to be the output embedding). Losses are
computed per row in float32 (float64 for float64 input) and returned in the input's dtype;
`reduction='mean'` averages over rows not ignored (NaN when every row is ignored or the batch
is empty, as F.cross_entropy); 'sum' of an empty batch is 0 and 'none' returns shape [*].
"""

from .losses._reduction import mean_normalizer
from .losses._sampling import draw_candidates
from .losses.full import (CHUNK_BYTES, full_argmax, full_log_softmax, full_softmax_loss,
                          streaming_logsumexp)
from .losses.hierarchical import hierarchical_softmax_loss
from .losses.in_batch import in_batch_softmax_loss
from .losses.margin import (full_margin_ranking_loss, full_warp_loss, multi_margin_loss,
                            sampled_margin_ranking_loss, warp_loss)
from .losses.negative_sampling import negative_sampling_loss
from .losses.sampled import nce_loss, sampled_softmax_loss

__all__ = [
    "CHUNK_BYTES",
    "draw_candidates",
    "full_argmax",
    "full_log_softmax",
    "full_margin_ranking_loss",
    "full_softmax_loss",
    "full_warp_loss",
    "hierarchical_softmax_loss",
    "in_batch_softmax_loss",
    "mean_normalizer",
    "multi_margin_loss",
    "nce_loss",
    "negative_sampling_loss",
    "sampled_margin_ranking_loss",
    "sampled_softmax_loss",
    "streaming_logsumexp",
    "warp_loss",
]
