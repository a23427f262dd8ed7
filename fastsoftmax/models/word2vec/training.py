"""word2vec's training loop: epochs of batches (data.epoch_batches) handed to the native op
``fastsoftmax::word2vec_train``, the linear learning-rate schedule, gensim's callbacks and
progress logs, and the per-batch ``model.progress`` hook (the command line's progress bar)."""

from __future__ import annotations

import logging
import time

import numpy as np
import torch

from ... import ops
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
    total = float(max(1, epochs * per_epoch))
    # gensim's corpus_file workers (W of them) each count their own share of an epoch over
    # the whole epoch: in epoch e of E the progress runs from e/E to (e + 1/W)/E only. The op's
    # rate reads position / total; stretching all but the within-epoch part n by W gives
    # (W e P + n) / (W E P) = (e + n / (W P)) / E, gensim's progress in exact integers.
    stretch = model.workers if schedule == "gensim-corpus_file" else 1
    model.running_training_loss = 0.0
    trained = raw_total = 0
    lockf = lock_factors(model)
    cache = [] if data.replayable(corpus) and epochs > 1 else None  # one pass: nothing to keep
    # Words per native call. The CPU's sequential order: eight jobs of batch_words per
    # worker, so that the wait for the slowest worker at the end of a call (at most one run
    # of ~2k tokens) stays small on a shared machine. Rounds: 2^21, on either device, since
    # a batch's end also ends a round (the CPU replays the GPU's batches exactly).
    rounds = round_size_for(model, run_words(model, by_sentence, per_epoch, epochs))
    limit = model.batch_words * max(1, model.workers) * 8 if not rounds else 1 << 21
    if rounds and model.device.type == "cpu" and model.workers > 1:
        logger.info("round_size=%i on the CPU replays the GPU's update order on one thread "
                    "(workers=%i has no effect)", rounds, model.workers)
    start = last_log = time.perf_counter()
    logger.info("training model with %i workers on %i vocabulary and %i features, using "
                "sg=%s hs=%s sample=%s negative=%s window=%s shrink_windows=%s round_size=%s",
                model.workers, len(model.wv), model.vector_size, model.sg, model.hs, model.sample,
                model.negative, model.window, model.shrink_windows, rounds)
    for cb in callbacks:
        getattr(cb, "on_train_begin", lambda m: None)(model)
    for epoch in range(epochs):
        for cb in callbacks:
            getattr(cb, "on_epoch_begin", lambda m: None)(model)
        epoch_start, epoch_raw, epoch_trained = time.perf_counter(), 0, 0
        epoch_loss = epoch_examples = 0.0
        for b in epoch_batches(model.wv.key_to_index, corpus, limit,
                               queue_factor * model.workers, cache):
            before = b["sentences_before"] if by_sentence else b["words_before"]
            positions = before + stretch * epoch * per_epoch
            before = before + epoch * per_epoch
            stats = train_batch(model, b, positions, alpha, min_alpha, stretch * total, lockf,
                                rounds)
            epoch_raw += b["raw"]
            epoch_trained += int(stats[2])
            epoch_loss += stats[0]
            epoch_examples += stats[1]
            if model.compute_loss:
                model.running_training_loss += stats[0]
            # progress once this batch is done, in the schedule's unit
            if not len(before):
                done = float(epoch * per_epoch)
            elif by_sentence:
                done = float(before[-1] + 1)
            else:
                done = float(before[0] + b["raw"])
            now = time.perf_counter()
            if now - last_log >= report_delay:
                last_log = now
                # gensim's line, then the time left at the run's average pace so far
                eta = (now - start) * (total - done) / max(done, 1.0)
                logger.info("EPOCH %i - PROGRESS: at %.2f%% %s, %.0f words/s, in_qsize "
                            "%i, out_qsize %i, ETA %.0f s", epoch, 100.0 *
                            (done - epoch * per_epoch) / max(per_epoch, 1),
                            "examples" if by_sentence else "words",
                            epoch_trained / max(now - epoch_start, 1e-9), -1, -1, eta)
            if model.progress is not None:
                model.progress({
                    "epoch": epoch, "epochs": epochs, "words_done": done,
                    "words_total": total, "raw_words": raw_total + epoch_raw,
                    "seconds": now - start, "lr": learning_rate(
                        alpha, min_alpha, done + (stretch - 1) * epoch * per_epoch,
                        stretch * total),
                    "loss": epoch_loss / max(epoch_examples, 1.0),
                })
        raw_total += epoch_raw
        trained += epoch_trained
        elapsed = max(time.perf_counter() - epoch_start, 1e-9)
        logger.info("EPOCH %i: training on %i raw words (%i effective words) took %.1fs, "
                    "%.0f effective words/s", epoch, epoch_raw, epoch_trained, elapsed,
                    epoch_trained / elapsed)
        model._sync_vectors()
        for cb in callbacks:
            getattr(cb, "on_epoch_end", lambda m: None)(model)
    model.train_seconds = time.perf_counter() - start
    logger.info("Word2Vec lifecycle event {'msg': 'training on %i raw words (%i effective "
                "words) took %.1fs, %.0f effective words/s'}", raw_total, trained,
                model.train_seconds, trained / max(model.train_seconds, 1e-9))
    model._sync_vectors()
    for cb in callbacks:
        getattr(cb, "on_train_end", lambda m: None)(model)
    return trained, raw_total


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


def train_batch(model, b: dict, before: np.ndarray, alpha, min_alpha, total,
                lockf=None, rounds=0) -> list:
    dev = model.device
    hs = dict(syn1=model._syn1, hs_paths=model._hs_paths,
              hs_offsets=model._hs_offsets) if model.hs else {}
    syn1neg = model._syn1neg if model.negative else model._syn0.new_empty(0, model.vector_size)
    stats = ops.word2vec_train(
        model._syn0, syn1neg, torch.from_numpy(b["tokens"]).to(dev),
        torch.from_numpy(b["ends"]).to(dev), torch.from_numpy(before).to(dev), model._keep,
        model._ns_prob, model._ns_alias, model.seed & ((1 << 63) - 1), model._tokens_trained,
        bool(model.sg), bool(model.cbow_mean), model.window, model.negative,
        model.shrink_windows, alpha, min_alpha, total, walkers(model, rounds), lockf=lockf,
        round_size=rounds, **hs).tolist()
    model._tokens_trained += len(b["tokens"])
    return stats


def learning_rate(alpha: float, min_alpha: float, done: float, total: float) -> float:
    """The schedule of csrc/common/word2vec.h: linear from alpha to min_alpha, clamped."""
    progress = done / total if total > 0 else 0.0
    return max(min_alpha, alpha - (alpha - min_alpha) * progress)
