"""word2vec's training loop: epochs of batches (data.epoch_batches) handed to the native op
``fastsoftmax::word2vec_train``, the linear learning-rate schedule, gensim's callbacks and
progress logs, and the per-batch ``model.progress`` hook (the command line's progress bar)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import torch

from ...ops.word2vec import Word2VecTrainArgs, word2vec_train_batched
from . import data
from .data import epoch_batches

logger = logging.getLogger(__name__)


def train_epochs(model, corpus, epochs: int, alpha: float, min_alpha: float,
                 by_sentence: bool, per_epoch: int, queue_factor: int, report_delay: float,
                 callbacks: tuple, schedule: str = "linear"):
    """Trains `model` for `epochs` passes over `corpus`, the rate decaying linearly from
    alpha to min_alpha over epochs x per_epoch sentences (by_sentence) or raw words, or with
    schedule="gensim-corpus_file" as gensim's corpus_file workers decay it.
    Fires `callbacks` and only those. Returns (words trained after subsampling, raw words)."""
    model.running_training_loss = 0.0
    run = _Run(model, corpus, epochs, alpha, min_alpha, by_sentence, per_epoch, report_delay,
               schedule == "gensim-corpus_file")
    logger.info("training model with %i workers on %i vocabulary and %i features, using "
                "sg=%s hs=%s sample=%s negative=%s window=%s shrink_windows=%s round_size=%s",
                model.workers, len(model.wv), model.vector_size, model.sg, model.hs, model.sample,
                model.negative, model.window, model.shrink_windows, run.rounds)
    _fire(callbacks, "on_train_begin", model)
    trained = raw_total = 0
    for epoch in range(epochs):
        _fire(callbacks, "on_epoch_begin", model)
        done = _train_epoch(model, corpus, run, epoch, queue_factor * model.workers, raw_total)
        raw_total += done.raw
        trained += done.trained
        elapsed = max(time.perf_counter() - done.start, 1e-9)
        logger.info("EPOCH %i: training on %i raw words (%i effective words) took %.1fs, "
                    "%.0f effective words/s", epoch, done.raw, done.trained, elapsed,
                    done.trained / elapsed)
        model._sync_vectors()
        _fire(callbacks, "on_epoch_end", model)
    model.train_seconds = time.perf_counter() - run.start
    logger.info("Word2Vec lifecycle event {'msg': 'training on %i raw words (%i effective "
                "words) took %.1fs, %.0f effective words/s'}", raw_total, trained,
                model.train_seconds, trained / max(model.train_seconds, 1e-9))
    model._sync_vectors()
    _fire(callbacks, "on_train_end", model)
    return trained, raw_total


def _fire(callbacks, event: str, model) -> None:
    """Calls `event` (gensim's CallbackAny2Vec method name) of every callback that has it."""
    for cb in callbacks:
        getattr(cb, event, lambda m: None)(model)


class _Run:
    """What one train() call fixes before its first batch: the schedule, the op's round
    size and batch size, the lock factors, the kept corpus and the clock of the logs."""

    def __init__(self, model, corpus, epochs: int, alpha: float, min_alpha: float,
                 by_sentence: bool, per_epoch: int, report_delay: float, per_worker: bool):
        self.epochs, self.per_epoch, self.by_sentence = epochs, per_epoch, by_sentence
        self.alpha, self.min_alpha, self.report_delay = alpha, min_alpha, report_delay
        self.total = float(max(1, epochs * per_epoch))
        # gensim's corpus_file workers (W of them) each count their own share of an epoch
        # over the whole epoch: in epoch e of E the progress runs from e/E to (e + 1/W)/E
        # only. The op's rate reads position / total; stretching all but the within-epoch
        # part n by W gives (W e P + n) / (W E P) = (e + n / (W P)) / E, gensim's progress in
        # exact integers.
        self.stretch = model.workers if per_worker else 1
        self.lockf = lock_factors(model)
        # one pass: nothing to keep
        self.cache = [] if data.replayable(corpus) and epochs > 1 else None
        # Words per native call. The CPU's sequential order: eight jobs of batch_words per
        # worker, so that the wait for the slowest worker at the end of a call (at most one
        # run of ~2k tokens) stays small on a shared machine. Rounds: 2^21, on either device,
        # since a batch's end also ends a round (the CPU replays the GPU's batches exactly).
        self.rounds = round_size_for(model, run_words(model, by_sentence, per_epoch, epochs))
        self.limit = model.batch_words * max(1, model.workers) * 8 if not self.rounds else 1 << 21
        if self.rounds and model.device.type == "cpu" and model.workers > 1:
            logger.info("round_size=%i on the CPU replays the GPU's update order on one thread "
                        "(workers=%i has no effect)", self.rounds, model.workers)
        self.start = self.last_log = time.perf_counter()

    def done_after(self, epoch: int, before: np.ndarray, raw: int) -> float:
        """The schedule's progress once a batch is done, in its unit (sentences or raw
        words): `before` holds the batch's sentences' positions in the epoch."""
        if not len(before):
            return float(epoch * self.per_epoch)
        if self.by_sentence:
            return float(before[-1] + epoch * self.per_epoch + 1)
        return float(before[0] + epoch * self.per_epoch + raw)


@dataclass
class _Epoch:
    """One epoch's sums so far."""

    start: float
    raw: int = 0
    trained: int = 0
    loss: float = 0.0
    examples: float = 0.0


def _train_epoch(model, corpus, run: _Run, epoch: int, queue_size: int,
                 raw_before: int) -> _Epoch:
    """One pass over the corpus, batch by batch, with the progress logs and model.progress;
    raw_before: the raw words of the epochs before."""
    sums = _Epoch(start=time.perf_counter())
    for b in epoch_batches(model.wv.key_to_index, corpus, run.limit, queue_size, run.cache):
        before = b["sentences_before"] if run.by_sentence else b["words_before"]
        positions = before + run.stretch * epoch * run.per_epoch
        stats = train_batch(model, b, positions, run.alpha, run.min_alpha,
                            run.stretch * run.total, run.lockf, run.rounds)
        sums.raw += b["raw"]
        sums.trained += int(stats[2])
        sums.loss += stats[0]
        sums.examples += stats[1]
        if model.compute_loss:
            model.running_training_loss += stats[0]
        _report(model, run, epoch, sums, run.done_after(epoch, before, b["raw"]), raw_before)
    return sums


def _report(model, run: _Run, epoch: int, sums: _Epoch, done: float, raw_before: int) -> None:
    """gensim's progress line (every report_delay seconds) and the model.progress hook."""
    now = time.perf_counter()
    if now - run.last_log >= run.report_delay:
        run.last_log = now
        # gensim's line, then the time left at the run's average pace so far
        eta = (now - run.start) * (run.total - done) / max(done, 1.0)
        logger.info("EPOCH %i - PROGRESS: at %.2f%% %s, %.0f words/s, in_qsize "
                    "%i, out_qsize %i, ETA %.0f s", epoch, 100.0 *
                    (done - epoch * run.per_epoch) / max(run.per_epoch, 1),
                    "examples" if run.by_sentence else "words",
                    sums.trained / max(now - sums.start, 1e-9), -1, -1, eta)
    if model.progress is not None:
        model.progress({
            "epoch": epoch, "epochs": run.epochs, "words_done": done,
            "words_total": run.total, "raw_words": raw_before + sums.raw,
            "seconds": now - run.start, "lr": learning_rate(
                run.alpha, run.min_alpha, done + (run.stretch - 1) * epoch * run.per_epoch,
                run.stretch * run.total),
            "loss": sums.loss / max(sums.examples, 1.0),
        })


def lock_factors(model):
    """wv.vectors_lockf as the op's float32 tensor on the model's device, or None when it
    locks nothing (all ones: the op then reads no factor)."""
    lockf = np.asarray(getattr(model.wv, "vectors_lockf", 1.0), dtype=np.float32).ravel()
    if lockf.size == 0 or not np.isfinite(lockf).all():
        raise ValueError(f"wv.vectors_lockf must be finite factors, got {lockf!r}")
    return None if (lockf == 1.0).all() else torch.from_numpy(lockf).to(model.device)


# round_size "auto" (CUDA's default): rounds of at most MAX_ROUND_SIZE centres, and at least
# ROUNDS_PER_RUN rounds in a training run. Measured (docs/word2vec.md): on WikiText-2 (5
# epochs, 10^7 words) rounds of 4096 match the sequential order's WS-353 and SimLex for
# skip-gram and CBOW, with hs and at alpha 0.05; on small corpora a round's snapshot lags
# behind more of the run, and fewer centres a round keep the lag small (a 36k-word corpus:
# 0.04 below the sequential order in rounds of 64, 0.59 in rounds of 4096).
MAX_ROUND_SIZE = 4096
ROUNDS_PER_RUN = 2048


def checked_round_size(value):
    """round_size as given (None, "auto" or an int >= 0), or a ValueError."""
    if value is not None and value != "auto" and not (type(value) is int and value >= 0):
        raise ValueError(f"round_size must be None, 'auto' or an int >= 0 (0: word2vec.c's "
                         f"sequential order), got {value!r}")
    return value


def round_size_for(model, raw_words: float) -> int:
    """The op's round_size for a run of about raw_words words: the model's int, or for
    "auto" raw_words / ROUNDS_PER_RUN within [1, MAX_ROUND_SIZE]; None is 0 (sequential) on
    the CPU and "auto" on CUDA."""
    size = model.round_size
    if size is None:
        size = 0 if model.device.type == "cpu" else "auto"
    if size != "auto":
        return size
    return int(max(1, min(MAX_ROUND_SIZE, raw_words // ROUNDS_PER_RUN)))


def run_words(model, by_sentence: bool, per_epoch: int, epochs: int) -> float:
    """Raw words of a training run: epochs x total_words, or for a schedule in sentences
    their share of the scanned corpus's words (MAX_ROUND_SIZE rounds when unknown)."""
    if not by_sentence:
        return float(per_epoch) * epochs
    if model.corpus_count <= 0:
        return float(MAX_ROUND_SIZE * ROUNDS_PER_RUN)
    return model.corpus_total_words * per_epoch / model.corpus_count * epochs


def walkers(model, rounds: int) -> int:
    """The op's num_workers. Sequential order (rounds 0): CPU threads, or on CUDA one warp
    (the CPU's single worker replayed). Rounds: one CPU thread (the replay), or every warp
    the GPU holds (the model is the same for any number)."""
    if model.device.type == "cpu":
        return 1 if rounds else model.workers
    return 1 << 30 if rounds else 1


# update="batched": the centres that share one set of negatives. Skip-gram: one centre, whose
# contexts already make a minibatch of up to 2 * window predictions (HogBatch); CBOW makes one
# prediction a centre, so a group of centres shares them (bench/bench_word2vec.py measured the
# sizes).
BATCH_GROUP = {1: 1, 0: 4}


def batched(model, rounds: int) -> bool:
    """Whether this run trains in minibatches of shared negatives: update="batched", or "auto"
    for skip-gram, with negative sampling alone, on the CPU, in the sequential order
    (otherwise word2vec.c's). Models saved before "auto" existed say "pairs"."""
    update = getattr(model, "update", "pairs")
    wanted = update == "batched" or (update == "auto" and model.sg)
    return (wanted and model.negative > 0 and not model.hs and not rounds and
            model.device.type == "cpu")


def train_batch(model, b: dict, before: np.ndarray, alpha, min_alpha, total,
                lockf=None, rounds=0) -> list:
    """One native call on batch `b` (data.epoch_batches), its sentences at positions `before`
    of the schedule of `total`: the op's stats as a list (loss, predictions, tokens kept)."""
    dev = model.device
    hs = dict(syn1=model._syn1, hs_paths=model._hs_paths,
              hs_offsets=model._hs_offsets) if model.hs else {}
    syn1neg = model._syn1neg if model.negative else model._syn0.new_empty(0, model.vector_size)
    common = dict(
        syn0=model._syn0, syn1neg=syn1neg, tokens=torch.from_numpy(b["tokens"]).to(dev),
        sentence_ends=torch.from_numpy(b["ends"]).to(dev),
        words_before=torch.from_numpy(before).to(dev), keep_prob=model._keep,
        ns_prob=model._ns_prob, ns_alias=model._ns_alias, seed=model.seed & ((1 << 63) - 1),
        first_token=model._tokens_trained, sg=bool(model.sg), cbow_mean=bool(model.cbow_mean),
        window=model.window, negative=model.negative, shrink_windows=model.shrink_windows,
        alpha=alpha, min_alpha=min_alpha, total_words=total,
        num_workers=walkers(model, rounds), lockf=lockf)
    if batched(model, rounds):
        stats = word2vec_train_batched(**common, group=BATCH_GROUP[int(model.sg)])
    else:
        stats = Word2VecTrainArgs(**common, round_size=rounds, **hs).run()
    stats = stats.tolist()
    model._tokens_trained += len(b["tokens"])
    return stats


def learning_rate(alpha: float, min_alpha: float, done: float, total: float) -> float:
    """The schedule of csrc/common/word2vec.h: linear from alpha to min_alpha, clamped."""
    progress = done / total if total > 0 else 0.0
    return max(min_alpha, alpha - (alpha - min_alpha) * progress)
