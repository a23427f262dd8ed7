"""Recurrent word-level language models whose output layer is any head of fastsoftmax.nn.

Its modules::

    data.py           Vocabulary building, corpus files, batching into BPTT streams
    model.py          RNNLanguageModel (embedding → LSTM/GRU → head from the registry)
    training.py       TrainConfig, fit(config), evaluate_checkpoint, checkpoints (kind 'lm')
    epochs.py         train_epoch (truncated BPTT), evaluate, LRSchedule
    distributed.py    this process's place under torchrun, the process group, its streams
    vocab_parallel.py the output layer split by rows over processes (--vocab-parallel)
    hs_tree.py        the trees of output 'hs' other than Huffman's
    generation.py     generate
    plots.py          validation curves per epoch and per wall-clock minute

The command line is fastsoftmax.cli.lm (`fastsoftmax-lm`).
"""

from ...optim import clip_grad_norm, make_optimizer
from ..vocabulary import UNK, Vocabulary
from .data import (
    EOS,
    Corpus,
    batchify,
    bptt_batches,
    build_vocabulary,
    find_split,
    num_bptt_batches,
    read_tokens,
    shard_rows,
)
from .epochs import LRSchedule, evaluate, train_epoch
from .generation import generate
from .model import RNNLanguageModel, detach_hidden
from .plots import plot_runs, runs_figure
from . import training
from .training import *  # noqa: F403 -- the names of training.__all__

__all__ = [
    "EOS", "UNK", "Corpus", "LRSchedule", "RNNLanguageModel", "Vocabulary", "batchify",
    "bptt_batches", "build_vocabulary", "clip_grad_norm", "detach_hidden", "evaluate",
    "find_split", "generate", "make_optimizer", "num_bptt_batches", "plot_runs", "read_tokens",
    "runs_figure", "shard_rows", "train_epoch",
] + training.__all__
