"""Training a Tree-RNN (or the sequential LSTM baseline) on generated arithmetic expressions:
`fit(config)`, the run `fastsoftmax-treernn train` and bench/bench_treernn.py drive,
`evaluate`, and its checkpoints (kind 'treernn')."""

import logging
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from ..skeleton import (CLIP, POSITIVE, POSITIVE_INT, Recipe, TrainOptions, check_fields,
                        count_parameters, epoch_seed, finish_run)
from .data import batches, make_task
from .model import MODELS, NUM_CLASSES, build_model, from_state

__all__ = ["MAY_CHANGE_ON_RESUME", "SUPERVISION", "TrainConfig", "evaluate", "evaluate_checkpoint",
           "fit", "load_checkpoint", "load_data"]
logger = logging.getLogger(__name__)
KIND = "treernn"
MAY_CHANGE_ON_RESUME = ("epochs",)
SUPERVISION = ("root", "nodes")
TASK_KEYS = ("train_size", "test_size", "valid_fraction", "min_depth", "max_depth", "leaf_p")


@dataclass
class TrainConfig(TrainOptions):
    """Every option of a run (the command line's flags, with - for _). The seed draws the
    expressions and the training's initialisation and order; checkpoint, written after every
    epoch, None picks a new treernn-<output>-<time>.pt."""

    # 'tree' (TreeRNN, level by level over the parse tree) or 'lstm' (the baseline over the
    # same expression's in-order tokens)
    model: str = "tree"
    # the expressions (see data.generate)
    train_size: int = 10000
    test_size: int = 2000
    valid_fraction: float = 0.1
    min_depth: int = 1  # the shallowest tree
    max_depth: int = 4  # the deepest tree
    leaf_p: float = 0.3  # the chance that a child above the deepest level is a digit
    # the model
    hidden_size: int = 64
    embed_dim: int = 32  # the LSTM's token embeddings (the tree's have hidden_size)
    layers: int = 2  # the tree's composition layers (1 or 2) or the LSTM's layers
    output: str = "full"
    num_sampled: int = 4
    # its training (and TrainOptions'). supervise: 'root' (the loss on the root's value only)
    # or 'nodes' (on every subexpression's value: the tree's every node, the LSTM's digits and
    # ')'); accuracy is always the root's.
    supervise: str = "root"
    lr: float = 3e-3


def check_numbers(config: TrainConfig) -> None:
    """Options no run can use, refused by name before anything is read or written."""
    if config.model not in MODELS:
        raise ValueError(f"unknown model {config.model!r}; expected one of {', '.join(MODELS)}")
    if config.supervise not in SUPERVISION:
        raise ValueError(f"unknown supervise {config.supervise!r}; expected 'root' or 'nodes'")
    check_fields(config, POSITIVE_INT, "train_size", "test_size", "hidden_size", "embed_dim",
                 "layers", "epochs", "batch_size", "num_sampled")
    check_fields(config, POSITIVE, "lr")
    check_fields(config, CLIP, "clip")


RECIPE = Recipe(KIND, TrainConfig, logger, check_numbers, MAY_CHANGE_ON_RESUME)
load_checkpoint = RECIPE.load_checkpoint


def load_data(config: TrainConfig) -> dict:
    """The run's expressions (train / valid / test lists of trees), drawn from its seed, and
    the training values' counts [10] (+1 each) for the sampled heads."""
    data = make_task(config.train_size, config.test_size, seed=config.seed,
                     **{k: getattr(config, k) for k in TASK_KEYS[2:]})
    counts = torch.ones(NUM_CLASSES, dtype=torch.float64)
    for t in data["train"]:
        counts[t.value] += 1
    return dict(data, counts=counts)


@torch.no_grad()
def evaluate(model, trees: list, *, batch_size: int = 512, device="cpu") -> dict:
    """Exact cross entropy and accuracy (%) of the root values over `trees`."""
    was = model.training
    model.eval()
    loss = correct = 0.0
    for b in batches(trees, batch_size):
        b = b.to(device)
        logp = model.log_prob(b)
        loss += float(-logp.gather(1, b.values[:, None]).sum())
        correct += float((logp.argmax(1) == b.values).sum())
    model.train(was)
    n = max(len(trees), 1)
    return dict(loss=loss / n, accuracy=100.0 * correct / n)


def _restore(state: dict) -> tuple:
    return (from_state(state["model"]),)


def _build(config: TrainConfig, data: dict):
    return build_model(config.model, hidden_size=config.hidden_size, embed_dim=config.embed_dim,
                       layers=config.layers, output=config.output,
                       num_sampled=config.num_sampled,
                       counts=None if config.output == "full" else data["counts"])


@RECIPE.restartable
def fit(config, *, data: Optional[dict] = None, given=None, log: Optional[Callable] = None
        ) -> dict:
    """Train (or, with config.resume, continue) a model; returns dict(model, history, test,
    data, config, checkpoint). The run checkpoints after every epoch; on resume the options
    in `given` (default: those differing from the defaults) must agree with the checkpoint
    except `epochs`. Progress goes to `log` (default: this module's logger, at INFO)."""
    config, state = RECIPE.start(config, given)
    model, data = RECIPE.model_and_data(config, state, data, restore=_restore,
                                        load_data=load_data, build=_build)
    model.to(config.device).train()
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    trainer = RECIPE.trainer(model, opt, config, state, log=log,
                             state=lambda: dict(model=model.state()))
    train, valid, test = data["train"], data["valid"], data["test"]
    trainer.log(f"expressions of depth {config.min_depth}-{config.max_depth}: {len(train)} "
                f"train / {len(valid)} valid / {len(test)} test, model {config.model}, "
                f"{count_parameters(model)} parameters, output {config.output}, supervised on "
                f"{config.supervise}")
    trainer.log(f"checkpoint: {config.checkpoint}")

    def step_loss(b):
        b = b.to(config.device)
        return (model.node_loss(b) if config.supervise == "nodes" else model(b)), len(b)

    def train_epoch(epoch: int) -> dict:
        stats = trainer.train_epoch(epoch, step_loss, batches(
            train, config.batch_size, shuffle=True, seed=epoch_seed(config.seed, epoch)),
            len(train), unit="trees")
        ev = evaluate(model, valid, device=config.device) if valid else dict(
            loss=math.nan, accuracy=math.nan)
        return dict(epoch=epoch, train_loss=stats["loss"], valid_loss=ev["loss"],
                    valid_accuracy=ev["accuracy"], seconds=stats["seconds"],
                    trees_per_s=len(train) / max(stats["seconds"], 1e-9))

    trainer.fit(config.epochs, train_epoch, _describe)
    result = evaluate(model, test, device=config.device)
    return finish_run(trainer, data, result, f"test accuracy {result['accuracy']:.2f}% "
                      f"({len(test)} expressions), loss {result['loss']:.4f}")


def _describe(row: dict) -> str:
    return (f"epoch {row['epoch']:3d} | train loss {row['train_loss']:.4f} | valid loss "
            f"{row['valid_loss']:.4f} acc {row['valid_accuracy']:.1f}% | "
            f"{row['seconds']:.1f} s ({row['trees_per_s']:.0f} trees/s)")


def evaluate_checkpoint(path: str, *, device: str = "cpu") -> dict:
    """Test accuracy of a checkpoint on its run's test expressions (drawn again from the
    run's seed), with the model and the data."""
    model, _, data = RECIPE.reload(path, _restore, load_data, device)
    return dict(evaluate(model.eval(), data["test"], device=device), model=model, data=data,
                expressions=len(data["test"]))
