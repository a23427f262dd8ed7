"""word2vec's input modes side by side in one run: words/s of fastsoftmax from memory (a list
of token lists), from corpus_file (the native reader) and from a LineSentence it reads in
Python (the path every non-UTF-8 file takes), against gensim iterable and gensim
corpus_file, at each worker count.

    python bench/bench_word2vec_modes.py [--corpus wikitext2] [--models cbow,sg]
        [--workers 1,2] [--epochs 3] [--rounds 3]

Settings: gensim's defaults (vector_size 100, window 5, negative 5, sample 1e-3, min_count 5).
Every round runs every mode once, in turn, so load on a shared machine hits all alike;
reported are the medians over rounds of raw words (OOV included) x epochs / seconds in
train(), and of build_vocab's seconds, with each mode's ratio to gensim corpus_file. Rows go
to bench/results/word2vec-modes-cpu.csv (bench/common.py's schema).
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
from common import write_results  # noqa: E402

from fastsoftmax.models.word2vec import LineSentence, Word2Vec  # noqa: E402

PARAMS = dict(vector_size=100, window=5, negative=5, sample=1e-3, min_count=5)
MODES = ("ours-memory", "ours-corpus_file", "ours-python-reader", "gensim-iterable",
         "gensim-corpus_file")


def run(mode, path, sentences, sg, workers, epochs, seed):
    """(seconds in build_vocab, seconds in train(), raw words per epoch)."""
    if mode.startswith("gensim"):
        from gensim.models import Word2Vec as Model
    else:
        Model = Word2Vec
    m = Model(sg=sg, workers=workers, seed=seed, epochs=epochs, **PARAMS)
    if mode.endswith("corpus_file"):
        source = dict(corpus_file=path)
    elif mode == "ours-python-reader":  # errors="replace": the Python reader, same words
        source = dict(corpus_iterable=LineSentence(path, errors="replace"))
    else:
        source = dict(corpus_iterable=sentences)
    t = time.perf_counter()
    m.build_vocab(**source)
    vocab_seconds = time.perf_counter() - t
    t = time.perf_counter()
    m.train(**source, total_examples=m.corpus_count, total_words=m.corpus_total_words,
            epochs=epochs)
    return vocab_seconds, time.perf_counter() - t, m.corpus_total_words


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="wikitext2", choices=sorted(CORPORA))
    ap.add_argument("--models", default="cbow,sg")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    modes = args.modes.split(",")
    unknown = set(modes) - set(MODES)
    if unknown:
        ap.error(f"unknown modes {sorted(unknown)}; choose from {', '.join(MODES)}")
    import gensim

    path = CORPORA[args.corpus]
    sentences = list(LineSentence(path))
    rows, table = [], []
    for model in args.models.split(","):
        sg = int(model == "sg")
        for workers in [int(w) for w in args.workers.split(",")]:
            times = {mode: [] for mode in modes}
            for r in range(args.rounds):
                for mode in modes:
                    vocab_s, train_s, raw = run(mode, path, sentences, sg, workers, args.epochs,
                                                seed=r + 1)
                    wps = raw * args.epochs / train_s
                    times[mode].append((wps, vocab_s))
                    load = f"{os.getloadavg()[0]:.1f}"
                    provider = mode if mode.startswith("ours") else f"{mode} {gensim.__version__}"
                    rows += [dict(case=f"word2vec-modes/{args.corpus}/{model}", provider=provider,
                                  shape=f"workers={workers} epochs={args.epochs} round={r}",
                                  metric=k, value=v)
                             for k, v in (("words_per_s", round(wps)),
                                          ("build_vocab_s", round(vocab_s, 2)),
                                          ("load_avg_1min", load))]
                    print(f"{model} workers={workers} round {r} {mode:20s} {wps:11,.0f} words/s "
                          f"train {train_s:5.1f} s vocab {vocab_s:4.1f} s (load {load})",
                          flush=True)
            base = statistics.median(w for w, _ in times.get("gensim-corpus_file", [(1, 0)]))
            for mode in modes:
                wps = statistics.median(w for w, _ in times[mode])
                vocab = statistics.median(v for _, v in times[mode])
                table.append((model, workers, mode, wps, wps / base, vocab))
    out = write_results("word2vec-modes", "cpu", rows)
    print(f"\nwrote {len(rows)} rows to {os.path.relpath(out, ROOT)}\n")
    print(f"{args.corpus}, {args.epochs} epochs, median of {args.rounds} rounds\n")
    print("| model | workers | mode | words/s | vs gensim corpus_file | build_vocab s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model, workers, mode, wps, ratio, vocab in table:
        print(f"| {model} | {workers} | {mode} | {wps:,.0f} | {ratio:.2f}× | {vocab:.1f} |")


if __name__ == "__main__":
    main()
