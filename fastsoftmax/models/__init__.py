"""Models built on fastsoftmax losses."""

from .lm import RNNLanguageModel
from .seq2seq import Seq2Seq
from .word2vec import KeyedVectors, Word2Vec

__all__ = ["KeyedVectors", "RNNLanguageModel", "Seq2Seq", "Word2Vec"]
