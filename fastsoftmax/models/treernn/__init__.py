"""Recursive networks over binary trees, evaluated level by level, on generated arithmetic
expressions (value mod 10 at the root), against a sequential LSTM over the same expressions
written as tokens; the class is predicted by any head of fastsoftmax.nn.

Its modules::

    data.py        Tree, generate / make_task (distinct expressions by seed), parse, Batch
                   (nodes grouped by height), batches
    model.py       TreeRNN, SequenceLSTM (the baseline), build_model, from_state
    training.py    TrainConfig, fit(config), evaluate, checkpoints (kind 'treernn')

The command line is fastsoftmax.cli.treernn (`fastsoftmax-treernn`).
"""

from .data import DIGITS, OPS, PAD, TOKENS, Batch, Tree, apply, batches, collate, generate, \
    make_task, parse, random_tree
from .model import MODELS, NUM_CLASSES, SequenceLSTM, TreeRNN, build_model, from_state
from . import training
from .training import *  # noqa: F403 -- the names of training.__all__

__all__ = [
    "Batch", "DIGITS", "MODELS", "NUM_CLASSES", "OPS", "PAD", "SequenceLSTM", "TOKENS", "Tree",
    "TreeRNN", "apply", "batches", "build_model", "collate", "from_state", "generate",
    "make_task", "parse", "random_tree",
] + training.__all__
