"""Local (Luong's local-m, local-p) against global attention on the date task; rows go to
bench/results/local-attention-<cpu|cuda>.csv and a summary table (mean ± sample standard
deviation over the seeds) to bench/results/local-attention-<cpu|cuda>.md.

    python bench/bench_local_attention.py [--limit 10000] [--epochs 3] [--seeds 1 2 3]
        [--windows 10 3]

The recipe is bench/bench_hard_attention.py's: a bidirectional LSTM encoder, the general
score, H = 128, batch 64, lr 1e-3, on the first `limit` pairs of date.txt with a fixed held-out
10% (split seed 1984); only the training seed changes between runs. Exact match is greedy
decoding of every held-out pair. ex/s is the median training throughput over the epochs
(on a shared machine it follows the load more than the model); `--speed` instead times
forward+backward steps of freshly built models on one 64-pair batch, the configurations
interleaved round by round, and writes the median ms per step and its ratio to global.
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

from common import DATA, mean_sd, write_results  # noqa: E402

from fastsoftmax.models import seq2seq as s2s  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=10000, help="first N pairs of date.txt")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="training seeds")
    p.add_argument("--windows", type=int, nargs="+", default=[10, 3], help="local windows D")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--results", default=RESULTS)
    p.add_argument("--speed", type=int, default=0, metavar="ROUNDS",
                   help="only time ROUNDS interleaved steps per configuration")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    data = s2s.load_task(os.path.join(DATA, "dlfs2-toy-seq2seq", "date.txt"), "chars",
                         valid_fraction=0.1, seed=1984, limit=args.limit)
    base = dict(attention="general", bidirectional=True, embed_dim=32, hidden_size=128,
                batch_size=64, lr=1e-3, epochs=args.epochs, device=args.device,
                progress=False, force=True)
    configs = [("global", {})] + [
        (f"{a} D={d}", dict(alignment=a, window=d))
        for d in args.windows for a in ("local-m", "local-p")]
    kind = torch.device(args.device).type
    if args.speed:
        return step_speed(args, data, configs, kind)
    folder = tempfile.mkdtemp(prefix="bench_local_")
    csv = os.path.join(args.results, f"local-attention-{kind}.csv")
    summary = {}
    for seed in args.seeds:  # seeds outermost: a change in the machine's load hits every config
        for name, extra in configs:
            label = "".join(ch if ch.isalnum() else "-" for ch in name)
            res = s2s.fit(dict(base, seed=seed, checkpoint=os.path.join(
                folder, f"{label}-{seed}.pt"), **extra), data=data, log=lambda m: None)
            last = res["history"][-1]
            ex_s = statistics.median(h["examples_per_s"] for h in res["history"])
            train_s = sum(h["train_s"] for h in res["history"])
            print(f"{name:16s} seed {seed}: exact {last['exact']:.2f}%, held-out loss "
                  f"{last['valid_loss']:.4f}, {ex_s:.0f} ex/s, {train_s:.1f} s", flush=True)
            summary.setdefault(name, []).append((last["exact"], last["valid_loss"], ex_s))
            shape = (f"train_pairs={len(data['train'])} heldout_pairs={len(data['valid'])} "
                     f"epochs={last['epoch']} seed={seed}")
            write_results("local-attention", args.device, [
                dict(case="date", provider=name, shape=shape, metric=k, value=round(v, 4))
                for k, v in (("exact_match", last["exact"]), ("heldout_loss", last["valid_loss"]),
                             ("examples_per_s", ex_s), ("train_s", train_s))], csv)

    lines = ["| alignment | exact match % | held-out loss | train ex/s |",
             "| --- | --- | --- | --- |"]
    for name, rows in summary.items():
        exact, loss, speed = zip(*rows)
        lines.append(f"| {name} | {mean_sd(exact, '{:.2f}')} | {mean_sd(loss, '{:.4f}')} | "
                     f"{mean_sd(speed, '{:.0f}')} |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.results, f"local-attention-{kind}.md"), "w") as f:
        f.write(f"{len(args.seeds)} seeds ({args.seeds}), {len(data['train'])} train / "
                f"{len(data['valid'])} held-out pairs, {args.epochs} epochs, mean ± sample sd; "
                f"{torch.__version__}, {args.threads} thread(s)\n\n{table}\n")


def step_speed(args, data, configs, kind):
    batch = s2s.Batch(data["train"][:64]).to(args.device)
    models = {}
    for name, extra in configs:
        torch.manual_seed(0)
        models[name] = s2s.Seq2Seq(len(data["src_vocab"]), len(data["tgt_vocab"]), embed_dim=32,
                                   hidden_size=128, attention="general", bidirectional=True,
                                   **extra).to(args.device)
    times = {name: [] for name in models}
    for r in range(args.speed + 2):  # two warm-up rounds
        for name, model in models.items():
            start = time.perf_counter()
            model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out).backward()
            model.zero_grad(set_to_none=True)
            if r >= 2:
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["global"])
    lines = ["| alignment | ms per step (median) | vs global |", "| --- | --- | --- |"]
    for name, t in times.items():
        med = statistics.median(t)
        lines.append(f"| {name} | {1e3 * med:.1f} | {med / base:.2f} |")
        write_results("local-attention", args.device, [dict(
            case="date-step", provider=name, shape=f"batch=64 rounds={args.speed}",
            metric="step_ms_median", value=round(1e3 * med, 2))],
            os.path.join(args.results, f"local-attention-{kind}.csv"))
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.results, f"local-attention-speed-{kind}.md"), "w") as f:
        f.write(f"forward+backward of one 64-pair batch, {args.speed} interleaved rounds; "
                f"{torch.__version__}, {args.threads} thread(s)\n\n{table}\n")


if __name__ == "__main__":
    main()
