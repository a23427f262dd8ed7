"""How long word2vec's trainer waits for its readers within one train() call: the time from
train() to the first native call (the first batch being read), the sum of the gaps between
native calls (the training thread waiting for a batch or for the GIL), and train()'s wall.

    python bench/word2vec_reader_idle.py [--models cbow,sg] [--inputs iterable,corpus_file]
        [--workers 2] [--rounds 5] [--label NAME] [--encode]

WikiText-2, 1 epoch, update="pairs", gensim's defaults otherwise. Every round runs every
(model, input) once; the table gives medians over rounds. Rows go to
bench/results/word2vec-reader-idle-cpu.csv under --label (the checkout's name): to compare two
checkouts, run this script from each in turn, one round at a time, and put their rows in one
file; docs/word2vec.md renders the earliest label as "before" and the newest as "after".
--encode instead times the Python reader alone: CPU seconds of
data.python_batches over WikiText-2 (a vocabulary of min_count 5, batches of 160,000 words),
median of --rounds. Hold the machine's benchmark lock: flock /tmp/bench.lock python ...
"""

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from bench_word2vec import CORPORA, load  # noqa: E402
from common import write_results  # noqa: E402

from fastsoftmax.models import Word2Vec  # noqa: E402
from fastsoftmax.models.word2vec import training  # noqa: E402

PARAMS = dict(vector_size=100, window=5, negative=5, sample=1e-3, min_count=5, epochs=1)


def timed_calls():
    """Wraps training.train_batch to log (start, end) of every native call. Returns the log
    (a list to clear between runs)."""
    calls, native = [], training.train_batch

    def train_batch(*args, **kw):
        start = time.perf_counter()
        out = native(*args, **kw)
        calls.append((start, time.perf_counter()))
        return out

    training.train_batch = train_batch
    return calls


def one_run(model, source, workers, calls):
    m = Word2Vec(sg=int(model == "sg"), workers=workers, seed=1, update="pairs", **PARAMS)
    m.build_vocab(**source)
    calls.clear()
    start = time.perf_counter()
    m.train(**source, total_examples=m.corpus_count, total_words=m.corpus_total_words,
            epochs=1)
    wall = time.perf_counter() - start
    return {"first_ms": 1000 * (calls[0][0] - start), "calls": len(calls),
            "gaps_ms": 1000 * sum(b[0] - a[1] for a, b in zip(calls, calls[1:])),
            "wall_s": wall}


def encode_seconds(sentences, rounds):
    """Median CPU seconds of the Python reader's batches over `sentences`."""
    from fastsoftmax.models.word2vec import data

    m = Word2Vec(min_count=5)
    m.build_vocab(sentences)
    seconds = []
    for _ in range(rounds):
        start = time.process_time()
        list(data.python_batches(m.wv.key_to_index, sentences, 160000))
        seconds.append(time.process_time() - start)
    return statistics.median(seconds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="cbow,sg")
    ap.add_argument("--inputs", default="iterable,corpus_file")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--label", default="HEAD", help="the checkout's name in the rows")
    ap.add_argument("--encode", action="store_true")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.workers)
    path = CORPORA["wikitext2"]
    inputs = {"iterable": dict(corpus_iterable=load(path)), "corpus_file": dict(corpus_file=path)}
    if args.encode:
        seconds = encode_seconds(inputs["iterable"]["corpus_iterable"], args.rounds)
        print(f"python_batches over WikiText-2: {seconds:.4f} CPU s (median of {args.rounds})")
        return
    bad = [x for x in args.inputs.split(",") if x not in inputs]
    if bad:
        ap.error(f"unknown input {bad}: inputs {list(inputs)}")
    calls, runs, rows = timed_calls(), {}, []
    for r in range(args.rounds):
        for model in args.models.split(","):
            for name in args.inputs.split(","):
                run = one_run(model, inputs[name], args.workers, calls)
                runs.setdefault((model, name), []).append(run)
                rows += [dict(case=f"word2vec/wikitext2/{model}/{name}", provider=args.label,
                              shape=f"workers={args.workers} round={r}", metric=k, value=v)
                         for k, v in run.items() if k != "calls"]
    write_results("word2vec-reader-idle", "cpu", rows)
    print("| model | input | first native call (ms) | gaps (ms) | train() (s) |")
    print("| --- | --- | --- | --- | --- |")
    for (model, name), rs in runs.items():
        med = [statistics.median(r[k] for r in rs) for k in ("first_ms", "gaps_ms", "wall_s")]
        print(f"| {model} | {name} | {med[0]:.1f} | {med[1]:.1f} | {med[2]:.3f} |")

if __name__ == "__main__":
    main()
