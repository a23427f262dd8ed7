"""Models built on fastsoftmax losses."""

from .seq2seq import Seq2Seq

__all__ = ["Seq2Seq"]
