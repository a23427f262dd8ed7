"""Training the strongly supervised memory network on a bAbI task: `fit(config)`, the run
`fastsoftmax-memnn train` drives, `evaluate`, and its checkpoints (kind 'memnn').

The loss of a question is the paper's (Weston et al. 2015, eq. 6 with §3.4's comparisons):
the supporting-fact ranking terms of every hop, x holding the true earlier facts, plus the
answer's ranking term over the vocabulary, from fastsoftmax's sampled margin-ranking layer
(`num_sampled` words per step drawn uniformly). Both with the margin γ = `margin`.
"""

import logging
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from ...optim import make_optimizer
from ...samplers import UniformSampler
from .. import babi, checkpoints
from ..skeleton import (CLIP, COUNT_OR_OFF, FRACTION, POSITIVE, POSITIVE_INT, RUN_OPTIONS,
                        HalvingOptions, Recipe, check_fields, count_parameters, epoch_seed,
                        finish_run, halving_lr, one_of, restore_model)
from ..vocabulary import Vocabulary
from .data import batches, build_vocabulary, encode
from .model import MemNN

__all__ = [
    "MAY_CHANGE_ON_RESUME", "TrainConfig", "evaluate", "evaluate_checkpoint", "fit",
    "load_checkpoint", "load_data", "model_from_checkpoint",
]
logger = logging.getLogger(__name__)
KIND = "memnn"
MAY_CHANGE_ON_RESUME = ("epochs",)
MODEL_KEYS = ("embed_dim", "hops", "memory_size", "time_features")


@dataclass
class TrainConfig(HalvingOptions):
    """Every option of a run (the command line's flags, with - for _). The checkpoint is
    written after every epoch; None picks a new memnn-task<N>-<time>.pt here."""

    # the questions: bAbI's task `task` (1 to 20) from the folder holding its en/ and
    # en-10k/ (None: $FASTSOFTMAX_BABI). The network answers with one word: tasks 1-3 are
    # the paper's; a task whose answers are lists or need more hops will score low.
    data: Optional[str] = None
    task: int = 1
    size: str = "1k"
    valid_fraction: float = 0.1
    # the model
    embed_dim: int = 50
    hops: int = 2  # κ, the supporting memories O picks (the paper's 2; task 3 has three facts)
    memory_size: int = 50
    time_features: bool = True  # the write-time comparisons of §3.4 (which fact is the latest)
    margin: float = 0.1  # γ of every ranking term
    num_sampled: int = 8  # words per step the answer's ranking term compares the answer with
    # its training (and HalvingOptions': the optimiser, and anneal_every, the epochs between
    # two halvings of the learning rate)
    lr: float = 0.01
    clip: float = 40.0
    epochs: int = 20
    batch_size: int = 32


def check_numbers(config) -> None:
    """The options no run can use, refused by name before anything is read or written."""
    babi.check_task(config)
    check_fields(config, POSITIVE, "lr", "margin")
    check_fields(config, CLIP, "clip")
    check_fields(config, COUNT_OR_OFF, "anneal_every")
    check_fields(config, FRACTION, "valid_fraction")
    check_fields(config, POSITIVE_INT, "embed_dim", "hops", "memory_size", "num_sampled",
                 "epochs", "batch_size")
    check_fields(config, one_of(("sgd", "adam"), "'sgd' or 'adam'"), "optimizer")


RECIPE = Recipe(KIND, TrainConfig, logger, check_numbers, MAY_CHANGE_ON_RESUME,
                RUN_OPTIONS + ("data",))
load_checkpoint = RECIPE.load_checkpoint


def model_from_checkpoint(state: dict):
    """(model in eval mode, vocabulary) of a loaded checkpoint."""
    return (restore_model(MemNN, state, "vocab_size").eval(),
            Vocabulary.from_state_dict(state["vocab"]))


def _settle(values: dict, state: Optional[dict]) -> None:
    if state is not None and values["data"] is None:  # the folder the run was trained from
        values["data"] = (state.get("train_config") or {}).get("data")
    if values["checkpoint"] is None:
        values["checkpoint"] = checkpoints.default_path(KIND, f"task{values['task']}")


def load_data(config: TrainConfig, vocab: Optional[Vocabulary] = None) -> dict:
    """The run's questions (train / valid / test), vocabulary and encoded splits."""
    root = config.data if config.data is not None else babi.default_root()
    split = babi.read_split(root, config.task, config.size,
                            valid_fraction=config.valid_fraction)
    if vocab is None:
        vocab = build_vocabulary(split["train"])
    return dict(split, vocab=vocab, encoded={k: encode(v, vocab) for k, v in split.items()})


def _build(config: TrainConfig, data: dict) -> MemNN:
    return MemNN(len(data["vocab"]), **{k: getattr(config, k) for k in MODEL_KEYS})


@torch.no_grad()
def evaluate(model: MemNN, items: list, *, margin: float = 0.1, batch_size: int = 256,
             device="cpu") -> dict:
    """Answer accuracy (%), the answer's exact ranking loss over the whole vocabulary (γ =
    `margin`) and, per hop, the share (%) of questions whose chosen memory is that hop's
    supporting fact, over encoded questions; O chooses, nothing is given."""
    was = model.training
    model.eval()
    correct, loss, hits = 0.0, 0.0, torch.zeros(model.hops, dtype=torch.float64)
    for b in batches(items, batch_size, memory_size=model.config["memory_size"],
                     hops=model.hops):
        b = b.to(device)
        chosen = model.select(b.story, b.mask, b.query)
        r = model.r_input(b.story, b.query, chosen)
        correct += float((model.answer_scores(r).argmax(1) == b.answer).sum())
        loss += float(model.exact_answer_loss(r, b.answer, margin=margin, reduction="sum"))
        hits += (chosen == b.targets).sum(0).double().cpu()
    model.train(was)
    n = max(len(items), 1)
    return dict(accuracy=100.0 * correct / n, loss=loss / n,
                support_hits=(100.0 * hits / n).tolist())


@RECIPE.restartable
def fit(config, *, data: Optional[dict] = None, given=None, log: Optional[Callable] = None
        ) -> dict:
    """Train (or, with config.resume, continue) a memory network on one bAbI task; returns
    dict(model, history, test, data, config, checkpoint). The run checkpoints after every
    epoch (see TrainConfig.checkpoint); on resume the options in `given` (default: those
    differing from the defaults) must agree with the checkpoint except MAY_CHANGE_ON_RESUME.
    Progress goes to `log` (default: this module's logger, at INFO)."""
    config, state = RECIPE.start(config, given, _settle)
    model, data = RECIPE.model_and_data(config, state, data, restore=model_from_checkpoint,
                                        load_data=load_data, build=_build)
    model.to(config.device).train()
    opt = make_optimizer(model, config.optimizer, config.lr)
    sampler = UniformSampler(len(data["vocab"]), device=config.device)
    trainer = RECIPE.trainer(model, opt, config, state, log=log, state=lambda: dict(
        model_config=model.config, model=model.state_dict(), vocab=data["vocab"].state_dict()))
    train, valid = data["encoded"]["train"], data["encoded"]["valid"]
    trainer.log(f"bAbI task {config.task} ({config.size}): {len(train)} train / {len(valid)} "
                f"valid / {len(data['encoded']['test'])} test questions, vocab "
                f"{len(data['vocab'])}, {count_parameters(model)} parameters, "
                f"{config.hops} hops, time features {'on' if config.time_features else 'off'}")
    trainer.log(f"checkpoint: {config.checkpoint}")

    def step_loss(b):
        b = b.to(config.device)
        loss = model.o_loss(b.story, b.mask, b.query, b.targets, config.margin)
        r = model.r_input(b.story, b.query, b.targets)  # the true facts: strong supervision
        loss = loss + model.answer_loss(r, b.answer, num_sampled=config.num_sampled,
                                        sampler=sampler, margin=config.margin)
        return loss, len(b)

    def train_epoch(epoch: int) -> dict:
        lr = halving_lr(opt, config.lr, epoch - 1, config.anneal_every)
        stats = trainer.train_epoch(epoch, step_loss, batches(
            train, config.batch_size, memory_size=config.memory_size, hops=config.hops,
            shuffle=True, seed=epoch_seed(config.seed, epoch)), len(train))
        ev = evaluate(model, valid, margin=config.margin, device=config.device) if valid else \
            dict(accuracy=math.nan, loss=math.nan, support_hits=[math.nan] * config.hops)
        return dict(epoch=epoch, train_loss=stats["loss"], valid_answer_loss=ev["loss"],
                    valid_accuracy=ev["accuracy"],
                    support_hits=ev["support_hits"], lr=lr, seconds=stats["seconds"])

    trainer.fit(config.epochs, train_epoch, _describe)
    test = evaluate(model, data["encoded"]["test"], margin=config.margin, device=config.device)
    hits = ", ".join(f"{h:.1f}%" for h in test["support_hits"])
    return finish_run(trainer, data, test, f"test accuracy {test['accuracy']:.2f}% "
                      f"({len(data['encoded']['test'])} questions), support hits per hop "
                      f"{hits}")


def _describe(row: dict) -> str:
    hits = " ".join(f"{h:.0f}%" for h in row["support_hits"])
    return (f"epoch {row['epoch']:3d} | train loss {row['train_loss']:.4f} | valid answer "
            f"loss {row['valid_answer_loss']:.4f} acc {row['valid_accuracy']:.1f}% | "
            f"support hits {hits} | lr {row['lr']:.3g} | {row['seconds']:.1f} s")


def evaluate_checkpoint(path: str, *, data: Optional[str] = None, device: str = "cpu") -> dict:
    """Test accuracy of a checkpoint on its task's test questions (read from `data`, default
    the run's folder or $FASTSOFTMAX_BABI)."""
    model, config, loaded = RECIPE.reload(path, model_from_checkpoint, load_data, device,
                                          data=data)
    return dict(evaluate(model, loaded["encoded"]["test"], margin=config.margin, device=device),
                model=model, data=loaded, questions=len(loaded["test"]), task=config.task)
