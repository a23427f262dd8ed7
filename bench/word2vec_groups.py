"""How many centres may share one set of negatives (update="batched"'s group, pSGNScc's
context combining): per model, word2vec.c's order and groups of G centres, trained side by side
on WikiText-2 with paired seeds, their quality (WS-353, SimLex-999, analogies, as
bench/word2vec_parity.py scores them) and their words/s in the same run.

    python bench/word2vec_groups.py [--models sg,cbow] [--groups 1,2,4] [--seeds 8]
        [--epochs 3] [--workers 2]

The group is fixed per model in fastsoftmax/models/word2vec/training.py (BATCH_GROUP: 1 for
skip-gram, 4 for CBOW's update="batched"); this script sets it for each run. Rows go to
bench/results/word2vec-groups-cpu.csv; docs/word2vec-quality.md renders them
(bench/tables/word2vec_update.py).
"""

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import write_results  # noqa: E402
from word2vec_parity import CORPUS, PARAMS, scores  # noqa: E402


def train(model: str, variant: str, seed: int, epochs: int, workers: int):
    """(KeyedVectors, words/s of train()) of one run: variant "pairs" or "g<G>"."""
    from gensim.models import KeyedVectors

    from fastsoftmax.models.word2vec import Word2Vec, training

    sg = int(model == "sg")
    update = "pairs" if variant == "pairs" else "batched"
    if update == "batched":
        training.BATCH_GROUP[sg] = int(variant[1:])
    m = Word2Vec(sg=sg, negative=5, seed=seed, workers=workers, epochs=epochs,
                 update=update, **PARAMS)
    m.build_vocab(corpus_file=CORPUS)
    start = time.perf_counter()
    m.train(corpus_file=CORPUS, total_examples=m.corpus_count,
            total_words=m.corpus_total_words, epochs=epochs)
    speed = m.corpus_total_words * epochs / (time.perf_counter() - start)
    kv = KeyedVectors(PARAMS["vector_size"])
    kv.add_vectors(list(m.wv.index_to_key), np.asarray(m.wv.vectors, dtype=np.float32))
    return kv, speed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="sg,cbow")
    ap.add_argument("--groups", default="1,2,4")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    models = args.models.split(",")
    if set(models) - {"sg", "cbow"}:
        ap.error(f"--models takes sg and cbow, got {args.models}")
    variants = ["pairs"] + [f"g{int(g)}" for g in args.groups.split(",")]
    import torch

    torch.set_num_threads(args.workers)
    for seed in range(1, args.seeds + 1):
        rows = []
        for model in models:
            for variant in variants:  # in turn, so load on the machine hits all alike
                kv, speed = train(model, variant, seed, args.epochs, args.workers)
                found = dict(scores(kv), words_per_s=speed)
                shape = f"epochs={args.epochs} workers={args.workers} seed={seed}"
                rows += [dict(case=f"word2vec/wikitext2/{model}", provider=variant, shape=shape,
                              metric=k, value=round(v, 6 if k != "words_per_s" else None))
                         for k, v in found.items()]
                print(f"seed {seed} {model:4s} {variant:5s} " + " ".join(
                    f"{k} {v:.4f}" for k, v in found.items() if k != "words_per_s")
                    + f" {speed:,.0f} words/s", flush=True)
        write_results("word2vec-groups", "cpu", rows)  # per seed: a cut-short run keeps them


if __name__ == "__main__":
    main()
