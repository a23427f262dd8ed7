"""The GPU's word2vec quality, measured on a CPU, against our CPU trainer.

    python bench/word2vec_gpu_quality.py [--models sg,cbow] [--seeds 1,2,3] [--epochs 5]
        [--threads 1,2] [--round-size auto] [--hs 0] [--jobs 2] [--corpus PATH]

The CUDA trainer updates in lockstep rounds (csrc/common/word2vec_math.h), whose model does
not depend on the GPU's timing. The CPU replays that order exactly, up to the order of float
sums (csrc/cpu/word2vec_rounds.cpp; tests/test_word2vec_rounds.py holds the emulated CUDA
kernels to this replay), so the GPU's quality can be measured here. For each model and seed,
on the same corpus and seed, it trains:
  * our CPU trainer, word2vec.c's sequential order, with each --threads count (Hogwild);
  * the lockstep rounds at --round-size centres (default "auto", the GPU's: 4096 on
    WikiText-2), replayed on one thread.
Settings are gensim's defaults (d 100, window 5, negative 5, sample 1e-3, min_count 5, alpha
0.025 -> 1e-4); --hs 1 trains the hierarchical softmax alone. Scores: WS-353 and SimLex-999
Spearman, from gensim's bundled files. Printed: each configuration's mean and 95% confidence
interval over the seeds, and the paired differences (same seed) against the first --threads
count, mean ± the 95% half-width of Student's t. --round-size 0 leaves the rounds out (the
thread-count comparison alone). --jobs runs that many trainings at once (the machine's cores);
quality does not depend on it. Rows go to bench/results/word2vec-gpu-quality-cpu.csv.
"""

import argparse
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import DATA, write_results  # noqa: E402

PARAMS = dict(vector_size=100, window=5, sample=1e-3, min_count=5, alpha=0.025,
              min_alpha=1e-4)
CORPUS = os.path.join(DATA, "wikitext-2", "wiki.train.tokens")
_SENTENCES = None  # the corpus, loaded before the worker processes fork


def benchmarks():
    """(WS-353, SimLex-999) paths: the files gensim ships with its tests."""
    from gensim.test.utils import datapath

    return datapath("wordsim353.tsv"), datapath("simlex999.txt")


def train_one(job):
    """Scores of one training: job = (model, label, threads, round_size, seed, epochs, hs)."""
    import torch

    from fastsoftmax.models import Word2Vec
    from fastsoftmax.models.word2vec.training import round_size_for, run_words

    model, label, threads, round_size, seed, epochs, hs = job
    torch.set_num_threads(threads)
    layers = dict(hs=1, negative=0) if hs else dict(hs=0, negative=5)
    m = Word2Vec(sg=int(model == "sg"), workers=threads, seed=seed, epochs=epochs,
                 round_size=round_size, **layers, **PARAMS)
    m.build_vocab(_SENTENCES)
    last = {}
    m.progress = last.update
    start = time.perf_counter()
    m.train(_SENTENCES, total_examples=m.corpus_count, total_words=m.corpus_total_words,
            epochs=epochs)
    seconds = time.perf_counter() - start
    ws353, simlex = benchmarks()
    rounds = round_size_for(m, run_words(m, True, m.corpus_count, epochs))
    return dict(job=job, rounds=rounds, ws353=m.wv.evaluate_word_pairs(ws353)[1][0],
                simlex=m.wv.evaluate_word_pairs(simlex)[1][0], loss=last["loss"],
                seconds=seconds, words_per_s=m.corpus_total_words * epochs / seconds)


def interval(values):
    """(mean, 95% half-width) of Student's t over the values (0 width for one value)."""
    from scipy.stats import t

    n = len(values)
    mean = statistics.mean(values)
    if n < 2:
        return mean, 0.0
    return mean, t.ppf(0.975, n - 1) * statistics.stdev(values) / math.sqrt(n)


def configurations(threads, round_size):
    out = [(f"sequential, {n} thread{'s' * (n > 1)}", n, 0) for n in threads]
    if round_size != 0:
        out.append((f"rounds ({round_size}: the GPU's order)", 1, round_size))
    return out


def report(model, configs, results, seeds):
    """Prints one model's table and its paired differences against the first config."""
    print(f"\n{model}: mean ± 95% CI over seeds {seeds}")
    print("| configuration | WS-353 | SimLex-999 | training loss | words/s |")
    print("| --- | --- | --- | --- | --- |")
    for label, _, _ in configs:
        runs = [results[(model, label, s)] for s in seeds]
        cells = [interval([r[k] for r in runs]) for k in ("ws353", "simlex", "loss")]
        wps = statistics.median(r["words_per_s"] for r in runs)
        print(f"| {label} | " + " | ".join(f"{m:.4f} ± {h:.4f}" for m, h in cells)
              + f" | {wps:,.0f} |")
    base = configs[0][0]
    print(f"\npaired differences (same seed) against {base}:")
    for label, _, _ in configs[1:]:
        cells = []
        for k in ("ws353", "simlex"):
            m, h = interval([results[(model, label, s)][k] - results[(model, base, s)][k]
                             for s in seeds])
            cells.append(f"{k} {m:+.4f} ± {h:.4f} [{m - h:+.4f}, {m + h:+.4f}]")
        print(f"  {label}: " + "; ".join(cells))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="sg,cbow")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--round-size", default="auto",
                    help="centres a round, or auto (the GPU's default); 0: no rounds")
    ap.add_argument("--hs", type=int, default=0, choices=(0, 1))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--corpus", default=CORPUS)
    args = ap.parse_args()
    if not os.path.exists(args.corpus):
        ap.error(f"corpus {args.corpus} not found (give --corpus, or set FASTSOFTMAX_DATA)")
    round_size = args.round_size if args.round_size == "auto" else int(args.round_size)
    seeds = [int(s) for s in args.seeds.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    models = args.models.split(",")
    global _SENTENCES
    with open(args.corpus, encoding="utf8") as f:
        _SENTENCES = [line.split() for line in f if line.strip()]
    configs = configurations(threads, round_size)
    jobs = [(model, label, n, r, seed, args.epochs, args.hs)
            for model in models for seed in seeds for label, n, r in configs]
    results, rows = {}, []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for r in pool.map(train_one, jobs):
            model, label, n, rs, seed, epochs, hs = r["job"]
            results[(model, label, seed)] = r
            rounds = r["rounds"] if rs else 0
            print(f"{model} seed {seed} {label}: WS-353 {r['ws353']:.4f} SimLex "
                  f"{r['simlex']:.4f} loss {r['loss']:.4f} ({r['seconds']:.0f} s, round_size "
                  f"{rounds})", flush=True)
            shape = (f"hs={hs} negative={0 if hs else 5} d=100 w=5 epochs={epochs} seed={seed} "
                     f"threads={n} round_size={rounds} jobs={args.jobs}")
            rows.extend(dict(case=f"word2vec/{os.path.basename(args.corpus)}/{model}",
                             provider=label, shape=shape, metric=k, value=round(r[k], 6))
                        for k in ("ws353", "simlex", "loss", "words_per_s"))
    for model in models:
        report(model, configs, results, seeds)
    out = write_results("word2vec-gpu-quality", "cpu", rows)
    print(f"\nwrote {len(rows)} rows to {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
