"""Dynamic memory network (Kumar et al. 2016, "Ask Me Anything") on the real bAbI tasks,
with the answer predicted by any head of fastsoftmax.nn.

Its modules::

    data.py        bAbI stories as one word sequence with sentence ends, vocabulary, batches
    model.py       DMN: input, question, episodic memory (attention gates, gated GRU
                   episodes, several passes) and answer modules
    embeddings.py  word2vec vectors as the start of the semantic memory (word embeddings)
    training.py    TrainConfig, fit(config), evaluate, checkpoints (kind 'dmn')

The command line is fastsoftmax.cli.dmn (`fastsoftmax-dmn`).
"""

from .data import (
    PAD,
    Batch,
    answer_words,
    batches,
    build_vocabulary,
    collate,
    encode,
    load_babi,
    split_valid,
)
from .embeddings import initialise_embeddings, read_vectors
from .model import DMN, GATES, AttentionGate, episode_inputs, gate_features, gated_episode
from . import training
from .training import *  # noqa: F403 -- the names of training.__all__

__all__ = [
    "AttentionGate", "Batch", "DMN", "GATES", "PAD", "answer_words", "batches",
    "build_vocabulary", "collate", "encode", "episode_inputs", "gate_features",
    "gated_episode", "initialise_embeddings", "load_babi", "read_vectors", "split_valid",
] + training.__all__
