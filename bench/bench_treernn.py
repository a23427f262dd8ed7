"""Tree-RNN against the sequential LSTM baseline on generated arithmetic expressions (value
mod 10 at the root); rows go to bench/results/treernn-<cpu|cuda>.csv and a summary table
(mean ± sample standard deviation over the seeds) to bench/results/treernn-<cpu|cuda>.md.

    python bench/bench_treernn.py [--models tree lstm] [--supervise nodes root]
        [--seeds 1 2 3] [--train-size 5000] [--max-depth 4] [--epochs 8]

Each run is one fastsoftmax.models.treernn.fit (the run of `fastsoftmax-treernn train`):
H = 64, Adam lr 3e-3, batch 64, the 'full' head. The seed draws the expressions (so the
split changes with it too) and the initialisation. Test accuracy is the root's value on
the run's distinct test expressions (chance 10%; always predicting the most frequent value
scores the share of that value, printed as `majority`).

`--speed N` instead times the forward pass of an untrained TreeRNN over 512 expressions,
level by level (and the Python collate that builds its batch) against node by node
(TreeRNN.encode_tree), N rounds interleaved, and prints the medians.
"""

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from common import mean_sd, write_results  # noqa: E402

from fastsoftmax.models import treernn as tr  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["tree", "lstm"], choices=tr.MODELS)
    p.add_argument("--supervise", nargs="+", default=["nodes", "root"], choices=tr.SUPERVISION)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--train-size", type=int, default=5000)
    p.add_argument("--test-size", type=int, default=1000)
    p.add_argument("--max-depth", type=int, default=4)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--results", default=RESULTS)
    p.add_argument("--tag", default="", help="suffix of the summary file (parallel runs)")
    p.add_argument("--speed", type=int, default=0, metavar="ROUNDS")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.speed:
        return speed(args)
    folder = tempfile.mkdtemp(prefix="bench_treernn_")
    csv = os.path.join(args.results, f"treernn-cpu{args.tag}.csv")
    summary = collections.defaultdict(list)
    for seed in args.seeds:
        for supervise in args.supervise:
            for model in args.models:
                name = f"{model}, supervise {supervise}"
                ckpt = os.path.join(folder, f"{model}-{supervise}-{seed}.pt")
                res = tr.fit(dict(model=model, supervise=supervise, seed=seed,
                                  train_size=args.train_size, test_size=args.test_size,
                                  max_depth=args.max_depth, epochs=args.epochs,
                                  progress=False, force=True, device="cpu", checkpoint=ckpt),
                             log=lambda m: None)
                test = res["data"]["test"]
                counts = collections.Counter(t.value for t in test)
                majority = 100.0 * max(counts.values()) / len(test)
                train_s = sum(h["seconds"] for h in res["history"])
                acc = res["test"]["accuracy"]
                print(f"{name:24s} seed {seed}: test accuracy {acc:.2f}% (majority "
                      f"{majority:.1f}%), valid {res['history'][-1]['valid_accuracy']:.1f}%, "
                      f"{train_s:.1f} s", flush=True)
                summary[name].append((acc, majority, train_s))
                shape = (f"train={len(res['data']['train'])} test={len(test)} depth=1-"
                         f"{args.max_depth} epochs={args.epochs} seed={seed}")
                write_results("treernn", "cpu", [
                    dict(case="arithmetic", provider=name, shape=shape, metric=k,
                         value=round(v, 3))
                    for k, v in (("test_accuracy", acc), ("majority", majority),
                                 ("train_s", train_s))], csv)

    lines = ["| model | test accuracy % | majority class % | train s |",
             "| --- | --- | --- | --- |"]
    for name, rows in summary.items():
        acc, majority, seconds = zip(*rows)
        lines.append(f"| {name} | {mean_sd(acc)} | {mean_sd(majority, '{:.1f}')} | "
                     f"{mean_sd(seconds, '{:.0f}')} |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.results, f"treernn-cpu{args.tag}.md"), "w") as f:
        f.write(f"seeds {args.seeds}, {args.train_size} expressions of depth 1-{args.max_depth} "
                f"(10% for validation), {args.test_size} test, {args.epochs} epochs, mean ± "
                f"sample sd; torch {torch.__version__}, {args.threads} thread(s)\n\n{table}\n")


@torch.no_grad()
def speed(args):
    trees = tr.generate(512, max_depth=args.max_depth, seed=0)
    model = tr.TreeRNN(64).eval()
    batch = tr.collate(trees)
    ways = {"collate (build the batch)": lambda: tr.collate(trees),
            "level by level (forward)": lambda: model.features(batch),
            "node by node": lambda: torch.stack([model.encode_tree(t) for t in trees])}
    times = {name: [] for name in ways}
    for r in range(args.speed + 1):  # one warm-up round
        for name, run in ways.items():
            start = time.perf_counter()
            run()
            if r:
                times[name].append(time.perf_counter() - start)
    nodes = sum((len(t.tokens()) - 1) // 2 + 1 for t in trees)
    for name, t in times.items():
        print(f"{name}: {1e3 * statistics.median(t):.1f} ms for 512 trees ({nodes} nodes), "
              f"median of {args.speed}")


if __name__ == "__main__":
    main()
