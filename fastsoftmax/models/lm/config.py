"""What a language-model training run is: every option of `fastsoftmax-lm train`, and the
rules that settle them against a checkpoint when a run resumes."""

from dataclasses import dataclass
from typing import Iterable, Optional

from ..trainer import RunOptions
from ..checkpoints import claim_files, run_values

# Options that belong to this invocation, not to the model or its training: never compared.
RUN_OPTIONS = ("resume", "force", "device", "progress", "plot", "checkpoint")
# Options a resumed run may change: how far to go, the learning-rate schedule, the data path
# (its vocabulary must still match), evaluation batching. The rest define the model and its
# optimisation and must match the checkpoint.
MAY_CHANGE_ON_RESUME = ("epochs", "max_steps", "save_every", "lr_decay", "decay_after", "data",
                        "encoding", "eval_batch_size", "eval_bptt")


@dataclass
class TrainConfig(RunOptions):
    """Every option of a run (the command line's flags, with - for _). Notable ones:

    Args:
        output: the head, any name of fastsoftmax.nn.HEADS ('full', 'sampled', 'nce', 'neg').
        lr: None picks 20 for SGD (Zaremba's lr 1 on the summed loss, ours being the per-token
            mean) or 1e-3 for Adam.
        max_steps: total optimiser steps of the whole run (resumed steps included); training stops
            there, mid-epoch if need be, and still evaluates, tests and saves.
        checkpoint: written after every epoch (and every save_every steps); None picks a new file
            lm-<output>-<time>.pt in the working directory. An existing file other than the
            resumed one is never overwritten unless force.
        plot: PNG of the run's curves, refused if it exists unless force.
        progress: None draws the bar only when stderr is a terminal.
        eval_bptt: BPTT length of validation and test (None: bptt).
        hs_tree: the tree of output 'hs': 'huffman' (over the training counts) or 'context'
            (words split by their left contexts in the training text) or 'features' (split by
            the mean features a trained model, the checkpoint hs_tree_model, computes before
            each word); see lm/hs_tree.py.
        vocab_parallel: N > 1 splits the output layer's rows over N processes of each data
            rank under torchrun (world = data x N; see lm/vocab_parallel.py).
    """

    # the data and the model
    data: Optional[str] = None
    output: str = "full"
    rnn: str = "lstm"
    embed_dim: int = 200
    hidden_size: int = 200
    layers: int = 2
    dropout: float = 0.0
    tie_weights: bool = False
    projection: bool = False
    num_sampled: int = 1024
    sampler: str = "unigram"
    power: float = 0.75
    hs_tree: str = "huffman"
    hs_tree_model: Optional[str] = None
    init_range: float = 0.1
    sparse: bool = False
    vocab_parallel: int = 1
    # its training
    optimizer: str = "sgd"
    lr: Optional[float] = None
    lr_decay: float = 2.0
    decay_after: Optional[int] = None
    clip: float = 0.25
    epochs: int = 13
    save_every: int = 0
    batch_size: int = 20
    eval_batch_size: int = 10
    bptt: int = 20
    eval_bptt: Optional[int] = None
    max_steps: Optional[int] = None
    seed: int = 1234
    encoding: str = "utf-8"
    plot: Optional[str] = None


def resolve(config: TrainConfig, resume: Optional[dict], given: Optional[Iterable[str]] = None
            ) -> TrainConfig:
    """The configuration a run uses: on resume, the checkpoint's, with the options in `given`
    (default: those differing from TrainConfig's defaults) applied where they may change and
    refused, naming the flag, where they conflict. Fills in lr and the checkpoint path and
    refuses to overwrite an existing checkpoint or plot."""
    values = run_values(config, resume, given, may_change=MAY_CHANGE_ON_RESUME,
                        run_options=RUN_OPTIONS)
    if values["data"] is None:
        raise ValueError("training needs --data (a folder with train/valid/test files)")
    if values["lr"] is None:
        values["lr"] = 20.0 if values["optimizer"] == "sgd" else 1e-3
    claim_files(values, "lm", config)
    return TrainConfig(**values)
