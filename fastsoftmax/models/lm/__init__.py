"""Recurrent word-level language models whose output layer is any head of fastsoftmax.nn.

Its modules::

    data.py        Vocabulary building, corpus files, batching into BPTT streams
    model.py       RNNLanguageModel (embedding → LSTM/GRU → head from the registry)
    training.py    train_epoch, evaluate, LRSchedule, fit(config), evaluate_checkpoint,
                   save/load in the one checkpoint format (kind 'lm')
    config.py      TrainConfig, its checks and the resume rules
    distributed.py this process's place under torchrun, the process group, the streams' state
    generation.py  generate
    plots.py       validation curves per epoch and per wall-clock minute

The command line is fastsoftmax.cli.lm (`fastsoftmax-lm`).
"""

from ...optim import clip_grad_norm, make_optimizer
from ..vocabulary import UNK, Vocabulary
from .config import COMPILE_MODES, MAY_CHANGE_ON_RESUME, TrainConfig
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
from .generation import generate
from .model import RNNLanguageModel, detach_hidden
from .plots import plot_runs, runs_figure
from .training import (LRSchedule, evaluate, evaluate_checkpoint, fit, load_checkpoint,
                       model_from_checkpoint, save_checkpoint, train_epoch)

__all__ = [
    "COMPILE_MODES", "EOS", "MAY_CHANGE_ON_RESUME", "UNK", "Corpus", "LRSchedule", "RNNLanguageModel",
    "TrainConfig", "Vocabulary", "batchify", "bptt_batches", "build_vocabulary",
    "clip_grad_norm", "detach_hidden", "evaluate", "evaluate_checkpoint", "find_split", "fit",
    "generate", "load_checkpoint", "make_optimizer", "model_from_checkpoint",
    "num_bptt_batches", "plot_runs", "read_tokens", "runs_figure", "save_checkpoint", "shard_rows",
    "train_epoch",
]
