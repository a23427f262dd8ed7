"""The two-tower retrieval loss under the module path it had before the loss families moved to
fastsoftmax.losses: a plain re-export of fastsoftmax.losses.in_batch."""

from .losses.in_batch import InBatchSoftmaxLoss, in_batch_softmax_loss

__all__ = ["InBatchSoftmaxLoss", "in_batch_softmax_loss"]
