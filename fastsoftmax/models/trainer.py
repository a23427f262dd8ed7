"""The one training loop of the sequence models (lm, seq2seq, memn2n, treernn): epochs of optimiser
steps with gradient clipping, a progress bar, resuming, a checkpoint after every epoch and the
run's history, every model adding only what is its own through hooks.

Progress goes to the `logging` logger of the model's module (gensim's convention): a library
user sees it with logging.basicConfig(level=logging.INFO), the command lines configure it.
The loop keeps the running loss on the device and reads it back once per `log_every` steps
and once per epoch: a per-batch `loss.item()` would stall a CUDA device at every step.
"""

import dataclasses
import hashlib
import logging
import math
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from torch import nn

from ..ops import deferred_checks
from ..optim import clip_grad_norm
from . import checkpoints
from .checkpoints import rng_state, set_rng_state
from .progress import progress_bar

logger = logging.getLogger(__name__)


@dataclass
class RunOptions:
    """What every model's TrainConfig holds beside its own options: the device (None: cuda
    when available), the checkpoint file (None: a new one in the working directory), the
    checkpoint to resume, whether to overwrite files (force) and the progress bar (None: only
    on a terminal)."""

    device: Optional[str] = None
    checkpoint: Optional[str] = None
    resume: Optional[str] = None
    force: bool = False
    progress: Optional[bool] = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def run_epoch(step_loss: Callable, batches: Iterable, optimizer, *, parameters=None,
              clip: float = 0.0, after_step: Optional[Callable] = None, totals=None,
              max_steps: Optional[int] = None, progress=None, log_every: int = 50,
              on_step: Optional[Callable] = None, unit: str = "ex",
              before_step: Optional[Callable] = None) -> dict:
    """One pass over `batches`: for each, `step_loss(batch)` → (loss, examples), then
    backward, clipping of `parameters`' global gradient norm to `clip` (> 0; sparse gradients
    included), the optimiser step and `after_step()`.

    `totals` (loss_sum, steps, examples, seconds) continue an epoch a mid-epoch checkpoint
    interrupted; the epoch ends once totals["steps"] reaches `max_steps`. `on_step(steps,
    totals)` runs after every step, `totals` being a function that returns the running totals
    (it reads the loss back from the device: call it only when they are needed). `progress` is
    a tqdm bar, closed at the end, showing `unit`s (examples) per second and the mean loss.
    `before_step()` runs after backward, before clipping (a vocabulary-parallel run averages
    and clips its gradients there). Returns the totals with `loss`, the mean training loss."""
    totals = dict(totals or dict(loss_sum=0.0, steps=0, examples=0, seconds=0.0))
    start = time.perf_counter() - totals["seconds"]
    loss_sum = totals["loss_sum"]  # becomes a float64 device tensor at the first step
    steps, examples = totals["steps"], totals["examples"]

    def current() -> dict:  # the loop's one read-back point: the id checks come with it
        checks.raise_pending()
        return dict(loss_sum=float(loss_sum), steps=steps, examples=examples,
                    seconds=time.perf_counter() - start)

    def show(now: dict) -> None:
        rate = now["examples"] / max(now["seconds"], 1e-9)
        progress.set_postfix_str(
            f"{rate:,.0f} {unit}/s loss {now['loss_sum'] / max(now['steps'], 1):.4f}",
            refresh=False)

    if progress is not None:
        progress.update(steps)
    with deferred_checks() as checks:  # no host sync in a step (fastsoftmax.ops._checks)
        for batch in batches:
            if max_steps is not None and steps >= max_steps:
                break
            optimizer.zero_grad(set_to_none=True)
            loss, size = step_loss(batch)
            loss.backward()
            if before_step is not None:
                before_step()
            if clip > 0:
                clip_grad_norm(parameters, clip)
            optimizer.step()
            if after_step is not None:
                after_step()
            loss_sum = loss_sum + loss.detach().double()
            steps += 1
            examples += size
            if progress is not None:
                progress.update(1)
                if steps % log_every == 0:  # one host sync per interval
                    show(current())
            if on_step is not None:
                on_step(steps, current)
        out = current()
    if progress is not None:
        show(out)
        progress.close()
    return dict(out, loss=out["loss_sum"] / max(steps, 1))


class Trainer:
    """A training run's bookkeeping: the optimiser, the history of epoch rows, the finished
    epochs, and the checkpoint of kind `kind` at `path`, written after every epoch with
    `state()` (the model's own entries) beside the optimiser, history, epoch, the training
    configuration `config` and every random stream. `log` (default: the logger of the model's
    module) receives the progress lines. Only the trainer that `saves` (rank 0 of a
    data-parallel run) writes the checkpoint."""

    def __init__(self, kind: str, model: nn.Module, optimizer, config, *, state: Callable,
                 log: Optional[Callable] = None, module_logger: logging.Logger = logger,
                 saves: bool = True):
        self.kind, self.model, self.optimizer, self.config = kind, model, optimizer, config
        self.state, self.saves = state, saves
        self.log = log if log is not None else module_logger.info
        self.history, self.epoch = [], 0

    def resume(self, saved: dict) -> None:
        """Continue the run of the loaded checkpoint `saved`: optimiser, history, finished
        epochs and random streams (call it after building the model, whose initialisation
        draws from them)."""
        self.optimizer.load_state_dict(saved["optimizer"])
        self.history, self.epoch = list(saved["history"]), saved["epoch"]
        set_rng_state(saved["rng"])

    def save(self, **extra) -> Optional[str]:
        """Write the checkpoint; `extra` entries go beside (a mid-epoch `position`)."""
        if not self.saves:
            return None
        return checkpoints.save_checkpoint(self.config.checkpoint, self.kind, dict(
            self.state(), optimizer=self.optimizer.state_dict(), epoch=self.epoch,
            history=self.history, train_config=self.config.to_dict(), rng=rng_state(), **extra))

    def epoch_bar(self, total: int, epoch: int, enabled=None):
        return progress_bar(total, f"epoch {epoch}", enabled=enabled)

    def train_epoch(self, epoch: int, step_loss: Callable, batches: Iterable, examples: int,
                    **options) -> dict:
        """run_epoch over `batches` (of `examples` examples, config.batch_size a batch) with
        this run's optimiser, the model's gradients clipped to config.clip and the epoch's
        progress bar; `options` go to run_epoch."""
        steps = math.ceil(examples / self.config.batch_size)
        return run_epoch(step_loss, batches, self.optimizer,
                         parameters=list(self.model.parameters()), clip=self.config.clip,
                         progress=self.epoch_bar(steps, epoch, self.config.progress), **options)

    def fit(self, epochs: int, train_epoch: Callable, describe: Callable) -> list:
        """Epochs self.epoch + 1 … `epochs`: `train_epoch(epoch)` (1-based) returns the
        epoch's history row, or None to stop the run there; `describe(row)` is its log line.
        A checkpoint follows every epoch. Returns the history."""
        for epoch in range(self.epoch + 1, epochs + 1):
            row = train_epoch(epoch)
            if row is None:
                break
            self.history.append(row)
            self.epoch = epoch
            self.log(describe(row))
            self.save()
        return self.history


def rank_seed(seed: int, rank: int, steps: int = 0) -> int:
    """The seed of data-parallel rank `rank`'s own random stream, `steps` steps into a run of
    seed `seed`: distinct for every (seed, rank, steps), the same on every machine."""
    digest = hashlib.sha256(f"fastsoftmax/{seed}/{rank}/{steps}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1
