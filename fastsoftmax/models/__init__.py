"""Models built on fastsoftmax losses."""

from .lm import RNNLanguageModel
from .seq2seq import Seq2Seq

__all__ = ["RNNLanguageModel", "Seq2Seq"]
