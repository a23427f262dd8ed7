"""word2vec side by side with gensim, and count-based PPMI vectors, in one run.

    python bench/bench_word2vec.py [--threads 2] [--corpus wikitext2] [--models sg,cbow]
        [--epochs 1,3,5] [--seeds 1,2,3] [--hs 0|1] [--negative 5] [--device cpu|cuda]
        [--round-size auto|R] [--ppmi] [--analogies FILE]

Settings (gensim's defaults unless said): vector_size 100, window 5, negative 5, sample 1e-3,
min_count 5, alpha 0.025 -> 1e-4, for skip-gram and CBOW. --hs 1 --negative 0 compares the
hierarchical softmax alone (both libraries get the same hs and negative). Both libraries get the same
in-memory list of token lists and the same seed; for each seed fastsoftmax and gensim run one
after the other, so both see the same machine load. Reported per (model, epochs, library):
  * WS-353 Spearman: mean and spread (sample std) over the seeds, and each seed's value,
    both scored with the same function (fastsoftmax's evaluate_word_pairs, held equal to
    gensim's by the tests);
  * words/s: raw corpus words (OOV included) x epochs / seconds in train() (vocabulary
    excluded), median over seeds, and ours / gensim's;
  * with --ppmi: PPMIVectors (window 5, cds 0.75, eig 0.5, d = 100) build time and scores;
  * with --analogies FILE (questions-words.txt format): 3CosAdd accuracy of every model.
Rows go to bench/results/word2vec-runs-<cpu|cuda>.csv in bench/common.py's schema (one row per
run and metric, the settings in `shape`), with the load average. The machine may be shared:
compare the columns of one run (the ratios), not runs.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import bound_model  # noqa: E402
from common import DATA, write_results  # noqa: E402

from fastsoftmax.models import KeyedVectors, PPMIVectors, Word2Vec  # noqa: E402

CORPORA = {
    "wikitext2": os.path.join(DATA, "wikitext-2", "wiki.train.tokens"),
    "ptb": os.path.join(DATA, "ptb", "ptb.train.txt"),
}
WS353 = os.path.join(DATA, "word-similarity", "wordsim353.tsv")
PARAMS = dict(vector_size=100, window=5, negative=5, sample=1e-3, min_count=5, alpha=0.025,
              min_alpha=1e-4)


def load(path):
    with open(path, encoding="utf8") as f:
        return [line.split() for line in f if line.strip()]


def train(impl, sentences, sg, epochs, threads, seed, device, params, round_size=None):
    """(KeyedVectors, raw words per epoch, seconds in train())."""
    if impl == "fastsoftmax":
        m = Word2Vec(sg=sg, workers=threads, seed=seed, epochs=epochs, device=device,
                     round_size=round_size, **params)
    else:
        from gensim.models import Word2Vec as GWord2Vec

        m = GWord2Vec(sg=sg, workers=threads, seed=seed, epochs=epochs, **params)
    m.build_vocab(sentences)
    t = time.perf_counter()
    m.train(sentences, total_examples=m.corpus_count, total_words=m.corpus_total_words,
            epochs=epochs)
    seconds = time.perf_counter() - t
    kv = KeyedVectors(PARAMS["vector_size"])
    kv.add_vectors(list(m.wv.index_to_key), np.asarray(m.wv.vectors, dtype=np.float32))
    return kv, m.corpus_total_words, seconds


def scores(kv, analogies):
    spearman = kv.evaluate_word_pairs(WS353)[1][0]
    acc = kv.evaluate_word_analogies(analogies)[0] if analogies else float("nan")
    return spearman, acc


def spread(values):
    return statistics.stdev(values) if len(values) > 1 else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--corpus", default="wikitext2", choices=sorted(CORPORA))
    ap.add_argument("--models", default="sg,cbow")
    ap.add_argument("--epochs", default="1,3,5")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--no-gensim", action="store_true")
    ap.add_argument("--gensim-only", action="store_true",
                    help="gensim alone (e.g. on a GPU machine's cores, beside --device cuda)")
    ap.add_argument("--hs", type=int, default=0, choices=(0, 1),
                    help="1: hierarchical softmax (with --negative 0: alone)")
    ap.add_argument("--negative", type=int, default=PARAMS["negative"])
    ap.add_argument("--round-size", default=None,
                    help="Word2Vec's round_size: auto, or centres a lockstep round (0: the "
                         "sequential order); default: the device's (CPU 0, CUDA auto)")
    ap.add_argument("--ppmi", action="store_true", help="add the PPMI + SVD row")
    ap.add_argument("--analogies", metavar="FILE", help="questions-words.txt to score")
    bound_model.add_flag(ap)
    args = ap.parse_args()
    if args.bound_model:  # per 10^7 training words, d=100, window 5, negative 5
        bound_model.print_model([bound_model.word2vec(1e7, 100, sg=sg) for sg in (True, False)])
        return
    import torch

    params = dict(PARAMS, hs=args.hs, negative=args.negative)
    if args.no_gensim and args.gensim_only:
        ap.error("--no-gensim and --gensim-only leave nothing to run")
    impls = [] if args.gensim_only else ["fastsoftmax"]
    if not args.no_gensim:
        try:
            import gensim

            impls.append(f"gensim-{gensim.__version__}")
        except ImportError:
            print("gensim is not installed (pip install gensim==4.4.0): fastsoftmax only")
    torch.set_num_threads(args.threads)
    sentences = load(CORPORA[args.corpus])
    seeds = [int(s) for s in args.seeds.split(",")]
    rows, summary = [], []
    round_size = (None if args.round_size is None else args.round_size
                  if args.round_size == "auto" else int(args.round_size))
    layers = f"hs={args.hs} negative={args.negative}" + (
        f" round_size={round_size}" if round_size is not None else "")

    def add_rows(model, provider, shape, **metrics):
        case = f"word2vec/{args.corpus}/{model}"
        rows.extend(dict(case=case, provider=provider, shape=shape, metric=k, value=v)
                    for k, v in metrics.items())
    for model in args.models.split(","):
        sg = 1 if model == "sg" else 0
        for epochs in [int(e) for e in args.epochs.split(",")]:
            runs = {impl: [] for impl in impls}
            for seed in seeds:
                for impl in impls:
                    load_before = os.getloadavg()[0]
                    kv, raw, seconds = train(impl.split("-")[0], sentences, sg, epochs,
                                             args.threads, seed, args.device, params,
                                             round_size)
                    assert np.isfinite(kv.vectors).all(), f"{impl}: non-finite vectors"
                    ws, acc = scores(kv, args.analogies)
                    wps = raw * epochs / seconds
                    runs[impl].append((ws, acc, wps))
                    load_avg = f"{load_before:.1f}/{os.getloadavg()[0]:.1f}"
                    add_rows(model, impl, f"{layers} d=100 w=5 sample=1e-3 epochs={epochs} "
                             f"seed={seed} threads={args.threads}", words_per_s=round(wps),
                             train_seconds=round(seconds, 2), ws353_spearman=round(ws, 4),
                             analogy_accuracy=round(acc, 4), vocab=len(kv), corpus_words=raw,
                             load_avg_1min=load_avg)
                    print(f"{model:4s} {epochs} ep seed {seed} {impl:14s} {layers} "
                          f"{wps:11,.0f} words/s {seconds:6.1f} s  WS-353 {ws:.4f}  "
                          f"(load {load_avg})", flush=True)
            for impl in impls:
                ws = [r[0] for r in runs[impl]]
                summary.append((model, epochs, impl, ws, statistics.median(r[2] for r in
                                                                           runs[impl]),
                                statistics.mean(r[1] for r in runs[impl])))
    if args.ppmi:
        t = time.perf_counter()
        ppmi = PPMIVectors(sentences, vector_size=100, window=5, min_count=5)
        seconds = time.perf_counter() - t
        ws, acc = scores(ppmi.wv, args.analogies)
        add_rows("ppmi-svd", "fastsoftmax", "window=5 cds=0.75 eig=0.5 d=100",
                 train_seconds=round(seconds, 2), ws353_spearman=round(ws, 4),
                 analogy_accuracy=round(acc, 4), vocab=len(ppmi.wv),
                 corpus_words=int(ppmi.wv.counts.sum()),
                 load_avg_1min=f"{os.getloadavg()[0]:.1f}")
        summary.append(("ppmi-svd", 0, "fastsoftmax", [ws], 0.0, acc))
        print(f"PPMI + SVD: {seconds:.1f} s ({ {k: round(v, 1) for k, v in ppmi.seconds.items()} })"
              f"  WS-353 {ws:.4f}", flush=True)
    out = write_results("word2vec-runs", args.device, rows)
    print(f"\nwrote {len(rows)} rows to {os.path.relpath(out, ROOT)}\n")
    print(f"output layer: {layers}\n")
    print("| model | epochs | library | WS-353 Spearman mean ± std (per seed) | analogies | "
          "words/s (median) | ours / gensim |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ours = {(m, e): w for m, e, i, _, w, _ in summary if i == "fastsoftmax"}
    for model, epochs, impl, ws, wps, acc in summary:
        ratio = ("" if impl == "fastsoftmax" or not wps or (model, epochs) not in ours
                 else f"{ours[(model, epochs)] / wps:.2f}×")
        per_seed = ", ".join(f"{x:.3f}" for x in ws)
        print(f"| {model} | {epochs or '-'} | {impl} | {statistics.mean(ws):.3f} ± "
              f"{spread(ws):.3f} ({per_seed}) | {acc:.3f} | {wps:,.0f} | {ratio} |")


if __name__ == "__main__":
    main()
