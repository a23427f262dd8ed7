"""What a language-model training run is: every option of `fastsoftmax-lm train`, and the
rules that settle them against a checkpoint when a run resumes."""

import warnings
from dataclasses import dataclass
from typing import Iterable, Optional

from .. import skeleton
from ..heads import has_sparse_gradient
from ..skeleton import Recipe, TrainOptions, check_fields, one_of
from .distributed import dist_env
from .hs_tree import TREES

# Options that belong to this invocation, not to the model or its training: never compared.
RUN_OPTIONS = skeleton.RUN_OPTIONS + ("plot", "compile")
# Options a resumed run may change: how far to go, the learning-rate schedule, the data path
# (its vocabulary must still match), evaluation batching. The rest define the model and its
# optimisation and must match the checkpoint.
MAY_CHANGE_ON_RESUME = ("epochs", "max_steps", "save_every", "lr_decay", "decay_after", "data",
                        "encoding", "eval_batch_size", "eval_bptt")


@dataclass
class TrainConfig(TrainOptions):
    """Every option of a run (the command line's flags, with - for _). Notable ones:

    Args:
        lr: None picks 20 for SGD (Zaremba's lr 1 on the summed loss, ours being the per-token
            mean) or 1e-3 for Adam.
        max_steps: total optimiser steps of the whole run (resumed steps included); training stops
            there, mid-epoch if need be, and still evaluates, tests and saves.
        checkpoint: written after every epoch (and every save_every steps); None picks a new file
            lm-<output>-<time>.pt in the working directory. An existing file other than the
            resumed one is never overwritten unless force.
        plot: PNG of the run's curves, refused if it exists unless force.
        compile: run the training step's forward and backward under torch.compile with this
            mode ('reduce-overhead' adds CUDA graphs), fullgraph: see compiled_step.
        progress: None draws the bar only when stderr is a terminal.
        eval_bptt: BPTT length of validation and test (None: bptt).
        hs_tree: the tree of output 'hs': 'huffman' (over the training counts) or 'context'
            (words split by their left contexts in the training text) or 'features' (split by
            the mean features a trained model, the checkpoint hs_tree_model, computes before
            each word); see lm/hs_tree.py.
        sparse: row-sparse gradients of the input embedding and of the output layer (heads
            that have them: sampled, nce, neg, hs), so that the optimiser touches the rows a
            step used, not all V. None (auto) picks them where they train exactly the
            parameters dense gradients would (sparse_default); True with 'adam' uses
            SparseAdam for those rows, whose moments differ from Adam's (a warning says so).
        vocab_parallel: N > 1 splits the output layer's rows over N processes of each data
            rank under torchrun (world = data x N; see lm/vocab_parallel.py).
    """

    # the data and the model
    data: Optional[str] = None
    output: str = "full"  # any head of fastsoftmax.nn.HEADS ('full', 'sampled', 'nce', ...)
    rnn: str = "lstm"  # or 'gru'
    embed_dim: int = 200
    hidden_size: int = 200
    layers: int = 2
    dropout: float = 0.0
    tie_weights: bool = False  # the embedding is the output layer's
    projection: bool = False  # a hidden→embedding map before the output layer
    num_sampled: int = 1024
    sampler: str = "unigram"  # the sampled heads' noise: 'unigram' or 'log_uniform'
    power: float = 0.75  # the unigram's exponent
    hs_tree: str = "huffman"
    hs_tree_model: Optional[str] = None
    init_range: float = 0.1
    sparse: Optional[bool] = None  # row-sparse embedding and output gradients (None: auto)
    vocab_parallel: int = 1
    # its training (and TrainOptions', with defaults of its own)
    optimizer: str = "sgd"
    lr: Optional[float] = None
    lr_decay: float = 2.0  # the divisor of the lr when validation stalls
    decay_after: Optional[int] = None
    clip: float = 0.25
    epochs: int = 13
    save_every: int = 0  # also checkpoint every this many steps (0: at epoch ends only)
    batch_size: int = 20
    eval_batch_size: int = 10
    bptt: int = 20  # the truncated BPTT length
    eval_bptt: Optional[int] = None
    max_steps: Optional[int] = None
    seed: int = 1234
    encoding: str = "utf-8"
    plot: Optional[str] = None
    compile: Optional[str] = None  # torch.compile mode of the training step (None: eager)


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def check_options(config: TrainConfig) -> None:
    """The output layer's tree options, refused by name unless they go together."""
    check_fields(config, one_of(TREES), "hs_tree")
    if config.compile is not None and config.compile not in COMPILE_MODES:
        raise ValueError(f"compile must be one of {COMPILE_MODES} (torch.compile's modes), got "
                         f"{config.compile!r}")
    if config.compile is not None and config.vocab_parallel > 1:
        raise ValueError("--compile does not go with --vocab-parallel (its collectives run in "
                         "the step)")
    if config.hs_tree != "huffman" and config.output != "hs":
        raise ValueError(f"hs_tree {config.hs_tree!r} needs output 'hs'")
    if (config.hs_tree_model is not None) != (config.hs_tree == "features"):
        raise ValueError("--hs-tree-model goes with --hs-tree features, and only with it")


SPARSE_ADAM = ("sparse gradients with optimizer 'adam' give the embedding and output rows to "
               "SparseAdam, which updates a row's moments only in the steps that use the row "
               "(Adam decays every row's moments and moves every row each step): training "
               "differs from dense Adam; --no-sparse trains with Adam throughout")


def sparse_default(config: TrainConfig) -> bool:
    """What sparse=None becomes: row-sparse gradients exactly where the update is the same as
    with dense ones, which is plain SGD (the LM's 'sgd' has no momentum and no weight decay:
    a row no step used gets a zero gradient and stays put either way), an output layer whose
    gradient is row-sparse (has_sparse_gradient: 'full' scores every row, so dense it stays)
    and one process (the vocabulary-parallel layer takes no sparse gradient, and data-parallel
    all-reduces of sparse gradients depend on the backend)."""
    return (config.optimizer == "sgd" and has_sparse_gradient(config.output)
            and config.vocab_parallel == 1 and dist_env()[0] == 1)


def _settle(values: dict, resume: Optional[dict]) -> None:
    if values["data"] is None:
        raise ValueError("training needs --data (a folder with train/valid/test files)")
    if values["lr"] is None:
        values["lr"] = 20.0 if values["optimizer"] == "sgd" else 1e-3
    check_options(TrainConfig(**values))
    # Settled once and saved: a resumed run keeps the layout it was trained with.
    if values["sparse"] is None:
        values["sparse"] = sparse_default(TrainConfig(**values))
    elif values["sparse"] and values["optimizer"] == "adam":
        warnings.warn(SPARSE_ADAM, stacklevel=2)


RECIPE = Recipe("lm", TrainConfig, may_change=MAY_CHANGE_ON_RESUME, run_options=RUN_OPTIONS)


def resolve(config: TrainConfig, resume: Optional[dict], given: Optional[Iterable[str]] = None
            ) -> TrainConfig:
    """The configuration a run uses: on resume, the checkpoint's, with the options in `given`
    (default: those differing from TrainConfig's defaults) applied where they may change and
    refused, naming the flag, where they conflict. Fills in lr, the device and the checkpoint
    path, checks the options and refuses to overwrite an existing checkpoint or plot."""
    return RECIPE.resolve(config, resume, given, _settle)
