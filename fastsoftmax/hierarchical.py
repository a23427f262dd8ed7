"""The hierarchical softmax under the module path it had before the loss families moved to
fastsoftmax.losses: a plain re-export of fastsoftmax.losses.hierarchical."""

from .losses.hierarchical import HierarchicalSoftmaxLoss, hierarchical_softmax_loss

__all__ = ["HierarchicalSoftmaxLoss", "hierarchical_softmax_loss"]
