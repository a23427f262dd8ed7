"""Training a Tree-RNN (or the sequential LSTM baseline) on generated arithmetic expressions:
`fit(config)`, the run `fastsoftmax-treernn train` and bench/bench_treernn.py drive,
`evaluate`, and its checkpoints (kind 'treernn')."""

import logging
import math
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

import torch

from .. import checkpoints
from ..checkpoints import claim_files, run_values
from ..trainer import RunOptions, Trainer, run_epoch
from .data import batches, make_task
from .model import MODELS, NUM_CLASSES, build_model, from_state

logger = logging.getLogger(__name__)
KIND = "treernn"
RUN_OPTIONS = ("resume", "force", "device", "progress", "checkpoint")
MAY_CHANGE_ON_RESUME = ("epochs",)
SUPERVISION = ("root", "nodes")
TASK_KEYS = ("train_size", "test_size", "valid_fraction", "min_depth", "max_depth", "leaf_p")


@dataclass
class TrainConfig(RunOptions):
    """Every option of a run (the command line's flags, with - for _).

    Args:
        model: 'tree' (TreeRNN, level-by-level over the parse tree) or 'lstm' (the baseline
            over the same expression's in-order tokens).
        min_depth, max_depth, leaf_p: the expressions drawn (see data.generate); the seed
            draws them and the training's initialisation and order.
        layers: the tree's composition layers (1 or 2) or the LSTM's layers.
        embed_dim: the LSTM's token embedding size (the tree's embeddings have hidden_size).
        supervise: 'root' (the loss on the root's value only) or 'nodes' (on every
            subexpression's value: the tree's every node, the LSTM's digits and ')').
            Accuracy is always the root's.
        checkpoint: written after every epoch; None picks a new treernn-<output>-<time>.pt.
    """

    model: str = "tree"
    # the expressions
    train_size: int = 10000
    test_size: int = 2000
    valid_fraction: float = 0.1
    min_depth: int = 1
    max_depth: int = 4
    leaf_p: float = 0.3
    # the model
    hidden_size: int = 64
    embed_dim: int = 32
    layers: int = 2
    output: str = "full"
    num_sampled: int = 4
    # its training
    supervise: str = "root"
    lr: float = 3e-3
    clip: float = 5.0
    epochs: int = 10
    batch_size: int = 64
    seed: int = 0


def load_checkpoint(path: str, map_location="cpu") -> dict:
    """A checkpoint of this model (its kind checked), a ValueError naming the file
    otherwise."""
    return checkpoints.load_checkpoint(path, KIND, map_location)


def check_numbers(config: TrainConfig) -> None:
    """Options no run can use, refused by name before anything is read or written."""
    if config.model not in MODELS:
        raise ValueError(f"unknown model {config.model!r}; expected one of {', '.join(MODELS)}")
    if config.supervise not in SUPERVISION:
        raise ValueError(f"unknown supervise {config.supervise!r}; expected 'root' or 'nodes'")
    for name in ("train_size", "test_size", "hidden_size", "embed_dim", "layers", "epochs",
                 "batch_size", "num_sampled"):
        if getattr(config, name) <= 0:
            raise ValueError(f"{name} must be a positive integer, got {getattr(config, name)}")
    if not (math.isfinite(config.lr) and config.lr > 0):
        raise ValueError(f"lr must be a positive number, got {config.lr}")
    if not (math.isfinite(config.clip) and config.clip >= 0):
        raise ValueError(f"clip must be a number ≥ 0 (0: off), got {config.clip}")


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


def _resolve(config: TrainConfig, state: Optional[dict], given: Optional[Iterable[str]]
             ) -> TrainConfig:
    values = run_values(config, state, given, may_change=MAY_CHANGE_ON_RESUME,
                        run_options=RUN_OPTIONS)
    if values["device"] is None:
        values["device"] = "cuda" if torch.cuda.is_available() else "cpu"
    claim_files(values, KIND, config)
    return TrainConfig(**values)


def fit(config, *, data: Optional[dict] = None, given=None, log: Optional[Callable] = None
        ) -> dict:
    """Train (or, with config.resume, continue) a model; returns dict(model, history, test,
    data, config, checkpoint). The run checkpoints after every epoch; on resume the options
    in `given` (default: those differing from the defaults) must agree with the checkpoint
    except `epochs`. Progress goes to `log` (default: this module's logger, at INFO)."""
    if isinstance(config, dict):
        config = TrainConfig(**config)
    check_numbers(config)
    state = load_checkpoint(config.resume) if config.resume else None
    config = _resolve(config, state, given)
    data = data or load_data(config)
    if state is not None:
        model = from_state(state["model"])
    else:
        torch.manual_seed(config.seed)
        model = build_model(config.model, hidden_size=config.hidden_size,
                            embed_dim=config.embed_dim, layers=config.layers,
                            output=config.output, num_sampled=config.num_sampled,
                            counts=None if config.output == "full" else data["counts"])
    model.to(config.device).train()
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    trainer = Trainer(KIND, model, opt, config, log=log, module_logger=logger,
                      state=lambda: dict(model=model.state()))
    if state is not None:
        trainer.resume(state)
        trainer.log(f"resuming {config.resume}: {trainer.epoch} epochs done, training to epoch "
                    f"{config.epochs}")
    train, valid, test = data["train"], data["valid"], data["test"]
    trainer.log(f"expressions of depth {config.min_depth}-{config.max_depth}: {len(train)} "
                f"train / {len(valid)} valid / {len(test)} test, model {config.model}, "
                f"{sum(p.numel() for p in model.parameters())} parameters, output "
                f"{config.output}, supervised on {config.supervise}")
    trainer.log(f"checkpoint: {config.checkpoint}")

    def step_loss(b):
        b = b.to(config.device)
        return (model.node_loss(b) if config.supervise == "nodes" else model(b)), len(b)

    def train_epoch(epoch: int) -> dict:
        stats = run_epoch(step_loss, batches(train, config.batch_size, shuffle=True,
                                             seed=config.seed * 100003 + epoch - 1), opt,
                          parameters=list(model.parameters()), clip=config.clip,
                          progress=trainer.epoch_bar(math.ceil(len(train) / config.batch_size),
                                                     epoch, config.progress), unit="trees")
        ev = evaluate(model, valid, device=config.device) if valid else dict(
            loss=math.nan, accuracy=math.nan)
        return dict(epoch=epoch, train_loss=stats["loss"], valid_loss=ev["loss"],
                    valid_accuracy=ev["accuracy"], seconds=stats["seconds"],
                    trees_per_s=len(train) / max(stats["seconds"], 1e-9))

    def describe(row: dict) -> str:
        return (f"epoch {row['epoch']:3d} | train loss {row['train_loss']:.4f} | valid loss "
                f"{row['valid_loss']:.4f} acc {row['valid_accuracy']:.1f}% | "
                f"{row['seconds']:.1f} s ({row['trees_per_s']:.0f} trees/s)")

    history = trainer.fit(config.epochs, train_epoch, describe)
    result = evaluate(model, test, device=config.device)
    trainer.log(f"test accuracy {result['accuracy']:.2f}% ({len(test)} expressions), loss "
                f"{result['loss']:.4f}")
    trainer.log(f"saved {config.checkpoint}")
    return dict(model=model, history=history, test=result, data=data, config=config,
                checkpoint=config.checkpoint)


def evaluate_checkpoint(path: str, *, device: str = "cpu") -> dict:
    """Test accuracy of a checkpoint on its run's test expressions (drawn again from the
    run's seed), with the model and the data."""
    state = load_checkpoint(path)
    model = from_state(state["model"]).to(device).eval()
    config = TrainConfig(**dict(state["train_config"], resume=None, checkpoint=None))
    data = load_data(config)
    return dict(evaluate(model, data["test"], device=device), model=model, data=data,
                expressions=len(data["test"]))
