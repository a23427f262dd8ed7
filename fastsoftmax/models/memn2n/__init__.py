"""End-to-end memory networks (Sukhbaatar et al., 2015) on bAbI-style stories, with the
answer predicted by any head of fastsoftmax.nn.

Its modules::

    data.py        seeded story generator (tasks single, two, yes-no, counting), vocabulary,
                   batches
    babi_data.py   the real bAbI v1.2 1k tasks (one, or all 20 jointly): the paper's 10%
                   validation split, vocabulary and answers from the training files
    model.py       MemN2N (position/temporal encoding, K hops, adjacent or layer-wise tying)
    training.py    TrainConfig, fit(config), evaluate, checkpoints (kind 'memn2n')
    answering.py   parse_stories, answer_stories (stories a user writes)
    plots.py       attention over the memories per hop for one story

The command line is fastsoftmax.cli.memn2n (`fastsoftmax-memn2n`).
"""

from ..vocabulary import Vocabulary
from .answering import answer_stories, check_words, parse_stories
from .clipping import CLIP_STYLES
from .data import (
    NOISE_STYLES,
    PAD,
    TASKS,
    Batch,
    Story,
    World,
    add_noise,
    answer_words,
    batches,
    build_vocabulary,
    collate,
    encode,
    generate,
    make_task,
    stream,
    tokenize,
)
from .model import POSITION_WEIGHTS, TYINGS, MemN2N, attend, position_encoding
from .plots import attention_figure, plot_attention
from . import training
from .training import *  # noqa: F403 -- the names of training.__all__

__all__ = [
    "Batch", "CLIP_STYLES", "MemN2N", "NOISE_STYLES", "PAD", "POSITION_WEIGHTS", "Story",
    "TASKS", "TYINGS", "Vocabulary", "World", "add_noise",
    "answer_stories", "answer_words", "attend", "attention_figure", "batches",
    "build_vocabulary", "check_words", "collate", "encode", "generate", "make_task",
    "parse_stories", "plot_attention", "position_encoding", "stream", "tokenize",
] + training.__all__
