"""Models built on fastsoftmax losses: every model's class, each with its package (training,
checkpoints, data) beside it: fastsoftmax.models.lm, seq2seq, memn2n, memnn, dmn, treernn and
word2vec."""

from .dmn import DMN
from .lm import RNNLanguageModel
from .memn2n import MemN2N
from .memnn import MemNN
from .seq2seq import Seq2Seq
from .treernn import SequenceLSTM, TreeRNN
from .word2vec import KeyedVectors, PPMIVectors, Word2Vec

__all__ = ["DMN", "KeyedVectors", "MemN2N", "MemNN", "PPMIVectors", "RNNLanguageModel", "Seq2Seq",
           "SequenceLSTM", "TreeRNN", "Word2Vec"]
