"""word2vec's native kernel alone: the calls of one training epoch on a corpus are recorded
(their batches, learning rates and counters), then replayed from the same starting vectors
`--reps` times, and only the native calls are timed: no reader, no Python between calls.
Reported: the fastest and the median replay, and nanoseconds per kept (subsampled) word.

    python bench/word2vec_replay.py [--model cbow|sg] [--update auto|pairs|batched]
        [--workers 1] [--reps 5] [--corpus wikitext2]

To compare two builds, run it from each checkout in turn (a ratio within one run of the
machine holds; an absolute time does not). With one worker a replay is a pure function of
the inputs: the printed checksum of the trained vectors is the same for builds that train the
same vectors bit for bit.
"""

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from bench_word2vec import CORPORA  # noqa: E402

import fastsoftmax.models.word2vec.training as training  # noqa: E402
from fastsoftmax.models import Word2Vec  # noqa: E402

PARAMS = dict(vector_size=100, window=5, negative=5, sample=1e-3, min_count=5)


def record(path, sg, update):
    """(model, recorded calls): the arguments of every train_batch of one epoch."""
    calls = []
    original = training.train_batch

    def recording(model, b, before, alpha, min_alpha, total, lockf=None, rounds=0):
        calls.append((dict(b), before.copy(), alpha, min_alpha, total, model._tokens_trained))
        return original(model, b, before, alpha, min_alpha, total, lockf, rounds)

    m = Word2Vec(sg=sg, workers=1, seed=1, epochs=1, update=update, **PARAMS)
    m.build_vocab(corpus_file=path)
    start = (m._syn0.clone(), m._syn1neg.clone())
    training.train_batch = recording
    try:
        m.train(corpus_file=path, total_examples=m.corpus_count,
                total_words=m.corpus_total_words, epochs=1)
    finally:
        training.train_batch = original
    return m, start, calls


def replay(m, start, calls, workers):
    """(seconds in the native calls, words kept) of one replay from the starting vectors."""
    m._syn0.copy_(start[0])
    m._syn1neg.copy_(start[1])
    m.workers = workers
    seconds = kept = 0.0
    for b, before, alpha, min_alpha, total, tokens_trained in calls:
        m._tokens_trained = tokens_trained
        t = time.perf_counter()
        stats = training.train_batch(m, b, before, alpha, min_alpha, total)
        seconds += time.perf_counter() - t
        kept += stats[2]
    return seconds, kept


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="wikitext2", choices=sorted(CORPORA))
    ap.add_argument("--model", default="cbow", choices=("cbow", "sg"))
    ap.add_argument("--update", default="auto", choices=("auto", "pairs", "batched"))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    if args.workers < 1 or args.reps < 1:
        ap.error("--workers and --reps must be at least 1")
    import torch

    torch.set_num_threads(args.workers)
    m, start, calls = record(CORPORA[args.corpus], int(args.model == "sg"), args.update)
    runs = [replay(m, start, calls, args.workers) for _ in range(args.reps)]
    times = [s for s, _ in runs]
    kept = runs[0][1]
    checksum = float(m._syn0.double().abs().sum() + m._syn1neg.double().abs().sum())
    print(f"{args.model} update={args.update} workers={args.workers}: min {min(times):.4f} s, "
          f"median {statistics.median(times):.4f} s, {min(times) / kept * 1e9:.1f} ns a kept "
          f"word ({kept:,.0f} kept), checksum {checksum:.6f}")


if __name__ == "__main__":
    main()
