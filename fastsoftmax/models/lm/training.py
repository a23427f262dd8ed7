"""Training a language model: `fit(config)`, the run `fastsoftmax-lm train` and
bench/bench_lm.py drive, `evaluate_checkpoint`, and its checkpoints (kind 'lm').

fit follows the sequence of every model's training (fastsoftmax.models.skeleton):
RECIPE.start settles the options (on resume, against the checkpoint's), model_and_data
builds or restores the model and reads the corpus, RECIPE.trainer continues a resumed run,
trainer.fit runs the epochs and finish_run ends it. What is the language model's own: the
epochs of truncated BPTT over each process's streams (epochs.py), checkpoints in the middle
of an epoch, and the processes of a run under torchrun: data-parallel (gloo on CPU, nccl on
GPU) and vocabulary-parallel (vocab_parallel.py).
"""

import logging
import os
import warnings
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Tuple

import torch

from ...optim import make_optimizer
from .. import checkpoints, skeleton
from ..checkpoints import rng_state
from ..heads import has_sparse_gradient
from ..restarts import PERPLEXITY
from ..skeleton import (Recipe, TrainOptions, check_fields, count_parameters, finish_run,
                        one_of, restore_model)
from ..trainer import Trainer
from ..vocabulary import Vocabulary
from . import vocab_parallel as vp
from .data import Corpus, batchify
from .distributed import (Streams, check_processes, data_parallel, dist_env, join_processes,
                          pick_device, rank_streams)
from .epochs import LRSchedule, evaluate, steps_done, train_epoch
from .hs_tree import TREES, build_tree
from .model import CompiledStep, RNNLanguageModel

__all__ = ["COMPILE_MODES", "MAY_CHANGE_ON_RESUME", "TrainConfig", "evaluate_checkpoint", "fit",
           "load_checkpoint", "load_data", "model_from_checkpoint", "save_checkpoint"]
logger = logging.getLogger(__name__)
KIND = "lm"
# Options that belong to this invocation, not to the model or its training: never compared.
RUN_OPTIONS = skeleton.RUN_OPTIONS + ("plot", "compile")
# Options a resumed run may change: how far to go, the learning-rate schedule, the data path
# (its vocabulary must still match), evaluation batching. The rest define the model and its
# optimisation and must match the checkpoint.
MAY_CHANGE_ON_RESUME = ("epochs", "max_steps", "save_every", "lr_decay", "decay_after", "data",
                        "encoding", "eval_batch_size", "eval_bptt")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


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


def _settle(values: dict, state: Optional[dict]) -> None:
    """The options only a run settles: the data folder is required, lr and sparse have
    defaults that depend on the others (sparse is settled once and saved: a resumed run keeps
    the layout it was trained with)."""
    if values["data"] is None:
        raise ValueError("training needs --data (a folder with train/valid/test files)")
    if values["lr"] is None:
        values["lr"] = 20.0 if values["optimizer"] == "sgd" else 1e-3
    check_options(TrainConfig(**values))
    if values["sparse"] is None:
        values["sparse"] = sparse_default(TrainConfig(**values))
    elif values["sparse"] and values["optimizer"] == "adam":
        warnings.warn(SPARSE_ADAM, stacklevel=2)


# Restarts keep the run of lowest validation perplexity (the history rows' val_ppl).
RECIPE = Recipe(KIND, TrainConfig, logger, check_processes, may_change=MAY_CHANGE_ON_RESUME,
                run_options=RUN_OPTIONS, validation=PERPLEXITY)
load_checkpoint = RECIPE.load_checkpoint


def resolve(config: TrainConfig, state: Optional[dict], given: Optional[Iterable[str]] = None
            ) -> TrainConfig:
    """The configuration a run uses: on resume, the checkpoint's, with the options in `given`
    (default: those differing from TrainConfig's defaults) applied where they may change and
    refused, naming the flag, where they conflict. Fills in lr, sparse, the device and the
    checkpoint path, checks the options and refuses to overwrite an existing checkpoint or
    plot."""
    return RECIPE.resolve(config, state, given, _settle)


def save_checkpoint(path: str, *, model: RNNLanguageModel, vocab: Vocabulary, optimizer=None,
                    schedule=None, epoch: int = 0, history: Optional[list] = None,
                    train_config: Optional[dict] = None, position: Optional[dict] = None) -> str:
    """The model, its vocabulary (with the counts that rebuild the sampler exactly), optimiser,
    schedule, history, training configuration and every RNG stream, in the one checkpoint
    format (fastsoftmax.models.checkpoints, kind 'lm'). `epoch` counts finished epochs; a
    mid-epoch checkpoint adds `position` (the epoch under way, steps taken, the carried
    hidden state and the running totals of train_epoch)."""
    return checkpoints.save_checkpoint(path, KIND, dict(
        model_config=model.config, model=model.state_dict(), vocab=vocab.state_dict(),
        optimizer=None if optimizer is None else optimizer.state_dict(),
        schedule=None if schedule is None else schedule.state_dict(), epoch=epoch,
        history=list(history or []), train_config=dict(train_config or {}), position=position,
        rng=rng_state()))


def model_from_checkpoint(state: dict) -> Tuple[RNNLanguageModel, Vocabulary]:
    """(model, vocabulary) rebuilt from a loaded checkpoint; a vocabulary-parallel shard is
    refused (it resumes only under torchrun with its layout)."""
    if state.get("vocab_parallel"):
        raise ValueError(f"this checkpoint holds one shard of the output layer of "
                         f"{vp.describe(state)}: resume it under torchrun with that layout")
    vocab = Vocabulary.from_state_dict(state["vocab"])
    return restore_model(RNNLanguageModel, state, counts=vocab.counts), vocab


def load_data(config: TrainConfig, vocab: Optional[Vocabulary] = None) -> Corpus:
    """The corpus of config.data, over `vocab` (a resumed run's) or a vocabulary built from
    its training split."""
    return Corpus(config.data, vocab=vocab, encoding=config.encoding)


def _hs_tree(config: TrainConfig, corpus: Corpus):
    """The output tree of output 'hs' other than Huffman's (None otherwise)."""
    if config.output != "hs" or config.hs_tree == "huffman":
        return None
    source = None
    if config.hs_tree_model is not None:
        source, source_vocab = model_from_checkpoint(load_checkpoint(config.hs_tree_model))
        if source_vocab.itos != corpus.vocab.itos:
            raise ValueError(f"{config.hs_tree_model} has another vocabulary than {config.data}")
    return build_tree(config.hs_tree, corpus["train"], corpus.vocab.counts, seed=config.seed,
                      model=source)


def _build(config: TrainConfig, corpus: Corpus) -> RNNLanguageModel:
    tree = _hs_tree(config, corpus)
    torch.manual_seed(config.seed)  # the same initial weights whichever tree was built
    return RNNLanguageModel(
        len(corpus.vocab), config.embed_dim, config.hidden_size, config.layers,
        rnn_type=config.rnn, dropout=config.dropout, tie_weights=config.tie_weights,
        projection=config.projection, output=config.output, num_sampled=config.num_sampled,
        sampler=config.sampler, counts=corpus.vocab.counts, power=config.power,
        init_range=config.init_range, sparse=config.sparse, tree=tree,
    )


@RECIPE.restartable
def fit(config: TrainConfig, *, given=None, log: Optional[Callable] = None) -> dict:
    """Train (or, with config.resume, continue) a language model as `fastsoftmax-lm train`
    does; returns dict(model, history, test, data, config, checkpoint) as every model's fit,
    with test_ppl (test["ppl"]) and vocab (the corpus's). config.restarts N > 1 trains seeds
    seed ... seed + N - 1 and keeps the run of lowest validation perplexity (with
    `restarts`, its rows: Recipe.restartable), in one process only.

    The run always checkpoints, after every epoch (and every config.save_every steps) to
    config.checkpoint or, by default, to a new file in the working directory whose path is
    logged. Progress goes to `log` (default: this module's logger, at INFO), from rank 0
    only. On resume, the options in `given` (by default, those differing from TrainConfig's
    defaults) must agree with the checkpoint, except those of MAY_CHANGE_ON_RESUME."""
    world, rank, local_rank = dist_env()
    device = pick_device(config.device, local_rank)
    log = (log or logger.info) if rank == 0 else _quiet
    config, state = RECIPE.start(config, given, _settle)
    layout = join_processes(config, state, world, device)
    model, corpus = RECIPE.model_and_data(
        config, state, None, load_data=load_data, build=_build,
        restore=model_from_checkpoint if layout is None else vp.unloaded_model)
    model.to(device)
    if layout is not None:
        vp.shard_model(model, layout)
    optimizer = make_optimizer(model, config.optimizer, config.lr, model.sparse_parameters())
    schedule = LRSchedule(config.lr, config.lr_decay, config.decay_after)
    trainer = _trainer(config, state, model, optimizer, layout, rank, log, lambda: dict(
        model_config=model.config, model=model.state_dict(), vocab=corpus.vocab.state_dict(),
        position=None, schedule=schedule.state_dict()))
    if state is not None:
        schedule.load_state_dict(state["schedule"])
    schedule.apply(optimizer)
    streams = rank_streams(config, corpus, state, trainer, layout, rank, world, device)
    if state is None:
        trainer.log(_summary(config, corpus, model, world, device, layout))
    trainer.log(f"checkpoint: {config.checkpoint}")
    runner = _runner(model, config, world, layout, device)
    one_epoch = _epochs(config, trainer, schedule, streams, runner, layout, rank == 0)
    trainer.fit(config.epochs, one_epoch, _describe)
    test_ppl = evaluate(model, streams.test, config.eval_bptt or config.bptt)
    result = finish_run(trainer, corpus, dict(ppl=test_ppl), f"test ppl {test_ppl:.2f}")
    if rank == 0 and config.plot and trainer.history:
        _plot(config, trainer.history, trainer.log)
    if world > 1:
        torch.distributed.destroy_process_group()
    return dict(result, test_ppl=test_ppl, vocab=corpus.vocab)


def _quiet(*parts) -> None:
    """The log of ranks other than 0: one process speaks for the run."""


def _trainer(config: TrainConfig, state: Optional[dict], model, optimizer, layout, rank: int,
             log: Callable, entries: Callable) -> Trainer:
    """The run's Trainer, continuing `state`: RECIPE.trainer's, of which only rank 0 writes
    the checkpoint, or under --vocab-parallel vp.VocabParallelTrainer, which writes a file
    per vocabulary rank."""
    kind = (dict(saves=rank == 0) if layout is None
            else dict(cls=vp.VocabParallelTrainer, layout=layout))
    return RECIPE.trainer(model, optimizer, config, state, state=entries, log=log, **kind)


def _runner(model: RNNLanguageModel, config: TrainConfig, world: int, layout, device):
    """What a training step calls: the model, in DDP when every process holds all of it, and
    under torch.compile with --compile."""
    runner = data_parallel(model, device) if world > 1 and layout is None else model
    return runner if config.compile is None else CompiledStep(runner, config.compile)


def _summary(config: TrainConfig, corpus: Corpus, model, world: int, device, layout) -> str:
    return (f"vocab {len(corpus.vocab)}  train {corpus['train'].numel()} tokens  params "
            f"{count_parameters(model):,}  output {config.output}  processes {world}  device "
            f"{device}" + ("  sparse gradients" if config.sparse else "")
            + ("" if layout is None else f"  vocab-parallel {layout.vocab}"))


def _epochs(config: TrainConfig, trainer: Trainer, schedule: LRSchedule, streams: Streams,
            runner, layout, show_progress: bool) -> Callable:
    """The train_epoch(epoch) of trainer.fit: the epoch's steps of `runner` over `streams`
    (up to --max-steps in all), the validation perplexity and the schedule's step; None once
    --max-steps are done. Only a process that `show_progress` draws the bar."""
    model, done = trainer.model, dict(steps=steps_done(trainer.history))
    clip, before_step = config.clip, None
    if layout is not None:  # gradients averaged over the data group, clipped as one model
        clip, before_step = 0.0, lambda: vp.sync_and_clip(model, layout, config.clip)

    def one_epoch(epoch: int) -> Optional[dict]:
        if config.max_steps is not None and done["steps"] >= config.max_steps:
            trainer.log(f"stopping: the {config.max_steps} steps of --max-steps are done")
            return None
        budget = None if config.max_steps is None else config.max_steps - done["steps"]
        bar = trainer.epoch_bar(min(streams.steps_per_epoch, budget or streams.steps_per_epoch),
                                epoch, config.progress if show_progress else False)
        stats = train_epoch(runner, streams.train, trainer.optimizer, bptt=config.bptt,
                            clip=clip, max_steps=budget, world_size=streams.world,
                            progress=bar, before_step=before_step,
                            on_step=streams.saver(trainer, epoch, config.save_every),
                            **streams.resumed())
        done["steps"] += stats["steps"]
        # Every rank evaluates the whole validation set on its identical replica: the same
        # number everywhere drives the same learning-rate decision without a collective.
        val_ppl = evaluate(model, streams.valid, config.eval_bptt or config.bptt)
        row = dict(epoch=epoch, train_loss=stats["loss"], val_ppl=val_ppl, lr=schedule.lr,
                   seconds=stats["seconds"], steps=stats["steps"],
                   tokens_per_s=stats["tokens"] / max(stats["seconds"], 1e-9))
        schedule.step(epoch, val_ppl)
        schedule.apply(trainer.optimizer)
        return row
    return one_epoch


def _describe(row: dict) -> str:
    return (f"epoch {row['epoch']:3d} | train loss {row['train_loss']:.3f} | valid ppl "
            f"{row['val_ppl']:9.2f} | lr {row['lr']:.4g} | {row['seconds']:.1f} s | "
            f"{row['tokens_per_s']:,.0f} tok/s")


def _plot(config: TrainConfig, history: list, say: Callable) -> None:
    from .plots import plot_runs

    plot_runs([(config.output, history)], config.plot, overwrite=True,
              title=f"{config.output} head on {os.path.basename(os.path.normpath(config.data))}")
    say(f"wrote {config.plot}")


def evaluate_checkpoint(path: str, data: str, *, split: str = "test",
                        batch_size: Optional[int] = None, bptt: Optional[int] = None,
                        device: Optional[str] = None, encoding: str = "utf-8",
                        allow_vocab_mismatch: bool = False) -> dict:
    """Exact perplexity of a checkpoint on `split` of the `data` folder, with the fraction of
    that split's words outside the checkpoint's vocabulary (`oov`). Batch size and BPTT
    default to training's, so the figure matches the run's "test ppl" line.

    The data's own vocabulary (of its train split, when it has one) must be the checkpoint's:
    otherwise the perplexity counts every unknown word as the one easy word <unk> and is not
    comparable to anything; ValueError unless allow_vocab_mismatch."""
    state = load_checkpoint(path)
    model, vocab = model_from_checkpoint(state)
    model.to(pick_device(device, 0))
    splits = (split,) if split == "train" else ("train", split)
    try:
        corpus = Corpus(data, vocab=vocab, splits=splits, encoding=encoding)
    except FileNotFoundError:
        if split == "train":
            raise
        corpus = Corpus(data, vocab=vocab, splits=(split,), encoding=encoding)
    if "train" in corpus.paths and corpus.oov["train"] > 0 and not allow_vocab_mismatch:
        raise ValueError(
            f"the vocabulary of {data} does not match the checkpoint {path}: "
            f"{corpus.oov['train']:.1%} of the words of {corpus.paths['train']} are not in the "
            f"checkpoint's {len(vocab)} words, so the perplexity would count them all as <unk>; "
            f"evaluate on the data the model was trained on, or pass --allow-vocab-mismatch"
        )
    trained = state.get("train_config", {})
    rows = batchify(corpus[split], batch_size or trained.get("eval_batch_size", 10))
    ppl = evaluate(model, rows.to(next(model.parameters()).device),
                   bptt or trained.get("eval_bptt") or trained.get("bptt", 35))
    return dict(ppl=ppl, oov=corpus.oov[split], tokens=corpus[split].numel(), split=split,
                path=corpus.paths[split])
