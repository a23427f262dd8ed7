"""What a lockstep round of word2vec touches, for the multi-GPU estimate in docs/scaling.md.

    python bench/word2vec_round_traffic.py [--corpus PATH] [--round-size 4096] [--rounds 40]

Simulates the rounds of a WikiText-2 epoch with gensim's defaults (min_count 5, sample 1e-3,
window 5 shrunk uniformly, negative 5 from unigram^0.75): subsampling, windows and negatives
are drawn with numpy, with the trainer's distributions but not its Philox streams, which
changes no count beyond noise. Prints, per model, the mean distinct rows of syn0 and syn1neg
a round updates, and the bytes an all-reduce of their deltas and bounds would move at
d = 100 in float32 (the dense alternative: every row of both tables). Rows go to
bench/results/word2vec-round-traffic-cpu.csv (docs/scaling.md renders them).
"""

import argparse
import collections
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
from common import DATA, write_results  # noqa: E402


def kept_stream(path, rng):
    """(kept ids, their sentence, noise distribution, V, raw words) after min_count 5 and
    sample 1e-3."""
    with open(path, encoding="utf8") as f:
        sentences = [line.split() for line in f if line.strip()]
    counts = collections.Counter(w for s in sentences for w in s)
    vocab = {w: i for i, (w, c) in enumerate(counts.most_common()) if c >= 5}
    freq = np.array([counts[w] for w in vocab], dtype=np.float64)
    share = freq / freq.sum()
    keep = np.minimum(1.0, (np.sqrt(share / 1e-3) + 1) * 1e-3 / share)
    ids, sentence = [], []
    for k, s in enumerate(sentences):
        kept = [vocab[w] for w in s if w in vocab and rng.random() < keep[vocab[w]]]
        ids += kept
        sentence += [k] * len(kept)
    noise = freq ** 0.75
    raw = sum(len(s) for s in sentences)
    return np.array(ids), np.array(sentence), noise / noise.sum(), len(vocab), raw


def touched(ids, sentence, noise, V, first, R, sg, rng, window=5, negative=5):
    """Distinct (syn0, syn1neg) rows the round of centres [first, first + R) updates."""
    inputs, outputs = set(), set()
    for c in range(first, min(first + R, len(ids))):
        w = int(rng.integers(1, window + 1))
        context = [j for j in range(c - w, c + w + 1)
                   if j != c and 0 <= j < len(ids) and sentence[j] == sentence[c]]
        if not context:
            continue
        inputs.update(ids[context].tolist())
        outputs.add(int(ids[c]))
        draws = negative * (len(context) if sg else 1)
        outputs.update(rng.choice(V, draws, p=noise).tolist())
    return len(inputs), len(outputs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=os.path.join(DATA, "wikitext-2", "wiki.train.tokens"))
    ap.add_argument("--round-size", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    ids, sentence, noise, V, raw = kept_stream(args.corpus, rng)
    row_bytes = 100 * 4 + 4  # a delta row and its bound
    print(f"V = {V}, kept centres per epoch {len(ids):,} ({len(ids) // args.round_size:,} "
          f"rounds of {args.round_size}); dense deltas {2 * V * row_bytes / 1e6:.1f} MB")
    rows = []
    for sg, name in ((1, "skip-gram"), (0, "CBOW")):
        counts = [touched(ids, sentence, noise, V, r * args.round_size, args.round_size, sg,
                          rng) for r in range(args.rounds)]
        inputs, outputs = np.mean(counts, axis=0)
        print(f"{name}: {inputs:,.0f} syn0 and {outputs:,.0f} syn1neg rows a round, "
              f"{(inputs + outputs) * row_bytes / 1e6:.1f} MB of deltas")
        shape = f"R={args.round_size} V={V} D=100 rounds={args.rounds}"
        for metric, v in (("syn0_rows", inputs), ("syn1neg_rows", outputs),
                          ("touched_delta_bytes", (inputs + outputs) * row_bytes),
                          ("dense_delta_bytes", 2 * V * row_bytes),
                          ("kept_centres_per_epoch", len(ids)), ("raw_words_per_epoch", raw)):
            rows.append(dict(case=f"word2vec-rounds/wikitext2/{name}", provider="simulated",
                             shape=shape, metric=metric, value=round(float(v), 1)))
    write_results("word2vec-round-traffic", "cpu", rows)


if __name__ == "__main__":
    main()
