"""Attention encoder–decoder models whose output layer is any head of fastsoftmax.nn.

Its modules::

    data.py        pair files, tokens, vocabularies, batches
    model.py       Seq2Seq (encoder, Luong attention, decoder, head from the registry, search)
    hard_attention.py  hard attention's REINFORCE estimator, reward baselines, entropy bonus
    local_attention.py  Luong's local-m and local-p windows (local_weights)
    training.py    TrainConfig, fit(config), checkpoints (kind 'seq2seq', read by load_checkpoint
                   and model_from_checkpoint)
    generation.py  evaluate (exact loss, exact match, BLEU), translate_lines, save_heatmap

The command line is fastsoftmax.cli.seq2seq (`fastsoftmax-seq2seq`).
"""

from ..vocabulary import Vocabulary
from .data import (
    BOS,
    EOS,
    PAD,
    SPECIALS,
    TASKS,
    UNK,
    Batch,
    batches,
    build_vocabulary,
    decode_output,
    detokenize,
    encode_pairs,
    load_task,
    parse_pairs,
    read_pairs,
    split_indices,
    split_task,
    target_counts,
    tokenize,
)
from .generation import corpus_bleu, evaluate, save_heatmap, translate_lines
from .hard_attention import ATTENTION_MODES, BASELINES, RewardBaseline
from .local_attention import ALIGNMENTS, local_weights
from .model import ATTENTIONS, Seq2Seq
from .training import (MAY_CHANGE_ON_RESUME, TrainConfig, fit, load_checkpoint, load_data,
                       model_from_checkpoint, save_checkpoint)

__all__ = [
    "ALIGNMENTS", "ATTENTIONS", "ATTENTION_MODES", "BASELINES", "BOS", "EOS",
    "MAY_CHANGE_ON_RESUME", "PAD", "RewardBaseline", "SPECIALS", "TASKS", "UNK",
    "Batch", "Seq2Seq", "TrainConfig", "Vocabulary", "batches", "build_vocabulary",
    "corpus_bleu", "decode_output", "detokenize", "encode_pairs", "evaluate", "fit",
    "load_checkpoint", "load_data", "load_task", "local_weights", "model_from_checkpoint",
    "parse_pairs", "read_pairs", "save_checkpoint",
    "save_heatmap", "split_indices", "split_task", "target_counts", "tokenize",
    "translate_lines",
]
