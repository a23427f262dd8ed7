"""Training a seq2seq model: `fit(config)`, the run `fastsoftmax-seq2seq train` and
bench/bench_seq2seq.py drive, and its checkpoints (kind 'seq2seq')."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Callable, Optional

import torch

from .. import checkpoints
from ..checkpoints import rng_state
from ..restarts import Measure
from ..skeleton import Recipe, TrainOptions, count_parameters, finish_run, restore_model
from ..vocabulary import Vocabulary
from .data import batches, load_task, target_counts
from . import hard_attention as hard
from . import local_attention as local
from .generation import evaluate
from .model import Seq2Seq

logger = logging.getLogger(__name__)
KIND = "seq2seq"
MAY_CHANGE_ON_RESUME = ("epochs", "beam_size", "encoding")


@dataclass
class TrainConfig(TrainOptions):
    """Every option of a run (the command line's flags, with - for _). checkpoint: written
    after every epoch; None picks a new seq2seq-<output>-<time>.pt in the working directory,
    and an existing file other than the resumed one is never overwritten unless force.
    progress None draws the bar only when stderr is a terminal. attention_mode 'hard' trains
    hard attention by REINFORCE with `baseline` ('none', 'mean', 'value'; default 'value') and
    `entropy_bonus` (default 0.01), which soft attention refuses (see Seq2Seq). alignment
    'local-m' or 'local-p' is Luong's local attention over a window of ±`window` positions
    (default 10), which global alignment refuses."""

    data: Optional[str] = None
    task: str = "pairs"
    # the model
    attention: Optional[str] = "general"
    attention_mode: str = "soft"
    baseline: Optional[str] = None
    entropy_bonus: Optional[float] = None
    alignment: str = "global"
    window: Optional[int] = None
    output: str = "full"  # any head of fastsoftmax.nn.HEADS
    num_sampled: int = 64  # candidates per step of the sampled heads
    embed_dim: int = 64
    hidden_size: int = 128
    num_layers: int = 1
    bidirectional: bool = False  # the encoder runs both ways, hidden_size/2 units each
    reverse_source: bool = False  # the encoder reads each source back to front
    peeky: bool = False  # the encoder's summary joins every decoder input
    dropout: float = 0.0
    # its training (and TrainOptions')
    max_words: Optional[int] = None
    src_vocab_size: Optional[int] = None
    tgt_vocab_size: Optional[int] = None
    limit: Optional[int] = None
    valid_fraction: float = 0.1
    beam_size: int = 1
    encoding: str = "utf-8"
    device: Optional[str] = "cpu"


MODEL_KEYS = ("embed_dim", "hidden_size", "num_layers", "bidirectional", "reverse_source",
              "attention", "peeky", "output", "num_sampled", "dropout", "attention_mode",
              "baseline", "entropy_bonus", "alignment", "window")
# Options added after checkpoints of version 1 were first written, with the value an older
# checkpoint (which lacks them) was trained with.
ADDED_OPTIONS = {"attention_mode": "soft", "baseline": None, "entropy_bonus": None,
                 "alignment": "global", "window": None}


def save_checkpoint(path: str, *, model: Seq2Seq, optimizer, epoch: int, history: list,
                    config: TrainConfig, src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> str:
    """Writes a seq2seq checkpoint (atomically, in the one checkpoint format) and returns
    its path."""
    return checkpoints.save_checkpoint(path, KIND, dict(
        _model_entries(model), src_vocab=src_vocab.state_dict(),
        tgt_vocab=tgt_vocab.state_dict(), optimizer=optimizer.state_dict(), epoch=epoch,
        history=history, train_config=config.to_dict(), rng=rng_state()))


def _model_entries(model: Seq2Seq) -> dict:
    """The model's entries of a checkpoint, the keys every model's checkpoint has."""
    return dict(model_config=dict(model.config), model=model.state_dict(),
                counts=model.state()["counts"])


# Restarts keep the run of highest held-out exact match; the task has no test set of its own.
RECIPE = Recipe(KIND, TrainConfig, logger, may_change=MAY_CHANGE_ON_RESUME,
                added=ADDED_OPTIONS, validation=Measure("exact", None))
load_checkpoint = RECIPE.load_checkpoint


def model_from_checkpoint(state: dict):
    """(model in eval mode, source vocabulary, target vocabulary) of a loaded checkpoint. A
    checkpoint written before the shared entries (its `model` holding config, counts and
    state_dict) loads too."""
    if "model_config" not in state:
        old = state["model"]
        state = dict(state, model_config=old["config"], model=old["state_dict"],
                     counts=old.get("counts"))
    model = restore_model(Seq2Seq, state, counts=state.get("counts")).eval()
    return (model, Vocabulary.from_state_dict(state["src_vocab"]),
            Vocabulary.from_state_dict(state["tgt_vocab"]))


def _settle(values: dict, state: Optional[dict], *, has_data: bool) -> None:
    attention = None if values["attention"] == "none" else values["attention"]
    # The checkpoint keeps the baseline and bonus a hard run trains with, defaults filled in,
    # so that giving the default explicitly on resume is no conflict.
    values["baseline"], values["entropy_bonus"] = hard.resolve_options(
        attention, values["attention_mode"], values["baseline"], values["entropy_bonus"])
    values["window"] = local.resolve_options(values["alignment"], values["window"], attention,
                                             values["attention_mode"])
    if values["data"] is None and not has_data:
        raise ValueError("training needs --data (a pair file)")


def load_data(config: TrainConfig, src_vocab: Optional[Vocabulary] = None,
              tgt_vocab: Optional[Vocabulary] = None) -> dict:
    """The run's pairs (split_task's dict), with the given vocabularies (a resumed run's) or
    new ones."""
    vocabs = None if src_vocab is None else (src_vocab, tgt_vocab)
    return load_task(config.data, config.task, max_words=config.max_words,
                     valid_fraction=config.valid_fraction, seed=config.seed, limit=config.limit,
                     src_vocab_size=config.src_vocab_size, tgt_vocab_size=config.tgt_vocab_size,
                     vocabs=vocabs, encoding=config.encoding)


def _build(config: TrainConfig, data: dict) -> Seq2Seq:
    kw = {k: getattr(config, k) for k in MODEL_KEYS}
    tgt_size = len(data["tgt_vocab"])
    counts = None if kw["output"] == "full" else target_counts(data["train"], tgt_size)
    return Seq2Seq(len(data["src_vocab"]), tgt_size, counts=counts,
                   **dict(kw, attention=None if config.attention == "none" else config.attention))


def _describe_run(data: dict, held_out: int, model: Seq2Seq) -> str:
    return (f"{data['task']}: {len(data['train'])} train / {held_out} held-out pairs, vocab "
            f"{len(data['src_vocab'])} → {len(data['tgt_vocab'])}, {count_parameters(model)} "
            f"parameters, output {model.config['output']}, attention {model.attention}"
            + (f" ({model.alignment}, window {model.window})" if model.window else "")
            + (f" (hard: baseline {model.config['baseline']}, entropy bonus "
               f"{model.config['entropy_bonus']})" if model.attention_mode == "hard" else ""))


def _describe(row: dict) -> str:
    return ("epoch {epoch}: train loss {train_loss:.4f} ({train_s:.1f} s, "
            "{examples_per_s:.0f} ex/s)".format(**row)
            + (f", held-out loss {row['valid_loss']:.4f}, exact match {row['exact']:.2f}%"
               if "exact" in row else "")
            + (f", BLEU {row['bleu']:.2f}" if "bleu" in row else ""))


@RECIPE.restartable
def fit(config: TrainConfig | dict, *, data: Optional[dict] = None, given=None,
        log: Optional[Callable] = None, eval_every: int = 1,
        eval_limit: Optional[int] = None) -> dict:
    """Trains (or, with config.resume, continues) a model; returns dict(model, history, test,
    data, config, checkpoint) as every model's fit, `test` holding the trained model's
    held-out scores (see _held_out). `data` may be given ready-made (split_task's dict)
    instead of config.data. The run checkpoints after every epoch (see TrainConfig.checkpoint); on
    resume the options in `given` (default: those differing from the defaults) must agree
    with the checkpoint except MAY_CHANGE_ON_RESUME. Held-out scores every `eval_every`
    epochs and after the last, on the first `eval_limit` held-out pairs. Progress goes to
    `log` (default: this module's logger, at INFO)."""
    config, state = RECIPE.start(config, given, partial(_settle, has_data=data is not None))
    model, data = RECIPE.model_and_data(config, state, data, restore=model_from_checkpoint,
                                        load_data=load_data, build=_build)
    src_vocab, tgt_vocab = data["src_vocab"], data["tgt_vocab"]
    model.to(config.device)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    trainer = RECIPE.trainer(model, opt, config, state, log=log, state=lambda: dict(
        _model_entries(model), src_vocab=src_vocab.state_dict(),
        tgt_vocab=tgt_vocab.state_dict()))
    valid_pairs, valid = data["valid_pairs"][:eval_limit], data["valid"][:eval_limit]
    trainer.log(_describe_run(data, len(valid), model))
    trainer.log(f"checkpoint: {config.checkpoint}")

    def step_loss(b):
        b.to(config.device)
        return model(b.src, b.src_len, b.tgt_in, b.tgt_out), b.src.shape[0]

    def train_epoch(epoch: int) -> dict:
        model.train()
        stats = trainer.train_epoch(epoch, step_loss, batches(
            data["train"], config.batch_size, shuffle=True, seed=config.seed + epoch - 1),
            len(data["train"]))
        row = {"epoch": epoch, "train_loss": stats["loss"], "train_s": stats["seconds"],
               "examples_per_s": len(data["train"]) / max(stats["seconds"], 1e-9)}
        if valid and (epoch % eval_every == 0 or epoch == config.epochs):
            ev = evaluate(model, valid_pairs, valid, data["task"], tgt_vocab,
                          beam_size=config.beam_size or 1, device=config.device)
            row.update(valid_loss=ev["loss"], exact=ev["exact"])
            if "bleu" in ev:
                row["bleu"] = ev["bleu"]
        return row

    done = trainer.epoch
    trainer.fit(config.epochs, train_epoch, _describe)
    test = _held_out(trainer, valid_pairs, valid, data, scored=trainer.epoch > done)
    return finish_run(trainer, data, test, _describe_held_out(test))


def _held_out(trainer, pairs: list, examples: list, data: dict, scored: bool) -> dict:
    """fit's `test`: the trained model's loss, exact match (%) and BLEU (word pairs) on the
    held-out `pairs` (a seq2seq task has no test split), with their count. They are the last
    epoch's when this run `scored` it (the last epoch is always scored), else scored now."""
    if not pairs:
        return dict(pairs=0)
    last = trainer.history[-1] if trainer.history else {}
    if scored and "exact" in last:
        scores = dict(loss=last["valid_loss"], exact=last["exact"])
        scores.update({"bleu": last["bleu"]} if "bleu" in last else {})
    else:
        config = trainer.config
        scores = evaluate(trainer.model, pairs, examples, data["task"], data["tgt_vocab"],
                          beam_size=config.beam_size or 1, device=config.device)
        del scores["hyps"]
    return dict(scores, pairs=len(pairs))


def _describe_held_out(test: dict) -> str:
    if not test["pairs"]:
        return "no held-out pairs to score"
    return (f"held-out exact match {test['exact']:.2f}% ({test['pairs']} pairs), loss "
            f"{test['loss']:.4f}" + (f", BLEU {test['bleu']:.2f}" if "bleu" in test else ""))
