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
from typing import Callable, Iterable, Optional

import torch

from ...samplers import UniformSampler
from .. import babi, checkpoints
from ..checkpoints import claim_files, run_values
from ..trainer import RunOptions, Trainer, run_epoch
from ..vocabulary import Vocabulary
from .data import batches, build_vocabulary, encode, split_valid
from .model import MemNN

logger = logging.getLogger(__name__)
KIND = "memnn"
RUN_OPTIONS = ("resume", "force", "device", "progress", "checkpoint", "data")
MAY_CHANGE_ON_RESUME = ("epochs",)
MODEL_KEYS = ("embed_dim", "hops", "memory_size", "time_features")


@dataclass
class TrainConfig(RunOptions):
    """Every option of a run (the command line's flags, with - for _). Notable ones:

    Args:
        data: the folder holding bAbI's en/ and en-10k/ (None: $FASTSOFTMAX_BABI).
        task: the bAbI task, 1 to 20 (the network answers with one word: tasks 1-3 are the
            paper's; a task whose answers are lists or need more hops will score low).
        hops: κ, the supporting memories O picks (the paper's 2; task 3 has three facts).
        time_features: the write-time comparisons of §3.4 (which fact is the latest).
        margin: γ of every ranking term.
        anneal_every: halve the learning rate every this many epochs (0: never).
        num_sampled: words per step the answer's ranking term compares the answer with.
        checkpoint: written after every epoch; None picks a new memnn-task<N>-<time>.pt here.
    """

    # the questions
    data: Optional[str] = None
    task: int = 1
    size: str = "1k"
    valid_fraction: float = 0.1
    # the model
    embed_dim: int = 50
    hops: int = 2
    memory_size: int = 50
    time_features: bool = True
    margin: float = 0.1
    num_sampled: int = 8
    # its training
    optimizer: str = "adam"
    lr: float = 0.01
    anneal_every: int = 5
    clip: float = 40.0
    epochs: int = 20
    batch_size: int = 32
    seed: int = 0


def load_checkpoint(path: str, map_location="cpu") -> dict:
    """A checkpoint of this model (its kind checked), a ValueError naming the file
    otherwise."""
    return checkpoints.load_checkpoint(path, KIND, map_location)


def model_from_checkpoint(state: dict):
    """(model in eval mode, vocabulary) of a loaded checkpoint."""
    config = dict(state["model_config"])
    model = MemNN(config.pop("vocab_size"), **config)
    model.load_state_dict(state["model"])
    return model.eval(), Vocabulary.from_state_dict(state["vocab"])


def _resolve(config: TrainConfig, state: Optional[dict], given: Optional[Iterable[str]]
             ) -> TrainConfig:
    values = run_values(config, state, given, may_change=MAY_CHANGE_ON_RESUME,
                        run_options=RUN_OPTIONS)
    if values["optimizer"] not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {values['optimizer']!r}")
    if values["device"] is None:
        values["device"] = "cuda" if torch.cuda.is_available() else "cpu"
    if state is not None and values["data"] is None:  # the folder the run was trained from
        values["data"] = (state.get("train_config") or {}).get("data")
    if values["checkpoint"] is None:
        values["checkpoint"] = checkpoints.default_path(KIND, f"task{values['task']}")
    claim_files(values, KIND, config)
    return TrainConfig(**values)


def load_data(config: TrainConfig, vocab: Optional[Vocabulary] = None) -> dict:
    """The run's questions (train / valid / test), vocabulary and encoded splits."""
    root = config.data if config.data is not None else babi.default_root()
    train, test = babi.load_task(root, config.task, config.size)
    train, valid = split_valid(train, config.valid_fraction)
    if vocab is None:
        vocab = build_vocabulary(train)
    encoded = dict(train=encode(train, vocab), valid=encode(valid, vocab),
                   test=encode(test, vocab))
    return dict(train=train, valid=valid, test=test, vocab=vocab, encoded=encoded)


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


def check_numbers(config) -> None:
    """The numeric options no run can use, refused by name before anything is read or written."""
    def bad(name, rule):
        raise ValueError(f"{name} must be {rule}, got {getattr(config, name)!r}")
    if config.task not in babi.TASK_NAMES:
        bad("task", "a bAbI task, 1 to 20")
    if config.size not in babi.SIZES:
        bad("size", f"one of {tuple(babi.SIZES)}")
    for name in ("lr", "margin"):
        if not (math.isfinite(getattr(config, name)) and getattr(config, name) > 0):
            bad(name, "a positive number")
    if not (math.isfinite(config.clip) and config.clip >= 0):
        bad("clip", "a number ≥ 0 (0: off)")
    if isinstance(config.anneal_every, bool) or not isinstance(config.anneal_every, int) \
            or config.anneal_every < 0:
        bad("anneal_every", "an integer ≥ 0 (0: off)")
    for name in ("embed_dim", "hops", "memory_size", "num_sampled", "epochs", "batch_size"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            bad(name, "a positive integer")


def fit(config, *, data: Optional[dict] = None, given=None, log: Optional[Callable] = None
        ) -> dict:
    """Train (or, with config.resume, continue) a memory network on one bAbI task; returns
    dict(model, history, test, data, config, checkpoint). The run checkpoints after every
    epoch (see TrainConfig.checkpoint); on resume the options in `given` (default: those
    differing from the defaults) must agree with the checkpoint except MAY_CHANGE_ON_RESUME.
    Progress goes to `log` (default: this module's logger, at INFO)."""
    if isinstance(config, dict):
        config = TrainConfig(**config)
    check_numbers(config)
    state = load_checkpoint(config.resume) if config.resume else None
    config = _resolve(config, state, given)
    if state is not None:
        model, vocab = model_from_checkpoint(state)
        data = data or load_data(config, vocab)
    else:
        data = data or load_data(config)
        torch.manual_seed(config.seed)
        model = MemNN(len(data["vocab"]), **{k: getattr(config, k) for k in MODEL_KEYS})
    model.to(config.device).train()
    opt_cls = torch.optim.Adam if config.optimizer == "adam" else torch.optim.SGD
    opt = opt_cls(model.parameters(), lr=config.lr)
    sampler = UniformSampler(len(data["vocab"]), device=config.device)
    trainer = Trainer(KIND, model, opt, config, log=log, module_logger=logger, state=lambda: dict(
        model_config=model.config, model=model.state_dict(), vocab=data["vocab"].state_dict()))
    if state is not None:
        trainer.resume(state)
        trainer.log(f"resuming {config.resume}: {trainer.epoch} epochs done, training to epoch "
                    f"{config.epochs}")
    train, valid = data["encoded"]["train"], data["encoded"]["valid"]
    trainer.log(f"bAbI task {config.task} ({config.size}): {len(train)} train / {len(valid)} "
                f"valid / {len(data['encoded']['test'])} test questions, vocab "
                f"{len(data['vocab'])}, {sum(p.numel() for p in model.parameters())} parameters, "
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
        lr = config.lr * 0.5 ** ((epoch - 1) // config.anneal_every) if config.anneal_every \
            else config.lr
        for group in opt.param_groups:
            group["lr"] = lr
        stats = run_epoch(step_loss, batches(train, config.batch_size,
                                             memory_size=config.memory_size, hops=config.hops,
                                             shuffle=True, seed=config.seed * 100003 + epoch - 1),
                          opt, parameters=list(model.parameters()), clip=config.clip,
                          progress=trainer.epoch_bar(
                              math.ceil(len(train) / config.batch_size), epoch, config.progress))
        ev = evaluate(model, valid, margin=config.margin, device=config.device) if valid else \
            dict(accuracy=math.nan, loss=math.nan, support_hits=[math.nan] * config.hops)
        return dict(epoch=epoch, train_loss=stats["loss"], valid_answer_loss=ev["loss"],
                    valid_accuracy=ev["accuracy"],
                    support_hits=ev["support_hits"], lr=lr, seconds=stats["seconds"])

    def describe(row: dict) -> str:
        hits = " ".join(f"{h:.0f}%" for h in row["support_hits"])
        return (f"epoch {row['epoch']:3d} | train loss {row['train_loss']:.4f} | valid answer "
                f"loss {row['valid_answer_loss']:.4f} acc {row['valid_accuracy']:.1f}% | "
                f"support hits {hits} | lr {row['lr']:.3g} | "
                f"{row['seconds']:.1f} s")

    history = trainer.fit(config.epochs, train_epoch, describe)
    test = evaluate(model, data["encoded"]["test"], margin=config.margin, device=config.device)
    hits = ", ".join(f"{h:.1f}%" for h in test["support_hits"])
    trainer.log(f"test accuracy {test['accuracy']:.2f}% ({len(data['encoded']['test'])} "
                f"questions), support hits per hop {hits}")
    trainer.log(f"saved {config.checkpoint}")
    return dict(model=model, history=history, test=test, data=data, config=config,
                checkpoint=config.checkpoint)


def evaluate_checkpoint(path: str, *, data: Optional[str] = None, device: str = "cpu") -> dict:
    """Test accuracy of a checkpoint on its task's test questions (read from `data`, default
    the run's folder or $FASTSOFTMAX_BABI)."""
    state = load_checkpoint(path)
    model, vocab = model_from_checkpoint(state)
    config = TrainConfig(**dict(state["train_config"], resume=None, checkpoint=None))
    if data is not None:
        config.data = data
    loaded = load_data(config, vocab)
    model.to(device)
    return dict(evaluate(model, loaded["encoded"]["test"], margin=config.margin, device=device),
                model=model, data=loaded, questions=len(loaded["test"]), task=config.task)
