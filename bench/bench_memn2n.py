"""Memory-network quality and training time; rows go to bench/results/memn2n-<cpu|cuda>.csv.

    python bench/bench_memn2n.py                       # every task, seeds 0 1 2, with and
                                                       # without --supporting-facts
    python bench/bench_memn2n.py --tasks two --distractors 10 --seeds 0
    python bench/bench_memn2n.py --bench heads         # answers over the whole vocabulary:
                                                       # full vs sampled vs nce vs hs

Each run is one call of fastsoftmax.models.memn2n.fit (the run of `fastsoftmax-memn2n
train`) on generated stories: train and validation from one seed's stream, 1000 test stories
from another. Rows (schema: bench/common.py) per run: test accuracy, supporting-fact hit rate
(share of hops whose most attended memory is a supporting fact) and training seconds; per
task and supervision, the median, min and max test accuracy over the seeds. The attention of
the first seed's model on the first test story is drawn to
bench/results/memn2n-<task>[-supervised]-attention.png.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from common import RESULTS, write_results  # noqa: E402

from fastsoftmax.models import memn2n as mn  # noqa: E402


def settings(args, **extra) -> dict:
    base = dict(train_size=args.train_size, test_size=args.test_size, epochs=args.epochs,
                anneal_every=args.anneal_every, hops=args.hops, embed_dim=args.embed_dim,
                linear_start=args.linear_start, distractors=args.distractors,
                device=args.device, progress=args.progress, force=True)
    return dict(base, **extra)


def run_one(args, folder, label, config, out) -> dict:
    print(f"[{label}] {config}", flush=True)
    t0 = time.perf_counter()
    res = mn.fit(dict(config, checkpoint=os.path.join(folder, f"{label}.pt")),
                 log=lambda m: print("  " + m, flush=True) if args.verbose else None)
    train_s = sum(h["seconds"] for h in res["history"])
    row = dict(accuracy=res["test"]["accuracy"], support_hits=res["test"]["support_hits"],
               train_s=train_s, total_s=time.perf_counter() - t0, result=res)
    print(f"  test accuracy {row['accuracy']:.2f}%  support hits {row['support_hits']:.1f}%  "
          f"training {train_s:.0f} s", flush=True)
    return row


def shape_of(config) -> str:
    return (f"train={config['train_size']} test={config['test_size']} "
            f"distractors={config['distractors']} hops={config['hops']} "
            f"D={config['embed_dim']} epochs={config['epochs']}")


def bench_tasks(args, folder, out) -> list:
    summary = []
    for task in args.tasks:
        for supervised in args.supervision:
            sup = supervised == "on"
            provider = f"memn2n {'supporting-facts per hop' if sup else 'answers only'}"
            rows, results = [], []
            for seed in args.seeds:
                config = settings(args, task=task, seed=seed, supporting_facts=sup)
                label = f"{task}-{'sup' if sup else 'plain'}-{seed}"
                r = run_one(args, folder, label, config, out)
                results.append(r)
                shape = shape_of(config) + f" seed={seed}"
                rows += [dict(case=task, provider=provider, shape=shape, metric=k, value=r[k])
                         for k in ("accuracy", "support_hits", "train_s")]
                if seed == args.seeds[0] and args.plot:
                    png = plot_path(args, task, sup)
                    res = r["result"]
                    mn.plot_attention(res["model"], res["data"]["vocab"], res["data"]["answers"],
                                      res["data"]["test"][0], png, overwrite=True,
                                      device=args.device)
                    print(f"  attention plot: {png}", flush=True)
            acc = [r["accuracy"] for r in results]
            shape = shape_of(config) + f" seeds={','.join(map(str, args.seeds))}"
            stats = dict(accuracy_median=statistics.median(acc), accuracy_min=min(acc),
                         accuracy_max=max(acc),
                         support_hits_median=statistics.median(r["support_hits"] for r in results),
                         train_s_median=statistics.median(r["train_s"] for r in results))
            rows += [dict(case=task, provider=provider, shape=shape, metric=k, value=v)
                     for k, v in stats.items()]
            write_results("memn2n", args.device, rows, out)
            summary.append((task, provider, stats))
    return summary


def bench_heads(args, folder, out) -> list:
    """Answers over the whole word vocabulary (the classes every word), one head each."""
    summary = []
    for output in ("full", "sampled", "nce", "hs"):
        rows, results = [], []
        for seed in args.seeds:
            config = settings(args, task=args.tasks[0], seed=seed, answers="vocabulary",
                              output=output, num_sampled=args.num_sampled)
            r = run_one(args, folder, f"heads-{output}-{seed}", config, out)
            results.append(r)
            rows += [dict(case=f"{args.tasks[0]}/vocabulary answers", provider=output,
                          shape=shape_of(config) + f" seed={seed} K={args.num_sampled}",
                          metric=k, value=r[k]) for k in ("accuracy", "train_s")]
        stats = dict(accuracy_median=statistics.median(r["accuracy"] for r in results),
                     train_s_median=statistics.median(r["train_s"] for r in results))
        rows += [dict(case=f"{args.tasks[0]}/vocabulary answers", provider=output,
                      shape=shape_of(config) + f" seeds={','.join(map(str, args.seeds))}",
                      metric=k, value=v) for k, v in stats.items()]
        write_results("memn2n", args.device, rows, out)
        summary.append((args.tasks[0], output, stats))
    return summary


def plot_path(args, task, supervised) -> str:
    return os.path.join(args.results, f"memn2n-{task}{'-supervised' if supervised else ''}"
                                      f"-attention.png")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", choices=("tasks", "heads"), default="tasks")
    p.add_argument("--tasks", nargs="+", choices=mn.TASKS, default=list(mn.TASKS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--supervision", nargs="+", choices=("off", "on"), default=["off", "on"],
                   help="without / with --supporting-facts")
    p.add_argument("--train-size", type=int, default=10000)
    p.add_argument("--test-size", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=mn.TrainConfig().epochs)
    p.add_argument("--anneal-every", type=int, default=mn.TrainConfig().anneal_every)
    p.add_argument("--linear-start", type=int, default=mn.TrainConfig().linear_start)
    p.add_argument("--hops", type=int, default=3)
    p.add_argument("--embed-dim", type=int, default=20)
    p.add_argument("--distractors", type=int, default=mn.TrainConfig().distractors)
    p.add_argument("--num-sampled", type=int, default=8, help="samples of the sampled heads")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads (1 is fastest for these small models on a shared machine)")
    p.add_argument("--results", default=RESULTS, help="folder of the CSV and the plots")
    p.add_argument("--no-plot", dest="plot", action="store_false", help="draw no attention")
    p.add_argument("--force", action="store_true", help="replace existing attention plots")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--verbose", action="store_true", help="print every epoch")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.bench == "tasks" and args.plot and not args.force:
        taken = [plot_path(args, t, s == "on") for t in args.tasks for s in args.supervision
                 if os.path.exists(plot_path(args, t, s == "on"))]
        if taken:
            sys.exit(f"error: {taken[0]} already exists; pass --force to replace it or "
                     f"--no-plot")
    out = os.path.join(args.results, f"memn2n-{torch.device(args.device).type}.csv")
    with tempfile.TemporaryDirectory(prefix="bench_memn2n_") as folder:
        summary = (bench_tasks if args.bench == "tasks" else bench_heads)(args, folder, out)
    print(f"\nrows appended to {out}")
    for task, provider, stats in summary:
        print(f"{task:9s} {provider:28s} " + "  ".join(f"{k} {v:.1f}" for k, v in stats.items()))


if __name__ == "__main__":
    main()
