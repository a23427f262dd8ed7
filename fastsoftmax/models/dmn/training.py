"""Training a dynamic memory network on a real bAbI task: `fit(config)`, the run
`fastsoftmax-dmn train` and bench/bench_dmn.py drive, `evaluate`, and its checkpoints (kind
'dmn').

Recipe (Kumar et al. 2016, §3): Adam, gradient-norm clipping, dropout on the word
embeddings, and, where the data name the supporting facts, a cross-entropy on the gates
(supporting_facts=True): pass k's gates are pulled toward the k-th fact of the reasoning
chain (the last one for passes past its end) and away from every other fact.
"""

import logging
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from .. import babi
from ..skeleton import (FRACTION, NON_NEGATIVE, POSITIVE, POSITIVE_INT, RUN_OPTIONS, Recipe, Rule,
                        TrainOptions, check_fields, count_parameters, epoch_seed, finish_run,
                        restore_model)
from ..vocabulary import Vocabulary
from .data import batches, load_babi
from .embeddings import initialise_embeddings
from .model import DMN

__all__ = [
    "MAY_CHANGE_ON_RESUME", "TrainConfig", "evaluate", "evaluate_checkpoint", "fit",
    "load_checkpoint", "load_data", "model_from_checkpoint", "support_loss",
]
logger = logging.getLogger(__name__)
KIND = "dmn"
MAY_CHANGE_ON_RESUME = ("epochs",)
MODEL_KEYS = ("hidden", "embed_dim", "gate_hidden", "passes", "memory_size", "dropout",
              "gate", "temporal", "output", "num_sampled")


@dataclass
class TrainConfig(TrainOptions):
    """Every option of a run (the command line's flags, with - for _). The checkpoint is
    written after every epoch; None picks a new dmn-<output>-<time>.pt here."""

    # the stories: bAbI's task `task` from the folder holding its en/ and en-10k/ (None:
    # $FASTSOFTMAX_BABI), `size` '1k' or '10k' training questions per task (the 10k set lacks
    # qa3's training file in some copies)
    data: Optional[str] = None
    task: int = 1
    size: str = "10k"
    limit: Optional[int] = None  # read at most this many training questions (valid included)
    valid_fraction: float = 0.1
    # the model
    output: str = "full"
    num_sampled: int = 16
    hidden: int = 32
    embed_dim: Optional[int] = None  # None: `hidden`
    gate_hidden: Optional[int] = None  # None: `hidden`
    passes: int = 3
    memory_size: int = 50
    dropout: float = 0.1
    gate: str = "softmax"
    # a learned vector per fact age added to the facts (not in the paper; see model.py)
    temporal: bool = True
    # a word2vec text or binary file (fastsoftmax-word2vec's, or word2vec.c's) whose vectors
    # start the rows of the words it holds; binary when the name ends in '.bin' unless
    # init_embeddings_binary says otherwise
    init_embeddings: Optional[str] = None
    init_embeddings_binary: Optional[bool] = None
    supporting_facts: bool = False  # add support_weight × the gates' cross-entropy on them
    support_weight: float = 1.0
    # its training (and TrainOptions')
    lr: float = 0.005
    weight_decay: float = 0.0
    epochs: int = 20
    batch_size: int = 50


def check_numbers(config) -> None:
    """The options no run can use, refused by name before anything is read or written."""
    check_fields(config, POSITIVE, "lr")
    check_fields(config, NON_NEGATIVE, "support_weight", "weight_decay", "clip")
    check_fields(config, FRACTION, "dropout", "valid_fraction")
    babi.check_task(config)
    check_fields(config, Rule("a positive integer or None",
                              lambda v: v is None or POSITIVE_INT.holds(v)), "limit")


RECIPE = Recipe(KIND, TrainConfig, logger, check_numbers, MAY_CHANGE_ON_RESUME,
                RUN_OPTIONS + ("data",))
load_checkpoint = RECIPE.load_checkpoint


def model_from_checkpoint(state: dict):
    """(model in eval mode, vocabulary, answer words) of a loaded checkpoint."""
    counts = None if state["model_config"]["output"] == "full" else state["counts"]
    return (restore_model(DMN, state, "vocab_size", "num_answers", counts=counts).eval(),
            Vocabulary.from_state_dict(state["vocab"]), list(state["answers"]))


def _settle(values: dict, state: Optional[dict]) -> None:
    if values["data"] is None and state is not None:  # the resumed run's folder
        values["data"] = (state.get("train_config") or {}).get("data")
    if values["data"] is None:
        root = babi.default_root()
        values["data"] = None if root is None else str(root)


def load_data(config: TrainConfig, vocab: Optional[Vocabulary] = None,
              answers: Optional[list] = None) -> dict:
    """The run's stories, vocabulary, answers, encoded splits and answer counts (from
    config.data, else $FASTSOFTMAX_BABI)."""
    root = config.data if config.data is not None else babi.default_root()
    return load_babi(root, config.task, config.size, limit=config.limit,
                     valid_fraction=config.valid_fraction, vocab=vocab, answers=answers)


def _build(config: TrainConfig, data: dict) -> DMN:
    return DMN(len(data["vocab"]), len(data["answers"]),
               counts=None if config.output == "full" else data["counts"],
               **{k: getattr(config, k) for k in MODEL_KEYS})


def support_loss(logits: list, support: torch.Tensor, mask: torch.Tensor,
                 gate: str = "softmax") -> torch.Tensor:
    """The gates' cross-entropy on the supporting facts. Pass k's targets are the facts of
    rank min(k, last rank) (support [B, M] holds each fact's rank in the reading order: a
    chain's facts are read one per pass, a set's all at once). Softmax gates: -log of the
    gate mass on the targets; sigmoid gates: every real fact's binary cross-entropy against
    1 on a target and 0 elsewhere, summed over the facts. Averaged over passes and the stories
    whose supporting facts are still in memory."""
    last = support.max(1).values  # [B]
    has = last > 0
    if not has.any():
        return logits[0].new_zeros(())
    total = 0.0
    real = mask.to(logits[0].dtype)
    for k, s in enumerate(logits, 1):
        target = support == torch.clamp(last, max=k)[:, None]
        if gate == "softmax":
            log_g = torch.log_softmax(s, dim=-1)
            loss = -torch.logsumexp(log_g.masked_fill(~target, -math.inf), dim=-1)
        else:
            loss = (F.binary_cross_entropy_with_logits(
                s.masked_fill(~mask, 0.0), target.to(s.dtype), reduction="none") * real).sum(1)
        total = total + loss[has].mean()
    return total / len(logits)


@torch.no_grad()
def evaluate(model: DMN, items: list, *, batch_size: int = 200, device="cpu") -> dict:
    """Exact cross entropy, accuracy (%) and supporting-fact hit rate (%: passes whose
    highest gate is on a supporting fact) over encoded stories."""
    was = model.training
    model.eval()
    sums, passes = [], 0
    for b in batches(items, batch_size, memory_size=model.config["memory_size"]):
        b = b.to(device)
        a, logits = model.memories(b)
        hit = sum((b.support.gather(1, s.argmax(1, keepdim=True)) > 0).sum() for s in logits)
        sums.append(torch.stack([model.head.full_loss(a, b.answer, reduction="sum").double(),
                                 (model.head.predict(a) == b.answer).sum().double(),
                                 torch.as_tensor(hit, device=a.device).double()]))
        passes += len(b) * len(logits)
    loss, correct, hits = torch.stack(sums).sum(0).tolist() if sums else (0.0, 0.0, 0.0)
    model.train(was)
    n = max(len(items), 1)
    return dict(loss=loss / n, accuracy=100.0 * correct / n,
                support_hits=100.0 * hits / max(passes, 1))


@RECIPE.restartable
def fit(config, *, data: Optional[dict] = None, given=None, log: Optional[Callable] = None
        ) -> dict:
    """Train (or, with config.resume, continue) a DMN; returns dict(model, history, test,
    data, config, checkpoint). The run checkpoints after every epoch; on resume the options
    in `given` (default: those differing from the defaults) must agree with the checkpoint
    except MAY_CHANGE_ON_RESUME. Progress goes to `log` (default: this module's logger)."""
    config, state = RECIPE.start(config, given, _settle)
    model, data = RECIPE.model_and_data(config, state, data, restore=model_from_checkpoint,
                                        load_data=load_data, build=_build)
    found = None
    if state is None and config.init_embeddings:
        found = initialise_embeddings(model, data["vocab"], config.init_embeddings,
                                      binary=config.init_embeddings_binary)
    model.to(config.device).train()
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    trainer = RECIPE.trainer(model, opt, config, state, log=log, state=lambda: dict(
        model_config=model.config, model=model.state_dict(), vocab=data["vocab"].state_dict(),
        answers=list(data["answers"]), counts=data["counts"]))
    if found is not None:
        trainer.log(f"{found} of {len(data['vocab'])} word embeddings start from "
                    f"{config.init_embeddings}")
    train, valid = data["encoded"]["train"], data["encoded"]["valid"]
    trainer.log(f"bAbI task {config.task} ({config.size}): {len(train)} train / {len(valid)} "
                f"valid / {len(data['encoded']['test'])} test questions, vocab "
                f"{len(data['vocab'])}, {len(data['answers'])} answers, "
                f"{count_parameters(model)} parameters, output "
                f"{config.output}, {config.passes} passes, hidden {config.hidden}")
    trainer.log(f"checkpoint: {config.checkpoint}")

    def step_loss(b):
        b = b.to(config.device)
        a, logits = model.memories(b)
        loss = model.head(a, b.answer)
        if config.supporting_facts:
            loss = loss + config.support_weight * support_loss(logits, b.support, b.mask,
                                                               config.gate)
        return loss, len(b)

    def train_epoch(epoch: int) -> dict:
        stats = trainer.train_epoch(epoch, step_loss, batches(
            train, config.batch_size, memory_size=config.memory_size, shuffle=True,
            seed=epoch_seed(config.seed, epoch)), len(train))
        ev = evaluate(model, valid, device=config.device) if valid else dict(
            loss=math.nan, accuracy=math.nan, support_hits=math.nan)
        return dict(epoch=epoch, train_loss=stats["loss"], valid_loss=ev["loss"],
                    valid_accuracy=ev["accuracy"], support_hits=ev["support_hits"],
                    seconds=stats["seconds"])

    trainer.fit(config.epochs, train_epoch, _describe)
    test = evaluate(model, data["encoded"]["test"], device=config.device)
    return finish_run(trainer, data, test, f"test accuracy {test['accuracy']:.2f}% "
                      f"({len(data['encoded']['test'])} questions), support hits "
                      f"{test['support_hits']:.1f}%")


def _describe(row: dict) -> str:
    return (f"epoch {row['epoch']:3d} | train loss {row['train_loss']:.4f} | valid loss "
            f"{row['valid_loss']:.4f} acc {row['valid_accuracy']:.1f}% | support hits "
            f"{row['support_hits']:.0f}% | {row['seconds']:.1f} s")


def evaluate_checkpoint(path: str, *, data: Optional[str] = None, device: str = "cpu") -> dict:
    """Test accuracy of a checkpoint on its task's test questions (the bAbI folder `data`,
    default the run's, then $FASTSOFTMAX_BABI)."""
    model, _, data = RECIPE.reload(path, model_from_checkpoint, load_data, device, data=data)
    return dict(evaluate(model, data["encoded"]["test"], device=device), model=model,
                data=data, questions=len(data["test"]))
