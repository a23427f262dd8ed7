"""Models built on fastsoftmax losses."""

from .word2vec import KeyedVectors, Word2Vec

__all__ = ["KeyedVectors", "Word2Vec"]
