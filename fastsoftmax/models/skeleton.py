"""What every model's training module shares around the loop of trainer.py: the options every
run has, the checks of numeric options, loading a checkpoint of the model's kind, settling a
run's options on resume, building or restoring the model and the Trainer of a new or resumed
run, restarts (several seeds, the run of lowest validation error kept: restarts.py), the end of
fit, and the start of evaluate_checkpoint.

A model's training.py declares its TrainConfig (a TrainOptions), its check_numbers, and a
Recipe naming its kind and resume rules; the rest of its module is its own data, batches and
step loss.
"""

import functools
import logging
import math
import numbers
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Tuple

import torch

from . import checkpoints
from .checkpoints import claim_files, run_values
from .restarts import ACCURACY, Measure, fit_restarts
from .trainer import RunOptions, Trainer, logger as trainer_logger

# Options that belong to this invocation, not to the model or its training: never compared
# with a resumed checkpoint's.
RUN_OPTIONS = ("resume", "force", "device", "progress", "checkpoint", "restarts")


@dataclass
class TrainOptions(RunOptions):
    """The run options and the training options every model has. A model whose default
    differs declares the field again with its own. `restarts` runs train seeds seed, seed +
    1, ... and keep the one of lowest validation error (Recipe.restartable)."""

    lr: float = 1e-3
    clip: float = 5.0
    epochs: int = 10
    batch_size: int = 64
    seed: int = 0
    restarts: int = 1


@dataclass
class HalvingOptions(TrainOptions):
    """TrainOptions with the optimiser's name ('adam' or 'sgd', for
    fastsoftmax.optim.make_optimizer) and the learning rate halved every `anneal_every` epochs
    (halving_lr; 0: never)."""

    optimizer: str = "adam"
    anneal_every: int = 5


# ---------------------------------------------------------------------------------------
# Checks of numeric options, refused by name before anything is read or written.
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """What a value must be, in the words of the error (`text`), and the test (`holds`)."""

    text: str
    holds: Callable[[object], bool]


def _integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


POSITIVE = Rule("a positive number", lambda v: _number(v) and v > 0)
NON_NEGATIVE = Rule("a number ≥ 0", lambda v: _number(v) and v >= 0)
CLIP = Rule("a number ≥ 0 (0: off)", NON_NEGATIVE.holds)
FRACTION = Rule("in [0, 1)", lambda v: _number(v) and 0 <= v < 1)
POSITIVE_INT = Rule("a positive integer", lambda v: _integer(v) and v > 0)
COUNT_OR_OFF = Rule("an integer ≥ 0 (0: off)", lambda v: _integer(v) and v >= 0)


def one_of(choices: Iterable, text: Optional[str] = None) -> Rule:
    """The rule of a value among `choices`; `text` words it (default: one of (...))."""
    choices = tuple(choices)
    return Rule(text or f"one of {choices}", lambda v: v in choices)


def check_fields(config, rule: Rule, *names: str) -> None:
    """ValueError "<name> must be <rule>, got <value>" for the first of `names` whose value in
    `config` breaks `rule`."""
    for name in names:
        value = getattr(config, name)
        if not rule.holds(value):
            raise ValueError(f"{name} must be {rule.text}, got {value!r}")


# ---------------------------------------------------------------------------------------
# A model's runs: its checkpoints, its resume rules, its Trainer.
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recipe:
    """What tells one model's runs apart to the shared code: the checkpoint kind, the
    TrainConfig class, the model module's logger (None: trainer.py's), check_numbers, the
    options that may change on resume, the invocation's own options, the options newer
    than some checkpoints (with the value those were trained with) and the validation score
    restarts compare (a restarts.Measure: the history rows' key, and whether it is an
    accuracy in % or lower the better, as a perplexity)."""

    kind: str
    config: type
    logger: Optional[logging.Logger] = None
    check: Optional[Callable] = None
    may_change: Tuple[str, ...] = ("epochs",)
    run_options: Tuple[str, ...] = RUN_OPTIONS
    added: Optional[dict] = None
    validation: Measure = ACCURACY

    @property
    def load_checkpoint(self) -> Callable:
        """The model's load_checkpoint(path, map_location="cpu"), a plain function (each model
        module exports it, and the API reference documents it, as that module's own)."""
        kind = self.kind

        def load_checkpoint(path: str, map_location="cpu") -> dict:
            """A checkpoint of this model (its kind checked), a ValueError naming the file
            otherwise."""
            return checkpoints.load_checkpoint(path, kind, map_location)
        return load_checkpoint

    def resolve(self, config, state: Optional[dict], given: Optional[Iterable[str]],
                settle: Optional[Callable] = None):
        """The configuration a run uses (checkpoints.run_values): on resume the checkpoint's,
        with the `given` options that may change. `settle(values, state)` fills in or refuses
        the model's own options; then the device defaults to cuda when available and the
        checkpoint path is claimed (checkpoints.claim_files)."""
        if config.restarts != 1:  # a fit that Recipe.restartable does not wrap
            raise ValueError(f"restarts must be 1 for the {self.kind} model, which trains one "
                             f"seed per run; got {config.restarts!r}")
        values = run_values(config, state, given, may_change=self.may_change,
                            run_options=self.run_options, added=self.added)
        if settle is not None:
            settle(values, state)
        if values["device"] is None:
            values["device"] = "cuda" if torch.cuda.is_available() else "cpu"
        claim_files(values, self.kind, config)
        return self.config(**values)

    def start(self, config, given: Optional[Iterable[str]] = None,
              settle: Optional[Callable] = None) -> tuple:
        """The prologue of fit: (the run's configuration, the resumed checkpoint or None).
        `config` may be a dict of options; it is checked before anything is read."""
        if isinstance(config, dict):
            config = self.config(**config)
        if self.check is not None:
            self.check(config)
        state = self.load_checkpoint(config.resume) if config.resume else None
        return self.resolve(config, state, given, settle), state

    def restartable(self, fit: Callable) -> Callable:
        """`fit(config, **options)` made to honour config.restarts: 1 runs fit as it is; N > 1
        runs it for seeds seed ... seed + N - 1, logs one line per run and the one kept (of
        lowest validation error), and returns the kept run's result (restarts.fit_restarts).
        The Recipe's check runs first, so that what no restart can train is refused before
        the first one starts."""

        @functools.wraps(fit)
        def fit_with_restarts(config, **options):
            if isinstance(config, dict):
                config = self.config(**config)
            check_fields(config, POSITIVE_INT, "restarts")
            if self.check is not None:
                self.check(config)
            if config.restarts == 1:
                return fit(config, **options)
            report = options.get("log") or (self.logger or trainer_logger).info
            return fit_restarts(self, fit, config, report, **options)
        return fit_with_restarts

    def model_and_data(self, config, state: Optional[dict], data: Optional[dict], *,
                       restore: Callable, load_data: Callable, build: Callable) -> tuple:
        """(model, data) of a run: on resume (`state`) the checkpoint's model, `restore(state)`
        returning (model, *what load_data takes beside the configuration), the data read with
        those; else the data read afresh and a new model, `build(config, data)`, drawn from
        config.seed. Given `data` is used as is."""
        if state is not None:
            model, *saved = restore(state)
            return model, data or load_data(config, *saved)
        data = data or load_data(config)
        torch.manual_seed(config.seed)
        return build(config, data), data

    def trainer(self, model, optimizer, config, resumed: Optional[dict], *, state: Callable,
                log: Optional[Callable] = None, cls: type = Trainer, **options) -> Trainer:
        """The run's Trainer (see trainer.Trainer; `state` returns the model's own checkpoint
        entries), continuing the `resumed` checkpoint's run when there is one. `cls` is a
        Trainer or a subclass of it, built with `options` besides (saves=False for a process
        that writes no checkpoint, a subclass's own keywords)."""
        trainer = cls(self.kind, model, optimizer, config, state=state, log=log, **options,
                      **({} if self.logger is None else dict(module_logger=self.logger)))
        if resumed is not None:
            trainer.resume(resumed)
            trainer.log(f"resuming {config.resume}: {trainer.epoch} epochs done, training to "
                        f"epoch {config.epochs}")
        return trainer

    def saved_config(self, state: dict, **overrides):
        """The configuration of the run a loaded checkpoint comes from, with resume and
        checkpoint cleared and the `overrides` that are not None applied."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return self.config(**dict(state["train_config"], resume=None, checkpoint=None, **given))

    def reload(self, path: str, restore: Callable, load_data: Callable, device="cpu",
               **overrides) -> tuple:
        """The common start of evaluate_checkpoint: (model on `device`, the run's
        configuration, its data). `restore(state)` returns (model, *what load_data takes
        beside the configuration: the vocabulary, ...); `overrides` as saved_config."""
        state = self.load_checkpoint(path)
        model, *saved = restore(state)
        config = self.saved_config(state, **overrides)
        return model.to(device), config, load_data(config, *saved)


def finish_run(trainer: Trainer, data, test: dict, *lines: str) -> dict:
    """The end of fit after trainer.fit: log `lines` (the test scores) and the checkpoint's
    path; returns dict(model, history, test, data, config, checkpoint)."""
    for line in lines:
        trainer.log(line)
    config = trainer.config
    trainer.log(f"saved {config.checkpoint}")
    return dict(model=trainer.model, history=trainer.history, test=test, data=data,
                config=config, checkpoint=config.checkpoint)


def restore_model(cls, state: dict, *sizes: str, **options) -> torch.nn.Module:
    """`cls` built from a loaded checkpoint's model_config (the entries named in `sizes`
    passed first, by position; `options` added) with its saved weights."""
    config = dict(state["model_config"])
    positional = [config.pop(k) for k in sizes]
    model = cls(*positional, **options, **config)
    model.load_state_dict(state["model"])
    return model


def epoch_seed(seed: int, epoch: int) -> int:
    """The seed of epoch `epoch`'s (1-based) shuffle in a run of seed `seed`."""
    return seed * 100003 + epoch - 1


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def halving_lr(optimizer, lr: float, epochs_done: int, every: int) -> float:
    """Set and return the learning rate `lr` halved once every `every` finished epochs (0:
    never; a negative `epochs_done` counts as 0)."""
    if every:
        lr = lr * 0.5 ** (max(epochs_done, 0) // every)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr
