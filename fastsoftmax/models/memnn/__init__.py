"""The strongly supervised memory network (Weston, Chopra and Bordes 2015) on the real bAbI
tasks: I, G, O and R modules, trained with margin ranking on the supporting facts and, for
the answer, fastsoftmax's sampled margin-ranking layer.

Its modules::

    data.py        vocabulary, encoded questions, batches (from fastsoftmax.models.babi)
    model.py       MemNN (s = Φxᵀ UᵀU Φy, κ hops, the write-time comparisons of §3.4)
    training.py    TrainConfig, fit(config), evaluate, checkpoints (kind 'memnn')

The command line is fastsoftmax.cli.memnn (`fastsoftmax-memnn`).
"""

from ..babi import Story
from ..vocabulary import Vocabulary
from .data import PAD, Batch, batches, build_vocabulary, collate, encode, hop_targets, split_valid
from .model import MemNN
from . import training
from .training import *  # noqa: F403 -- the names of training.__all__

__all__ = [
    "Batch", "MemNN", "PAD", "Story", "Vocabulary", "batches", "build_vocabulary", "collate",
    "encode", "hop_targets", "split_valid",
] + training.__all__
