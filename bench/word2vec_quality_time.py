"""word2vec quality per second: SimLex-999 and WS-353 against wall-clock seconds (build_vocab
and training) for fastsoftmax (corpus_file) and gensim (iterable and corpus_file) at 1 to 10
epochs, on one figure, and the check of the claim "for every gensim point, some fastsoftmax
point reaches at least its SimLex and its WS in at most 0.6x its time".

    python bench/word2vec_quality_time.py [--setting cbow-neg] [--epochs 1-10] [--seeds 1]
        [--workers 2]
    python bench/word2vec_quality_time.py --plot-only     # figure and check from the CSV

Training and scoring are bench/word2vec_parity.py's (same corpus, settings and scorers).
Each (implementation, epochs) point is the mean over the seeds; the implementations take
turns at each epoch count, so machine load hits all alike. Rows go to
bench/results/word2vec-quality-time-cpu.csv, the figure to
bench/results/word2vec-quality-time-cpu.png.
"""

import argparse
import csv
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import word2vec_parity as parity  # noqa: E402
from common import RESULTS, write_results  # noqa: E402

IMPLS = ("ours", "gensim-iterable", "gensim-corpus_file")
CSV = os.path.join(RESULTS, "word2vec-quality-time-cpu.csv")
PNG = os.path.join(RESULTS, "word2vec-quality-time-cpu.png")
CLAIM = 0.6


def epoch_range(text: str) -> list:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def run(args):
    import gensim
    from gensim.models.word2vec import LineSentence

    sentences = list(LineSentence(parity.CORPUS))
    for epochs in epoch_range(args.epochs):
        for seed in range(1, args.seeds + 1):
            for impl in IMPLS:
                kv, seconds = parity.train(impl, args.setting, seed, epochs, args.workers,
                                           sentences)
                s = parity.scores(kv)
                provider = impl if impl == "ours" else f"{impl} {gensim.__version__}"
                write_results("word2vec-quality-time", "cpu", [
                    dict(case=f"word2vec-quality-time/wikitext2/{args.setting}",
                         provider=provider, shape=f"epochs={epochs} workers={args.workers} "
                         f"seed={seed}", metric=k, value=round(v, 5))
                    for k, v in dict(s, seconds=seconds).items()])
                print(f"{epochs:2d} epochs seed {seed} {impl:18s} {seconds:6.1f} s  SimLex "
                      f"{s['simlex999']:.4f}  WS {s['ws353']:.4f}", flush=True)


def points(path=CSV, setting=None):
    """{impl: [(epochs, seconds, simlex, ws)]}, means over seeds (the newest row of a run)."""
    runs = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if setting and not row["case"].endswith("/" + setting):
                continue
            impl = row["provider"].split(" ")[0]
            shape = dict(part.split("=") for part in row["shape"].split())
            key = (impl, int(shape["epochs"]), int(shape["seed"]))
            runs.setdefault(key, {})[row["metric"]] = float(row["value"])
    out = {}
    for impl, epochs in sorted({(k[0], k[1]) for k in runs}):
        rs = [v for k, v in runs.items() if k[:2] == (impl, epochs)]
        out.setdefault(impl, []).append((epochs, *(statistics.mean(r[m] for r in rs)
                                                   for m in ("seconds", "simlex999", "ws353"))))
    return out


def check(pts) -> list:
    """Per gensim point: the fastest fastsoftmax point at least as good on both scores, and
    the ratio of its seconds to gensim's (None: no fastsoftmax point is as good)."""
    lines = []
    for impl in IMPLS[1:]:
        for epochs, seconds, simlex, ws in pts.get(impl, []):
            good = [p for p in pts.get("ours", []) if p[2] >= simlex and p[3] >= ws]
            best = min(good, key=lambda p: p[1]) if good else None
            ratio = best[1] / seconds if best else None
            verdict = ("no fastsoftmax point is as good" if best is None else
                       f"ours at {best[0]} epochs: {best[1]:.1f} s = {ratio:.2f}x "
                       f"({'meets' if ratio <= CLAIM else 'misses'} {CLAIM}x)")
            lines.append((impl, epochs, seconds, simlex, ws, ratio, verdict))
    return lines


def plot(pts, setting):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, col, name in ((axes[0], 2, "SimLex-999 Spearman"), (axes[1], 3, "WS-353 Spearman")):
        for impl, marker in zip(IMPLS, "os^"):
            p = pts.get(impl, [])
            ax.plot([q[1] for q in p], [q[col] for q in p], marker=marker, label=impl)
            for q in p:
                ax.annotate(str(q[0]), (q[1], q[col]), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
        ax.set_xlabel("seconds (build_vocab + train), 2 CPU threads")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"word2vec {setting} on WikiText-2: quality against time (labels: epochs)")
    fig.tight_layout()
    fig.savefig(PNG, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setting", default="cbow-neg", choices=sorted(parity.SETTINGS))
    ap.add_argument("--epochs", default="1-10", help="a count or a range such as 1-10")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--plot-only", action="store_true")
    args = ap.parse_args()
    if not args.plot_only:
        run(args)
    if not os.path.exists(CSV):
        sys.exit(f"no results yet: {CSV} does not exist")
    pts = points(setting=args.setting)
    plot(pts, args.setting)
    print(f"figure: {os.path.relpath(PNG, ROOT)}\n")
    print("| gensim | epochs | seconds | SimLex | WS | fastest fastsoftmax point as good on both |")
    print("| --- | --- | --- | --- | --- | --- |")
    rows = check(pts)
    for impl, epochs, seconds, simlex, ws, _, verdict in rows:
        print(f"| {impl} | {epochs} | {seconds:.1f} | {simlex:.4f} | {ws:.4f} | {verdict} |")
    worst = [r[5] for r in rows]
    if worst:
        met = all(r is not None and r <= CLAIM for r in worst)
        print(f"\nclaim (every gensim point matched by ours in <= {CLAIM}x its time): "
              f"{'holds' if met else 'does not hold'}")


if __name__ == "__main__":
    main()
