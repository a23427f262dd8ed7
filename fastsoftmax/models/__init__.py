"""Models built on fastsoftmax losses."""

from .lm import RNNLanguageModel

__all__ = ["RNNLanguageModel"]
