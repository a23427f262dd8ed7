"""The exact full softmax's functionals, under the module path they had before the loss
families moved to fastsoftmax.losses: a plain re-export of fastsoftmax.losses.full (and of
the block machinery in fastsoftmax._streaming that they share with the other exact losses).
"""

from ._streaming import CHUNK_BYTES, capped
from ._streaming import blocks as _blocks  # noqa: F401  the block plan's old private name
from .losses.full import full_argmax, full_log_softmax, full_softmax_loss, streaming_logsumexp

__all__ = ["CHUNK_BYTES", "capped", "full_argmax", "full_log_softmax", "full_softmax_loss",
           "streaming_logsumexp"]
