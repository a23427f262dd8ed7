"""MemN2N on the real bAbI v1.2 1k tasks, per task and jointly (Sukhbaatar et al. 2015,
Table 1, rows "PE LS RN" and "PE LS RN joint"); one CSV row per run and task, appended (and
flushed) as soon as the run ends, so a long sweep that is stopped keeps what it finished.

    python bench/bench_memn2n_babi.py --babi-dir DIR                  # tasks 1-20, 1 restart
    python bench/bench_memn2n_babi.py --babi-dir DIR --restarts 2 --tasks 2 3
    python bench/bench_memn2n_babi.py --babi-dir DIR --joint-only
    python bench/bench_memn2n_babi.py --babi-dir DIR --tie --out TIED.csv  # W^T = C^K
    python bench/bench_memn2n_babi.py --summary                       # the markdown table
    python bench/bench_memn2n_babi.py --babi-dir DIR --tie --tasks 6 15 16 18 --restarts 3 \
        --noise-style time --out bench/results/memn2n-babi-departures-cpu.csv
    python bench/bench_memn2n_babi.py --departures --out bench/results/memn2n-babi-departures-cpu.csv

Each run is one call of fastsoftmax.models.memn2n.fit (`fastsoftmax-memn2n train --babi-dir
DIR --babi-task N`) with the paper's options: position and temporal encoding, linear start
(no softmax for the first --linear epochs, then the learning-rate schedule starts, as in
the authors' released code: the paper's text ends it when the validation loss stops
falling, which on 100 validation questions happens by noise within 2 epochs), 10 % random
empty memories, 3 hops,
adjacent tying, memory of the 50 latest sentences, SGD, batch 32, the learning rate halved
every `anneal` epochs. The paper's learning rate 0.005 (with linear start) and clipping at
40 apply, in its authors' code, to the gradient of the loss summed over the batch; fit()
averages over the batch, so the same steps are --lr 32 × 0.005 = 0.16 and --clip 40 / 32 =
1.25 (identical plain-SGD updates; each weight matrix clipped on its own, as theirs, unless
--clip-style global). Restart r uses seed r; the summary keeps, per task, the restart of
lowest validation error (ties: the first), and of the joint runs the one of lowest mean
validation error over the 20 tasks (one model: chosen whole).

The departures from the authors' Matlab code (MemN2N-babi-matlab) that TrainConfig can
switch, with fit's defaults: --position-weights authors (else sentence / longest),
--empty-slots (their memory slots, the empty ones in the softmax with score 0),
--clip-style spectral (each weight matrix clipped on its own; global: all together),
--no-punctuation ('.' and '?' dropped, as their parser does), --noise-style memories (time:
their gaps in the time indices instead of attended empty memories). The first four are
theirs because they measured better (memn2n-babi-departures-cpu.csv); the rows of
memn2n-babi-cpu.csv and memn2n-babi-tied-cpu.csv came before, from --position-weights
sentence --no-empty-slots --clip-style global --punctuation.

Rows of bench/results/memn2n-babi-cpu.csv: mode (task / joint), task, error (test error %),
valid_error, epochs (linear start included), linear (its epochs), restart, restarts (of the
sweep), seed, seconds (of the run), machine, command. A new file also gets variant (the
run's settings: answer layer, schedule, departures) and train_error (% on the training
stories at the end: the paper and the authors keep the restart of lowest training error);
rows appended to an older file keep that file's columns.
"""

import argparse
import csv
import os
import platform
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fastsoftmax.models import memn2n as mn  # noqa: E402
from fastsoftmax.nn import HEADS  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
CSV = os.path.join(RESULTS, "memn2n-babi-cpu.csv")
FIELDS = ("mode", "task", "variant", "error", "valid_error", "train_error", "epochs", "linear",
          "restart", "restarts", "seed", "seconds", "machine", "command")


def machine() -> str:
    return f"{os.cpu_count()}-core CPU ({platform.machine()}), torch {torch.__version__}"


def append(path: str, rows: list) -> None:
    """Append rows (and the header to a new file); an existing file keeps its own columns."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    fields = FIELDS
    if not new:
        with open(path, newline="") as f:
            fields = next(csv.reader(f))
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerows(rows)
        f.flush()
        os.fsync(f.fileno())


def run(args, task: str, restart: int, folder: str) -> list:
    """One training run; its CSV rows (one per bAbI task it was tested on)."""
    joint = task == "all"
    epochs = args.joint_epochs if joint else args.epochs
    linear = args.joint_linear if joint else args.linear
    config = mn.TrainConfig(
        babi_dir=args.babi_dir, babi_task=task, embed_dim=args.joint_dim if joint else args.dim,
        hops=3, memory_size=50, tying="adjacent", position_encoding=True,
        temporal_encoding=True, optimizer="sgd", lr=args.lr, clip=args.clip, batch_size=32,
        epochs=epochs, anneal_every=args.joint_anneal if joint else args.anneal,
        answers="vocabulary" if args.tie else "task", tie_answers=args.tie,
        output=args.output, num_sampled=args.num_sampled,
        linear_start=linear, linear_fixed=True, noise=0.1, seed=restart, device="cpu",
        progress=False, force=True, noise_style=args.noise_style,
        position_weights=args.position_weights, empty_slots=args.empty_slots,
        clip_style=args.clip_style, punctuation=args.punctuation,
        checkpoint=os.path.join(folder, f"babi-{task}-seed{restart}.pt"))
    start = time.perf_counter()
    res = mn.fit(config, log=lambda line: print(f"[{task}/{restart}] {line}", flush=True))
    seconds = time.perf_counter() - start
    model = res["model"]
    # per task, and jointly over the tasks (by_task keeps no training split)
    train = mn.evaluate(model, res["data"]["encoded"]["train"])
    rows = []
    for t, split in res["data"]["by_task"].items():
        valid = mn.evaluate(model, split["valid"])
        rows.append(dict(mode="joint" if joint else "task", task=t,
                         variant=variant(args, epochs, linear, joint),
                         error=f"{100 - res['by_task'][t]['accuracy']:.1f}",
                         valid_error=f"{100 - valid['accuracy']:.1f}",
                         train_error=f"{100 - train['accuracy']:.1f}", epochs=epochs,
                         linear=linear,
                         restart=restart, restarts=args.restarts, seed=restart,
                         seconds=f"{seconds:.0f}", machine=machine(),
                         command=" ".join(sys.argv)))
    return rows


def variant(args, epochs: int, linear: int, joint: bool) -> str:
    """The run's settings in a few words: answer layer, schedule, then each departure set."""
    anneal = args.joint_anneal if joint else args.anneal
    parts = ["tied" if args.tie else "separate", f"e{epochs}/ls{linear}/half{anneal}"]
    parts += [f"head={args.output}/{args.num_sampled}"] if args.output != "full" else []
    parts += [f"noise={args.noise_style}"] if args.noise_style != "memories" else []
    parts += ([f"pe={args.position_weights}"] if args.position_weights != "sentence" else [])
    parts += ["empty-slots"] if args.empty_slots else []
    parts += [f"clip={args.clip_style}"] if args.clip_style != "global" else []
    parts += ["no-punct"] if not args.punctuation else []
    return " ".join(parts)


def departures(path: str) -> str:
    """Markdown: per task and variant, the runs' test error mean ± standard deviation (and
    the mean validation and training errors), over the seeds run."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    cells = {}
    for r in rows:
        cells.setdefault((int(r["task"]), r["variant"]), []).append(r)
    lines = ["| task | variant | seeds | test error % | valid % | train % |",
             "| --- | --- | --- | --- | --- | --- |"]
    for (task, name), runs in sorted(cells.items()):
        err = [float(r["error"]) for r in runs]
        mean = sum(err) / len(err)
        sd = (sum((e - mean) ** 2 for e in err) / max(len(err) - 1, 1)) ** 0.5
        valid = sum(float(r["valid_error"]) for r in runs) / len(runs)
        train = sum(float(r["train_error"]) for r in runs) / len(runs)
        lines.append(f"| {task} | {name} | {','.join(r['seed'] for r in runs)} | "
                     f"{mean:.1f} ± {sd:.1f} ({min(err):.1f}–{max(err):.1f}) | {valid:.1f} | "
                     f"{train:.1f} |")
    return "\n".join(lines)


def best_joint_seed(rows: list):
    """The seed of the joint run of lowest mean validation error over its tasks (the first
    on a tie): a joint model is one model, so its restart is chosen whole, not per task."""
    runs = {}
    for r in rows:
        if r["mode"] == "joint":
            runs.setdefault(r["seed"], []).append(float(r["valid_error"]))
    return min(runs, key=lambda seed: sum(runs[seed]) / len(runs[seed]), default=None)


def summary(path: str) -> str:
    """Markdown: per task, the best restart's test error (by validation error): per task
    the restart best on that task, jointly the restart best over all tasks."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    joint_seed = best_joint_seed(rows)
    best = {}
    for r in rows:
        key = (r["mode"], int(r["task"]))
        if r["mode"] == "joint":
            if r["seed"] == joint_seed:
                best[key] = r
        elif key not in best or float(r["valid_error"]) < float(best[key]["valid_error"]):
            best[key] = r
    lines = ["| task | per task: error % (restarts, epochs) | joint: error % (epochs) |",
             "| --- | --- | --- |"]
    for task in range(1, 21):
        cells = []
        for mode in ("task", "joint"):
            r = best.get((mode, task))
            runs = sum(1 for x in rows if x["mode"] == mode and int(x["task"]) == task)
            cells.append("not run" if r is None else
                         f"{r['error']} ({runs}, {r['epochs']})" if mode == "task"
                         else f"{r['error']} ({r['epochs']})")
        lines.append(f"| {task} | {cells[0]} | {cells[1]} |")
    for mode in ("task", "joint"):
        errors = [float(best[(mode, t)]["error"]) for t in range(1, 21) if (mode, t) in best]
        if errors:
            lines.append(f"\n{mode}: mean error {sum(errors) / len(errors):.1f}% over "
                         f"{len(errors)} tasks, failed (error > 5%) {sum(e > 5 for e in errors)}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--babi-dir", default=os.environ.get("FASTSOFTMAX_BABI"),
                   help="the folder holding en/ (default: $FASTSOFTMAX_BABI)")
    p.add_argument("--tasks", nargs="+", type=int, default=list(range(1, 21)))
    p.add_argument("--restarts", type=int, default=1, help="seeds 0 .. N-1 per task")
    p.add_argument("--first-restart", type=int, default=0, help="start the seeds here")
    p.add_argument("--epochs", type=int, default=120, help="linear start included")
    p.add_argument("--linear", type=int, default=20, help="epochs of linear start")
    p.add_argument("--anneal", type=int, default=25, help="halve the lr every N epochs after "
                   "linear start")
    p.add_argument("--dim", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.16, help="of the batch-mean loss")
    p.add_argument("--clip", type=float, default=1.25, help="of the batch-mean gradient")
    p.add_argument("--joint-epochs", type=int, default=90)
    p.add_argument("--joint-linear", type=int, default=30)
    p.add_argument("--joint-anneal", type=int, default=15)
    p.add_argument("--joint-dim", type=int, default=50)
    p.add_argument("--output", default="full", choices=list(HEADS),
                   help="the answer layer (TrainConfig.output); not 'full': variant head=...")
    p.add_argument("--num-sampled", type=int, default=16,
                   help="candidates or negatives of a sampled answer layer")
    p.add_argument("--tie", action="store_true",
                   help="the paper's answer layer: W^T = C^K over the vocabulary (else a "
                        "separate layer over the training answers)")
    d = mn.TrainConfig()  # the departures' defaults: fit's
    p.add_argument("--noise-style", choices=mn.data.NOISE_STYLES, default=d.noise_style)
    p.add_argument("--position-weights", choices=mn.model.POSITION_WEIGHTS,
                   default=d.position_weights)
    p.add_argument("--empty-slots", action=argparse.BooleanOptionalAction,
                   default=d.empty_slots,
                   help="the authors' empty memory slots in the softmax (score 0)")
    p.add_argument("--clip-style", choices=mn.clipping.CLIP_STYLES, default=d.clip_style)
    p.add_argument("--punctuation", action=argparse.BooleanOptionalAction,
                   default=d.punctuation,
                   help="keep '.' and '?' as words (the authors' parser drops them)")
    p.add_argument("--joint", action="store_true", help="also one joint run (seed 0)")
    p.add_argument("--joint-only", action="store_true")
    p.add_argument("--checkpoints", default="babi-checkpoints",
                   help="folder of the runs' checkpoints")
    p.add_argument("--out", default=CSV)
    p.add_argument("--summary", action="store_true", help="print the table of --out and stop")
    p.add_argument("--departures", action="store_true",
                   help="print --out's errors per task and variant and stop")
    args = p.parse_args()
    if args.summary or args.departures:
        print(departures(args.out) if args.departures else summary(args.out))
        return
    if args.babi_dir is None:
        p.error("give --babi-dir or set $FASTSOFTMAX_BABI")
    os.makedirs(args.checkpoints, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    if not args.joint_only:
        for restart in range(args.first_restart, args.first_restart + args.restarts):
            for task in args.tasks:
                append(args.out, run(args, str(task), restart, args.checkpoints))
    if args.joint or args.joint_only:
        append(args.out, run(args, "all", args.first_restart, args.checkpoints))


if __name__ == "__main__":
    main()
