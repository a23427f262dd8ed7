"""word2vec's words/s at each thread count, ours and gensim, from memory and from corpus_file,
in one run: the measured input of the scaling model in docs/word2vec-scaling.md.

    python bench/word2vec_scaling.py [--models cbow,sg] [--threads 1,2] [--epochs 1]
        [--rounds 3] [--impls ours,ours-batched,gensim]

Settings: gensim's defaults (vector_size 100, window 5, negative 5, sample 1e-3, min_count 5)
on WikiText-2's training text. Every round runs every (implementation, input) once, in turn,
so that load on a shared machine hits all alike; a figure is raw words x epochs / seconds in
train() (build_vocab not counted), beside the CPU seconds the process spent per second of it
(a run starved by other jobs shows fewer than its threads). Rows go to bench/results/word2vec-scaling-cpu.csv with the
round, the load average and, under FASTSOFTMAX_COMMIT, the commit; the medians over rounds
are printed at the end.
"""

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import DATA, write_results  # noqa: E402

CORPUS = os.path.join(DATA, "wikitext-2", "wiki.train.tokens")
PARAMS = dict(vector_size=100, window=5, negative=5, sample=1e-3, min_count=5)
INPUTS = ("memory", "corpus_file")
# Our implementations: the keywords that select each update order.
OURS = {"ours": {"update": "pairs"}, "ours-batched": {"update": "batched"}}
IMPLS = tuple(OURS) + ("gensim",)


def model_class(impl):
    if impl == "gensim":
        from gensim.models import Word2Vec
        return Word2Vec, {}
    from fastsoftmax.models.word2vec import Word2Vec
    return Word2Vec, OURS[impl]


def words_per_s(impl, source, sentences, sg, threads, epochs, seed):
    """(raw words x epochs / seconds in train(), the process's CPU seconds per second of it)
    of one model built from `source`. The second tells a starved run: on a machine to itself
    a run of n busy threads reaches n."""
    cls, extra = model_class(impl)
    m = cls(sg=sg, workers=threads, seed=seed, epochs=epochs, **PARAMS, **extra)
    given = dict(corpus_file=CORPUS) if source == "corpus_file" else dict(
        corpus_iterable=sentences)
    m.build_vocab(**given)
    start, cpu = time.perf_counter(), time.process_time()
    m.train(**given, total_examples=m.corpus_count, total_words=m.corpus_total_words,
            epochs=epochs)
    wall = time.perf_counter() - start
    return m.corpus_total_words * epochs / wall, (time.process_time() - cpu) / wall


def measure(args, sentences):
    """Every round, every case once; returns {(model, threads, impl, input): [words/s]}."""
    import gensim
    import torch

    out = {}
    for model in args.models.split(","):
        for threads in [int(t) for t in args.threads.split(",")]:
            torch.set_num_threads(threads)  # the device column names the thread count
            for r in range(args.rounds):
                rows = []
                for impl in args.impls.split(","):
                    for source in INPUTS:
                        wps, busy = words_per_s(impl, source, sentences, int(model == "sg"),
                                          threads, args.epochs, seed=r + 1)
                        out.setdefault((model, threads, impl, source), []).append(wps)
                        provider = f"gensim {gensim.__version__}" if impl == "gensim" else impl
                        load = os.getloadavg()[0]
                        rows += [dict(case=f"word2vec-scaling/wikitext2/{model}",
                                      provider=provider, shape=f"threads={threads} input={source}"
                                      f" epochs={args.epochs} round={r}", metric=k, value=v)
                                 for k, v in (("words_per_s", round(wps)),
                                              ("cpu_s_per_s", round(busy, 3)),
                                              ("load_avg_1min", f"{load:.1f}"))]
                        print(f"{model} threads={threads} round {r} {impl:13s} {source:12s} "
                              f"{wps:11,.0f} words/s, {busy:.2f} CPU s/s (load {load:.1f})", flush=True)
                write_results("word2vec-scaling", "cpu", rows)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="cbow,sg")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--impls", default=",".join(IMPLS))
    args = ap.parse_args()
    for given, allowed in ((args.models, ("cbow", "sg")), (args.impls, IMPLS)):
        bad = set(given.split(",")) - set(allowed)
        if bad:
            ap.error(f"unknown {sorted(bad)}; choose from {', '.join(allowed)}")
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        ap.error(f"--threads takes counts separated by commas, got {args.threads!r}")
    if min(threads) < 1 or args.epochs < 1 or args.rounds < 1:
        ap.error("--threads, --epochs and --rounds must be at least 1")
    if not os.path.exists(CORPUS):
        sys.exit(f"no corpus at {CORPUS}: see docs/data.md")
    from gensim.models.word2vec import LineSentence

    out = measure(args, list(LineSentence(CORPUS)))
    print(f"\nmedians over {args.rounds} rounds, words/s")
    for (model, threads, impl, source), runs in out.items():
        print(f"{model:4s} threads={threads:<3d} {impl:13s} {source:12s} "
              f"{statistics.median(runs):11,.0f}")


if __name__ == "__main__":
    main()
