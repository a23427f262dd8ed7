"""One epoch of truncated BPTT over a process's streams, the exact streamed perplexity and the
learning-rate schedule: the parts of a language-model run that training.fit calls each epoch."""

import math
from typing import Callable, Dict, Optional

import torch
from torch import Tensor, nn

from ..trainer import run_epoch
from .data import bptt_batches
from .model import Hidden, RNNLanguageModel, detach_hidden


def train_epoch(model: nn.Module, data: Tensor, optimizer, *, bptt: int, clip: float = 0.0,
                max_steps: Optional[int] = None, world_size: int = 1, progress=None,
                hidden: Optional[Hidden] = None, totals: Optional[Dict[str, float]] = None,
                on_step: Optional[Callable] = None, log_every: int = 50,
                before_step: Optional[Callable] = None) -> Dict[str, float]:
    """One pass over `data` [B, L] with truncated BPTT (fastsoftmax.models.trainer.run_epoch);
    the hidden state is carried from batch to batch (detached) and starts at zero each epoch.
    `model` may be DDP-wrapped; `clip` > 0 clips the global gradient norm (sparse gradients
    included). The epoch ends early once totals["steps"] reaches `max_steps`. Returns mean
    training loss, tokens, seconds, steps.

    An epoch interrupted by a mid-epoch checkpoint continues from the `hidden` state and the
    running `totals` (loss_sum, steps, tokens, seconds) saved with it, after the
    totals["steps"] steps already taken. `on_step(step, hidden, totals)` runs after every step
    (checkpointing; `totals()` reads the running totals back from the device); `progress` is a
    tqdm bar whose figures are refreshed every `log_every` steps."""
    core = model.module if hasattr(model, "module") else model
    core.train()
    totals = dict(totals or dict(loss_sum=0.0, steps=0, tokens=0, seconds=0.0))
    state = dict(hidden=hidden)

    def step_loss(batch):
        x, y = batch
        loss, state["hidden"] = model(x, y, detach_hidden(state["hidden"]))
        return loss, y.numel() * world_size

    def as_lm_totals(t: dict) -> dict:
        return dict(loss_sum=t["loss_sum"], steps=t["steps"], tokens=t["examples"],
                    seconds=t["seconds"])

    step_hook = None if on_step is None else (
        lambda steps, current: on_step(steps, state["hidden"], lambda: as_lm_totals(current())))
    out = run_epoch(step_loss, bptt_batches(data[:, totals["steps"] * bptt :], bptt), optimizer,
                    parameters=list(core.parameters()), clip=clip, max_steps=max_steps,
                    progress=progress, log_every=log_every, on_step=step_hook, unit="tok",
                    before_step=before_step,
                    totals=dict(loss_sum=totals["loss_sum"], steps=totals["steps"],
                                examples=totals["tokens"], seconds=totals["seconds"]))
    return dict(loss=out["loss"], tokens=out["examples"], seconds=out["seconds"],
                steps=out["steps"])


@torch.no_grad()
def evaluate(model: RNNLanguageModel, data: Tensor, bptt: int = 35) -> float:
    """Exact full-softmax perplexity of `data` [B, L], hidden state carried over the stream;
    the mean is over every predicted token."""
    was_training = model.training
    model.eval()
    hidden = None
    total, count = 0.0, 0
    for x, y in bptt_batches(data, bptt):
        feats, hidden = model.features(x, hidden)
        total = total + model.head.full_loss(feats, y, reduction="sum").double()
        count += y.numel()
    model.train(was_training)
    return math.exp(float(total) / count)  # one host sync for the whole split


class LRSchedule:
    """Divide the learning rate by `factor` when validation perplexity stops improving, and,
    with `decay_after`, at the end of every epoch after that one (Zaremba et al.'s fixed
    schedule: 4 epochs at lr 1, then halved each epoch)."""

    def __init__(self, lr: float, factor: float = 2.0, decay_after: Optional[int] = None):
        if factor < 1.0:
            raise ValueError(f"the learning-rate divisor must be ≥ 1, got {factor}")
        self.lr, self.factor, self.decay_after = lr, factor, decay_after
        self.best = math.inf

    def step(self, epoch: int, val_ppl: float) -> float:
        """Called after `epoch` (1-based) with its validation perplexity; returns the new lr."""
        stalled = val_ppl >= self.best
        self.best = min(self.best, val_ppl)
        if stalled or (self.decay_after is not None and epoch >= self.decay_after):
            self.lr /= self.factor
        return self.lr

    def apply(self, optimizer) -> None:
        for group in optimizer.param_groups:
            group["lr"] = self.lr

    def state_dict(self) -> dict:
        return dict(lr=self.lr, factor=self.factor, decay_after=self.decay_after, best=self.best)

    def load_state_dict(self, state: dict) -> None:
        """The lr and best perplexity so far; factor and decay_after stay as constructed (they
        may change on resume)."""
        self.lr, self.best = state["lr"], state["best"]


def steps_done(history: list) -> int:
    """The optimiser steps of a run's finished epochs (its history rows)."""
    return sum(row.get("steps", 0) for row in history)
