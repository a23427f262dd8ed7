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
    # Words per native call. CPU: eight jobs of batch_words per worker, so that the wait
    # for the slowest worker at the end of a call (at most one run of ~2k tokens) stays
    # small on a shared machine. CUDA: a warp per sentence needs tens of thousands.
    limit = (model.batch_words * max(1, model.workers) * 8 if model.device.type == "cpu"
             else 1 << 21)
    start = last_log = time.perf_counter()
    logger.info("training model with %i workers on %i vocabulary and %i features, using "
                "sg=%s hs=%s sample=%s negative=%s window=%s shrink_windows=%s",
                model.workers, len(model.wv), model.vector_size, model.sg, model.hs, model.sample,
                model.negative, model.window, model.shrink_windows)
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
            stats = train_batch(model, b, positions, alpha, min_alpha, stretch * total, lockf)
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


def checked_gpu_warps(value):
    """gpu_warps as given (None or an int >= 1), or a ValueError."""
    if value is not None and not (type(value) is int and value >= 1):
        raise ValueError(f"gpu_warps must be None or an int >= 1, got {value!r}")
    return value


def walkers(model) -> int:
    """The op's num_workers: CPU threads; on CUDA one warp for workers=1 (the CPU's single
    worker replayed), else gpu_warps, or every warp the GPU holds at once."""
    if model.device.type == "cpu" or model.workers == 1:
        return model.workers
    if model.hs:
        raise ValueError(CUDA_HS_REFUSAL)
    return model.gpu_warps or 1 << 30


# Measured on an H200 (bench/results/word2vec-runs-cuda.csv): the warps race on the top nodes
# of the Huffman tree, which every prediction updates, and the vectors learn nothing.
CUDA_HS_REFUSAL = (
    "hs=1 on CUDA with workers > 1 trains vectors no better than chance: the warps race on the "
    "top nodes of the Huffman tree, which every word's path updates (WikiText-2, one epoch: "
    "WS-353 Spearman -0.01 on an H200 against 0.23 with 16 CPU threads; docs/gpu.md). "
    "Train hs=1 on the CPU, use negative sampling (hs=0) on CUDA, or workers=1 (one warp: "
    "the CPU's single worker replayed exactly, but slowly)")


def train_batch(model, b: dict, before: np.ndarray, alpha, min_alpha, total,
                lockf=None) -> list:
    dev = model.device
    hs = dict(syn1=model._syn1, hs_paths=model._hs_paths,
              hs_offsets=model._hs_offsets) if model.hs else {}
    syn1neg = model._syn1neg if model.negative else model._syn0.new_empty(0, model.vector_size)
    stats = ops.word2vec_train(
        model._syn0, syn1neg, torch.from_numpy(b["tokens"]).to(dev),
        torch.from_numpy(b["ends"]).to(dev), torch.from_numpy(before).to(dev), model._keep,
        model._ns_prob, model._ns_alias, model.seed & ((1 << 63) - 1), model._tokens_trained,
        bool(model.sg), bool(model.cbow_mean), model.window, model.negative,
        model.shrink_windows, alpha, min_alpha, total, walkers(model), lockf=lockf,
        **hs).tolist()
    model._tokens_trained += len(b["tokens"])
    return stats


def learning_rate(alpha: float, min_alpha: float, done: float, total: float) -> float:
    """The schedule of csrc/common/word2vec.h: linear from alpha to min_alpha, clamped."""
    progress = done / total if total > 0 else 0.0
    return max(min_alpha, alpha - (alpha - min_alpha) * progress)
