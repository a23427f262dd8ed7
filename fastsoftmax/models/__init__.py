"""Models built on fastsoftmax losses."""

from .lm import RNNLanguageModel
from .memn2n import MemN2N
from .memnn import MemNN
from .seq2seq import Seq2Seq
from .word2vec import KeyedVectors, PPMIVectors, Word2Vec

__all__ = ["KeyedVectors", "MemN2N", "MemNN", "PPMIVectors", "RNNLanguageModel", "Seq2Seq",
           "Word2Vec"]
