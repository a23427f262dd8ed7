"""word2vec's two update orders side by side with gensim in one run: words/s of fastsoftmax
in word2vec.c's order (update="pairs") and in minibatches of shared negatives
(update="batched"), and of gensim, from memory (a list of token lists) and from corpus_file.

    python bench/bench_word2vec_update.py [--corpus wikitext2] [--models sg,cbow]
        [--inputs iterable,corpus_file] [--workers 2] [--epochs 1] [--rounds 3]

Settings: gensim's defaults (vector_size 100, window 5, negative 5, sample 1e-3, min_count 5,
alpha 0.025). Every round runs every library once per (model, input), in turn, so load on a
shared machine hits all alike; reported are the medians over rounds of raw words (OOV
included) x epochs / seconds in train(), with each one's ratio to gensim on the same input.
Rows go to bench/results/word2vec-update-cpu.csv (bench/common.py's schema). Quality (WS-353
over seeds) is bench/word2vec_parity.py's.
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

PARAMS = dict(vector_size=100, window=5, negative=5, sample=1e-3, min_count=5)
LIBRARIES = ("pairs", "batched", "gensim")


def run(library, source, sg, workers, epochs, seed):
    """(seconds in train(), raw words per epoch, training loss per prediction or nan)."""
    if library == "gensim":
        from gensim.models import Word2Vec as GWord2Vec

        m = GWord2Vec(sg=sg, workers=workers, seed=seed, epochs=epochs, **PARAMS)
    else:
        m = Word2Vec(sg=sg, workers=workers, seed=seed, epochs=epochs, update=library,
                     **PARAMS)
    m.build_vocab(**source)
    last = {}
    if library != "gensim":
        m.progress = last.update
    t = time.perf_counter()
    m.train(**source, total_examples=m.corpus_count, total_words=m.corpus_total_words,
            epochs=epochs)
    return time.perf_counter() - t, m.corpus_total_words, last.get("loss", float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="wikitext2", choices=sorted(CORPORA))
    ap.add_argument("--models", default="sg,cbow")
    ap.add_argument("--inputs", default="iterable,corpus_file")
    ap.add_argument("--libraries", default=",".join(LIBRARIES))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.workers)
    path = CORPORA[args.corpus]
    sentences = load(path)
    inputs = {"iterable": dict(corpus_iterable=sentences), "corpus_file": dict(corpus_file=path)}
    libraries = args.libraries.split(",")
    bad = [x for x in libraries if x not in LIBRARIES] + [
        x for x in args.inputs.split(",") if x not in inputs]
    if bad:
        ap.error(f"unknown library or input {bad}: libraries {LIBRARIES}, inputs {list(inputs)}")
    speed, rows = {}, []
    for r in range(args.rounds):
        for model in args.models.split(","):
            for inp in args.inputs.split(","):
                for lib in libraries:
                    seconds, raw, loss = run(lib, inputs[inp], int(model == "sg"), args.workers,
                                             args.epochs, seed=1 + r)
                    wps = raw * args.epochs / seconds
                    speed.setdefault((model, inp, lib), []).append(wps)
                    rows.append(dict(
                        case=f"word2vec/{args.corpus}/{model}/{inp}", provider=lib,
                        shape=f"d=100 w=5 k=5 sample=1e-3 epochs={args.epochs} seed={1 + r} "
                              f"workers={args.workers}",
                        metric="words_per_s", value=round(wps)))
                    print(f"round {r} {model:4s} {inp:11s} {lib:8s} {wps:11,.0f} words/s "
                          f"{seconds:6.2f} s  loss {loss:.4f}", flush=True)
    out = write_results("word2vec-update", "cpu", rows)
    print(f"\nwrote {len(rows)} rows to {os.path.relpath(out, ROOT)}\n")
    print("| model | input | order | words/s (median) | / gensim |")
    print("| --- | --- | --- | --- | --- |")
    for (model, inp, lib), values in speed.items():
        base = speed.get((model, inp, "gensim"))
        ratio = f"{statistics.median(values) / statistics.median(base):.2f}×" if base else ""
        print(f"| {model} | {inp} | {lib} | {statistics.median(values):,.0f} | {ratio} |")


if __name__ == "__main__":
    main()
