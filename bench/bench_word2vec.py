"""word2vec side by side with gensim: same corpus, parameters and threads, in one run.

    python bench/bench_word2vec.py [--threads 2] [--corpora wikitext2,ptb] [--models sg,cbow]

For each corpus (WikiText-2 train, PTB train) and model (skip-gram, CBOW): 5 epochs,
vector_size 100, window 5, negative 5, sample 1e-3, min_count 5, alpha 0.025 -> 1e-4 (gensim's
defaults). Both libraries get the same in-memory list of token lists. Reported:
  * words/s: raw corpus words (OOV included, as gensim counts them) x epochs / seconds spent
    in train() (vocabulary building excluded for both);
  * WordSim-353 Spearman (and Pearson, OOV %) of the trained vectors, both scored with the
    same function (fastsoftmax's evaluate_word_pairs, which tests hold equal to gensim's).
Rows go to bench/results/word2vec-<device>.csv with the command line and the load average
(the machine may be shared: compare the two columns of one run, not runs).
"""

import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import append_rows  # noqa: E402

from fastsoftmax.models import KeyedVectors, Word2Vec  # noqa: E402

DATA = os.environ.get(
    "FASTSOFTMAX_DATA",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"),
)
CORPORA = {
    "wikitext2": os.path.join(DATA, "wikitext-2", "wiki.train.tokens"),
    "ptb": os.path.join(DATA, "ptb", "ptb.train.txt"),
}
WS353 = os.path.join(DATA, "word-similarity", "wordsim353.tsv")
PARAMS = dict(vector_size=100, window=5, negative=5, sample=1e-3, min_count=5, epochs=5,
              alpha=0.025, min_alpha=1e-4)


def load(path):
    with open(path, encoding="utf8") as f:
        return [line.split() for line in f if line.strip()]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def run_ours(sentences, sg, threads, device, seed):
    m = Word2Vec(sg=sg, workers=threads, device=device, seed=seed, **PARAMS)
    m.build_vocab(sentences)
    t = time.perf_counter()
    m.train(sentences)
    seconds = time.perf_counter() - t
    return m.wv, m.corpus_total_words, seconds


def run_gensim(sentences, sg, threads, seed):
    from gensim.models import Word2Vec as GWord2Vec

    p = dict(PARAMS)
    m = GWord2Vec(sg=sg, workers=threads, seed=seed, **p)
    m.build_vocab(sentences)
    t = time.perf_counter()
    m.train(sentences, total_examples=m.corpus_count, epochs=p["epochs"])
    seconds = time.perf_counter() - t
    kv = KeyedVectors(p["vector_size"], 0)
    kv.index_to_key = list(m.wv.index_to_key)
    kv.key_to_index = dict(m.wv.key_to_index)
    kv.vectors = np.array(m.wv.vectors, dtype=np.float32)
    return kv, m.corpus_total_words, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--corpora", default="wikitext2,ptb")
    ap.add_argument("--models", default="sg,cbow")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-gensim", action="store_true")
    args = ap.parse_args()
    import torch

    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else cpu_name()
    tag = "cuda" if args.device.startswith("cuda") else "cpu"
    out = os.path.join(ROOT, "bench", "results", f"word2vec-{tag}.csv")
    command = "python " + " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])
    have_gensim = False
    if not args.no_gensim:
        try:
            import gensim

            have_gensim = True
            gensim_version = gensim.__version__
        except ImportError:
            print("gensim is not installed: fastsoftmax only (pip install gensim)")
    rows = []
    for corpus in args.corpora.split(","):
        sentences = load(CORPORA[corpus])
        for model in args.models.split(","):
            sg = 1 if model == "sg" else 0
            impls = ["fastsoftmax"] + ([f"gensim-{gensim_version}"] if have_gensim else [])
            for impl in impls:
                load_before = os.getloadavg()[0]
                if impl == "fastsoftmax":
                    kv, raw, seconds = run_ours(sentences, sg, args.threads, args.device,
                                                args.seed)
                else:
                    kv, raw, seconds = run_gensim(sentences, sg, args.threads, args.seed)
                assert np.isfinite(kv.vectors).all(), f"{impl} produced non-finite vectors"
                pearson, spearman, oov = kv.evaluate_word_pairs(WS353)
                wps = raw * PARAMS["epochs"] / seconds
                row = dict(
                    date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    device=device_name, threads=args.threads, corpus=corpus, model=model,
                    impl=impl, words_per_s=round(wps), train_seconds=round(seconds, 2),
                    ws353_spearman=round(spearman, 4), ws353_pearson=round(pearson, 4),
                    oov_percent=round(oov, 1), vocab=len(kv), corpus_words=raw,
                    load_avg_1min=f"{load_before:.1f}/{os.getloadavg()[0]:.1f}",
                    command=command,
                )
                rows.append(row)
                print(f"{corpus:10s} {model:4s} {impl:14s} {wps:11,.0f} words/s  "
                      f"{seconds:7.1f} s  WS-353 spearman {spearman:.4f}  "
                      f"(load {row['load_avg_1min']})", flush=True)
    append_rows(out, rows)
    print(f"wrote {len(rows)} rows to {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
