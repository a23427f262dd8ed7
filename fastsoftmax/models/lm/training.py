"""Training a language model: one epoch of truncated BPTT, exact evaluation, the learning-rate
schedule and `fit(config)`, the whole run that `fastsoftmax-lm train` and bench/bench_lm.py
drive (data-parallel under torchrun: gloo on CPU, nccl on GPU)."""

import logging
import math
import os
from typing import Callable, Dict, Optional, Tuple

import torch
from torch import Tensor, nn

from ...optim import make_optimizer
from ..progress import progress_bar
from ..trainer import Trainer, rank_seed, run_epoch
from .config import RECIPE, TrainConfig, resolve
from .. import checkpoints
from ..checkpoints import rng_state
from ..skeleton import count_parameters, restore_model
from ..vocabulary import Vocabulary
from .hs_tree import build_tree
from .data import Corpus, batchify, bptt_batches, num_bptt_batches, shard_rows
from .model import CompiledStep, Hidden, RNNLanguageModel, detach_hidden
from . import vocab_parallel as vp
from .distributed import dist_env, gather_streams, init_process_group, map_hidden, pick_device

logger = logging.getLogger(__name__)
KIND = "lm"


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


load_checkpoint = RECIPE.load_checkpoint


def model_from_checkpoint(state: dict) -> Tuple[RNNLanguageModel, Vocabulary]:
    """(model, vocabulary) rebuilt from a loaded checkpoint; a vocabulary-parallel shard is
    refused (it resumes only under torchrun with its layout)."""
    if state.get("vocab_parallel"):
        raise ValueError(f"this checkpoint holds one shard of the output layer of "
                         f"{vp.describe(state)}: resume it under torchrun with that layout")
    vocab = Vocabulary.from_state_dict(state["vocab"])
    return restore_model(RNNLanguageModel, state, counts=vocab.counts), vocab


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


def _new_model(config: TrainConfig, corpus: Corpus) -> RNNLanguageModel:
    tree = _hs_tree(config, corpus)
    torch.manual_seed(config.seed)
    return RNNLanguageModel(
        len(corpus.vocab), config.embed_dim, config.hidden_size, config.layers,
        rnn_type=config.rnn, dropout=config.dropout, tie_weights=config.tie_weights,
        projection=config.projection, output=config.output, num_sampled=config.num_sampled,
        sampler=config.sampler, counts=corpus.vocab.counts, power=config.power,
        init_range=config.init_range, sparse=config.sparse, tree=tree,
    )


def _model_and_corpus(config: TrainConfig, resume: Optional[dict], layout, world: int,
                      say: Callable) -> tuple:
    """(model, vocabulary, corpus) of a new run, or of the resumed one (its vocabulary)."""
    if resume is None:
        corpus = Corpus(config.data, encoding=config.encoding)
        return _new_model(config, corpus), corpus.vocab, corpus
    vp.check_resume(resume, config.resume, layout, world)
    model, vocab = (model_from_checkpoint(resume) if layout is None else
                    vp.unloaded_model(resume))
    corpus = Corpus(config.data, vocab=vocab, encoding=config.encoding)
    say(f"resuming {config.resume}: {resume['epoch']} epochs done"
        + (f", epoch {resume['position']['epoch']} at step {resume['position']['step']}"
           if resume.get("position") else "") + f", training to epoch {config.epochs}")
    return model, vocab, corpus


class _Run:
    """One process's part of a run: its model (sharded under vocabulary parallelism, wrapped
    in DDP under data parallelism), optimiser, schedule, Trainer, batches of its data rank
    and the position of an epoch a mid-epoch checkpoint interrupted."""

    def __init__(self, config: TrainConfig, model, vocab: Vocabulary, resume: Optional[dict],
                 layout, device: torch.device, rank: int, say: Callable):
        self.config, self.model, self.layout, self.device, self.say = (
            config, model, layout, device, say)
        self.rank = rank
        model.to(device)
        if layout is not None:
            vp.shard_model(model, layout)
        self.optimizer = make_optimizer(model, config.optimizer, config.lr,
                                        model.sparse_parameters())
        self.schedule = LRSchedule(config.lr, config.lr_decay, config.decay_after)
        self.trainer = (Trainer if layout is None else vp.trainer(layout))(
            KIND, model, self.optimizer, config, log=say, saves=rank == 0,
            state=lambda: dict(model_config=model.config, model=model.state_dict(),
                               vocab=vocab.state_dict(), position=None,
                               schedule=self.schedule.state_dict()))
        self.position = None
        if resume is not None:
            self.trainer.resume(resume)
            self.schedule.load_state_dict(resume["schedule"])
            self.position = resume.get("position")
        self.schedule.apply(self.optimizer)
        self.steps_done = sum(h.get("steps", 0) for h in self.trainer.history)

    def start(self, world: int, corpus: Corpus) -> None:
        """Seed this rank's own random stream, batch its data and wrap the model for data
        parallelism."""
        config, device, layout = self.config, self.device, self.layout
        # Vocabulary-parallel: data rank drank of dworld; otherwise every rank is a data rank.
        self.drank, self.dworld = ((self.rank, world) if layout is None else
                                   (layout.data_rank, layout.data))
        if self.drank > 0:
            # Every rank built the same model from config.seed; from here on each draws its
            # own candidates and dropout masks. Rank 0 goes on with the seeded stream (the one
            # checkpoints keep); the others derive theirs from the seed, their rank and the
            # steps already taken, so a rerun or a resume draws them again.
            taken = self.steps_done + (self.position["totals"]["steps"] if self.position else 0)
            torch.manual_seed(rank_seed(config.seed, self.drank, taken))
        self.train_data = shard_rows(batchify(corpus["train"], config.batch_size), self.drank,
                                     self.dworld).to(device)
        self.valid_data = batchify(corpus["valid"], config.eval_batch_size).to(device)
        self.test_data = batchify(corpus["test"], config.eval_batch_size).to(device)
        self.runner = self.model
        if world > 1 and layout is None:
            from torch.nn.parallel import DistributedDataParallel

            self.runner = DistributedDataParallel(
                self.model, device_ids=[device.index] if device.type == "cuda" else None)
        if config.compile is not None:
            self.runner = CompiledStep(self.runner, config.compile)
        self.steps_per_epoch = num_bptt_batches(self.train_data, config.bptt)

    def _resumed(self) -> dict:
        """The hidden state and totals of the epoch under way at the resumed checkpoint (the
        global batch's hidden state, saved by rank 0: this rank's streams), once."""
        if self.position is None:
            return {}
        position, self.position = self.position, None
        hidden = map_hidden(position["hidden"], lambda h: shard_rows(
            h, self.drank, self.dworld, dim=1).contiguous().to(self.device))
        return dict(hidden=hidden, totals=position["totals"])

    def _mid_epoch_saver(self, epoch: int) -> Callable:
        config, layout = self.config, self.layout

        def save(step, hidden, totals):
            if not config.save_every or step % config.save_every or step >= self.steps_per_epoch:
                return
            hidden = map_hidden(hidden, lambda h: gather_streams(
                h.detach(), self.dworld, None if layout is None else layout.data_group).cpu())
            self.trainer.save(position=dict(epoch=epoch, step=step, hidden=hidden,
                                            totals=totals()))
        return save

    def epoch(self, epoch: int) -> Optional[dict]:
        """Train epoch `epoch` (to --max-steps at most), evaluate, step the schedule; None
        once --max-steps are done."""
        config, layout = self.config, self.layout
        if config.max_steps is not None and self.steps_done >= config.max_steps:
            self.say(f"stopping: the {config.max_steps} steps of --max-steps are done")
            return None
        budget = None if config.max_steps is None else config.max_steps - self.steps_done
        bar = progress_bar(min(self.steps_per_epoch, budget or self.steps_per_epoch),
                           f"epoch {epoch}", enabled=config.progress if self.rank == 0 else False)
        stats = train_epoch(self.runner, self.train_data, self.optimizer, bptt=config.bptt,
                            clip=config.clip if layout is None else 0.0, max_steps=budget,
                            world_size=self.dworld, progress=bar,
                            on_step=self._mid_epoch_saver(epoch),
                            before_step=None if layout is None else
                            lambda: vp.sync_and_clip(self.model, layout, config.clip),
                            **self._resumed())
        self.steps_done += stats["steps"]
        # Every rank evaluates the whole validation set on its identical replica: the same
        # number everywhere drives the same learning-rate decision without a collective.
        val_ppl = evaluate(self.model, self.valid_data, config.eval_bptt or config.bptt)
        row = dict(epoch=epoch, train_loss=stats["loss"], val_ppl=val_ppl, lr=self.schedule.lr,
                   seconds=stats["seconds"], steps=stats["steps"],
                   tokens_per_s=stats["tokens"] / max(stats["seconds"], 1e-9))
        self.schedule.step(epoch, val_ppl)
        self.schedule.apply(self.optimizer)
        return row


def _describe(row: dict) -> str:
    return (f"epoch {row['epoch']:3d} | train loss {row['train_loss']:.3f} | valid ppl "
            f"{row['val_ppl']:9.2f} | lr {row['lr']:.4g} | {row['seconds']:.1f} s | "
            f"{row['tokens_per_s']:,.0f} tok/s")


def _plot(config: TrainConfig, history: list, say: Callable) -> None:
    from .plots import plot_runs

    plot_runs([(config.output, history)], config.plot, overwrite=True,
              title=f"{config.output} head on {os.path.basename(os.path.normpath(config.data))}")
    say(f"wrote {config.plot}")


def fit(config: TrainConfig, *, given=None, log: Optional[Callable] = None) -> dict:
    """Train (or, with config.resume, continue) a language model as `fastsoftmax-lm train`
    does; returns dict(history, test_ppl, model, vocab, config, checkpoint).

    The run always checkpoints, after every epoch (and every config.save_every steps) to
    config.checkpoint or, by default, to a new file in the working directory whose path is
    logged. Progress goes to `log` (default: this module's logger, at INFO). On resume, the
    options in `given` (by default, those differing from TrainConfig's defaults) must agree
    with the checkpoint, except those of config.MAY_CHANGE_ON_RESUME."""
    world, rank, local_rank = dist_env()
    device = pick_device(config.device, local_rank)
    log = log or logger.info
    say = (lambda *parts: log(*parts)) if rank == 0 else (lambda *parts: None)
    resume = load_checkpoint(config.resume) if config.resume else None
    config = resolve(config, resume, given)
    if world > 1:
        init_process_group(device)
    layout = vp.start(config, world) if config.vocab_parallel > 1 else None
    model, vocab, corpus = _model_and_corpus(config, resume, layout, world, say)
    run = _Run(config, model, vocab, resume, layout, device, rank, say)
    run.start(world, corpus)
    if resume is None:
        say(f"vocab {len(vocab)}  train {corpus['train'].numel()} tokens  params "
            f"{count_parameters(model):,}  output {config.output}  processes {world}  device "
            f"{device}" + ("  sparse gradients" if config.sparse else "")
            + ("" if layout is None else f"  vocab-parallel {layout.vocab}"))
    say(f"checkpoint: {config.checkpoint}")
    history = run.trainer.fit(config.epochs, run.epoch, _describe)
    test_ppl = evaluate(model, run.test_data, config.eval_bptt or config.bptt)
    say(f"test ppl {test_ppl:.2f}")
    say(f"saved {config.checkpoint}")
    if rank == 0 and config.plot and history:
        _plot(config, history, say)
    if world > 1:
        import torch.distributed as dist

        dist.destroy_process_group()
    return dict(history=history, test_ppl=test_ppl, model=model, vocab=vocab,
                config=config, checkpoint=config.checkpoint)


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
