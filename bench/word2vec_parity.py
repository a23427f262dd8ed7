"""word2vec quality against gensim, with statistics: per setting and seed, fastsoftmax and
gensim (iterable and corpus_file) trained on the same corpus, scored by the same functions
(gensim's KeyedVectors: WS-353 and SimLex-999 Spearman, Google analogies 3CosAdd over the 30k
most frequent words), and the paired differences ours - gensim reported as mean ± 95% CI.

    python bench/word2vec_parity.py [--settings cbow-neg,sg-neg,cbow-hs,sg-hs] [--seeds 8]
        [--first-seed 1] [--epochs 5] [--workers 2]
        [--impls ours,ours-batched,ours-cf-decay,gensim-iterable,gensim-corpus_file]
    python bench/word2vec_parity.py --summarize      # the table of what the CSV holds

Implementations:
  ours                fastsoftmax in word2vec.c's order (update="pairs"), corpus_file=, its
                      global linear decay
  ours-batched        the same with shared negatives (update="batched")
  ours-cf-decay       fastsoftmax trained one epoch per train() call with the rates gensim's
                      corpus_file workers reach: epoch e decays over progress e/E .. (e + 1/W)/E
  gensim-iterable     gensim, the corpus as an in-memory list of LineSentence's sentences
  gensim-corpus_file  gensim, corpus_file=
Every run appends its rows to bench/results/word2vec-parity-cpu.csv as it ends, so a run cut
short keeps what it measured; --summarize prints docs/word2vec.md's two tables from them
(the newest row of each seed wins). Rows are told apart by setting, epochs, workers and seed:
only the same (epochs, workers) are paired.
"""

import argparse
import fcntl
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import DATA, RESULTS, write_results  # noqa: E402

CORPUS = os.path.join(DATA, "wikitext-2", "wiki.train.tokens")
PARAMS = dict(vector_size=100, window=5, sample=1e-3, min_count=5, alpha=0.025, min_alpha=1e-4)
SETTINGS = {"cbow-neg": (0, 0, 5), "sg-neg": (1, 0, 5), "cbow-hs": (0, 1, 0), "sg-hs": (1, 1, 0)}
# Our update orders: the keywords that select each (ours-cf-decay trains as ours does).
OURS = {"ours": {"update": "pairs"}, "ours-batched": {"update": "batched"}}
IMPLS = tuple(OURS) + ("ours-cf-decay", "gensim-iterable", "gensim-corpus_file")
METRICS = ("ws353", "simlex999", "analogy")
CSV = os.path.join(RESULTS, "word2vec-parity-cpu.csv")


def train(impl, setting, seed, epochs, workers, sentences):
    """(word vectors as gensim KeyedVectors, seconds of build_vocab + train)."""
    from gensim.models import KeyedVectors as GKV, Word2Vec as GW2V

    from fastsoftmax.models.word2vec import Word2Vec

    sg, hs, negative = SETTINGS[setting]
    kw = dict(PARAMS, sg=sg, hs=hs, negative=negative, seed=seed, workers=workers,
              epochs=epochs)
    start = time.perf_counter()
    if impl in OURS:
        m = Word2Vec(corpus_file=CORPUS, **kw, **OURS[impl])
    elif impl == "ours-cf-decay":
        m = Word2Vec(**kw, **OURS["ours"])
        m.build_vocab(corpus_file=CORPUS)
        a, b = PARAMS["alpha"], PARAMS["min_alpha"]
        for e in range(epochs):  # gensim corpus_file: each worker's progress is 1/W of it
            rate = [a - (a - b) * (e + f) / epochs for f in (0.0, 1.0 / workers)]
            m.train(corpus_file=CORPUS, total_examples=m.corpus_count, epochs=1,
                    start_alpha=rate[0], end_alpha=rate[1])
    elif impl == "gensim-iterable":
        m = GW2V(sentences, **kw)
    else:
        m = GW2V(corpus_file=CORPUS, **kw)
    seconds = time.perf_counter() - start
    kv = GKV(PARAMS["vector_size"])
    kv.add_vectors(list(m.wv.index_to_key), np.asarray(m.wv.vectors, dtype=np.float32))
    return kv, seconds


def scores(kv):
    from gensim.test.utils import datapath

    ws = kv.evaluate_word_pairs(datapath("wordsim353.tsv"))[1][0]
    simlex = kv.evaluate_word_pairs(datapath("simlex999.txt"))[1][0]
    analogy = kv.evaluate_word_analogies(datapath("questions-words.txt"), restrict_vocab=30000)[0]
    return dict(ws353=ws, simlex999=simlex, analogy=analogy)


def run(args):
    import gensim
    from gensim.models.word2vec import LineSentence

    sentences = list(LineSentence(CORPUS))
    for setting in args.settings.split(","):
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for impl in args.impls.split(","):
                kv, seconds = train(impl, setting, seed, args.epochs, args.workers, sentences)
                s = scores(kv)
                provider = impl if impl.startswith("ours") else f"{impl} {gensim.__version__}"
                shape = f"epochs={args.epochs} workers={args.workers} seed={seed}"
                rows = [dict(case=f"word2vec-parity/wikitext2/{setting}", provider=provider,
                             shape=shape, metric=k, value=round(v, 5))
                        for k, v in dict(s, seconds=seconds).items()]
                # Two runs side by side append to one file: one at a time.
                with open(os.path.join(tempfile.gettempdir(), "word2vec-parity.lock"), "w") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                    write_results("word2vec-parity", "cpu", rows)
                print(f"{setting} seed {seed} {impl:18s} WS {s['ws353']:.4f} SimLex "
                      f"{s['simlex999']:.4f} analogy {s['analogy']:.4f} {seconds:6.1f} s "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)


def summarize():
    """The two tables docs/word2vec.md shows (the paired differences, the means), rendered
    from the CSV by the same builders as the page (bench/tables/word2vec.py)."""
    from tables import TABLES

    return "\n".join(TABLES["word2vec-parity-differences"]() + [""]
                     + TABLES["word2vec-parity-means"]()) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--first-seed", type=int, default=1,
                    help="seeds first-seed .. first-seed + seeds - 1 (to split a run in two)")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--summarize", action="store_true", help="print the table of the CSV")
    args = ap.parse_args()
    if not args.summarize:
        if min(args.seeds, args.first_seed, args.epochs, args.workers) < 1:
            ap.error("--seeds, --first-seed, --epochs and --workers must be at least 1")
        for name, allowed in ((args.settings, SETTINGS), (args.impls, IMPLS)):
            bad = set(name.split(",")) - set(allowed)
            if bad:
                ap.error(f"unknown {sorted(bad)}; choose from {', '.join(allowed)}")
        run(args)
    if not os.path.exists(CSV):
        sys.exit(f"no results yet: {CSV} does not exist")
    print(summarize())


if __name__ == "__main__":
    main()
