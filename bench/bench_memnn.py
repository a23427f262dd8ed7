"""The strongly supervised memory network on the real bAbI tasks (1k); one row per run goes to
bench/results/memnn-<cpu|cuda>.csv.

    python bench/bench_memnn.py --data ../shared/data/babi             # tasks 1 2 3, seeds 0 1 2
    python bench/bench_memnn.py --tasks 3 --hops 2 --seeds 0           # task 3 with κ = 2
    python bench/bench_memnn.py --tasks 1 2 --no-time-features \
        --out bench/results/memnn-no-time-features-cpu.csv             # plain argmax of s_O

Each run is one call of fastsoftmax.models.memnn.fit (the run of `fastsoftmax-memnn train`)
with the defaults but for --hops and --epochs: the last tenth of the training questions for
validation, the 1,000 test questions for the test accuracy. Columns: task, hops, seed,
epochs, test accuracy (%), supporting facts found per hop on the test set (%), training
seconds (the epochs' own, validation excluded), the machine, torch and the command.
"""

import argparse
import os
import platform
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from common import RESULTS, append_rows, command_line, device_name  # noqa: E402

from fastsoftmax.models import memnn as mm  # noqa: E402

FIELDS = ["task", "hops", "seed", "epochs", "accuracy", "support_hits", "seconds", "machine",
          "torch", "command"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--data", default=None,
                        help="folder holding bAbI's en/ (None: $FASTSOFTMAX_BABI)")
    parser.add_argument("--tasks", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--hops", type=int, default=None,
                        help="κ for every task (None: 2, and 3 for task 3)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=mm.TrainConfig().epochs)
    parser.add_argument("--no-time-features", dest="time_features", action="store_false",
                        help="O without the write-time comparisons (the plain argmax)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--machine", default=None,
                        help="the machine's name in the CSV (None: the CPU or GPU model)")
    parser.add_argument("--out", default=None, help="CSV (None: bench/results/memnn-<dev>.csv)")
    args = parser.parse_args()
    out = args.out or os.path.join(RESULTS, f"memnn-{torch.device(args.device).type}.csv")
    machine = args.machine or f"{device_name(args.device)}, {platform.machine()}"
    with tempfile.TemporaryDirectory() as folder:
        for task in args.tasks:
            hops = args.hops or (3 if task == 3 else 2)
            for seed in args.seeds:
                res = mm.fit(dict(data=args.data, task=task, hops=hops, seed=seed,
                                  time_features=args.time_features,
                                  epochs=args.epochs, device=args.device, progress=False,
                                  checkpoint=os.path.join(folder, f"{task}-{seed}.pt")),
                             log=lambda m: None)
                row = dict(task=task, hops=hops, seed=seed, epochs=args.epochs,
                           accuracy=f"{res['test']['accuracy']:.2f}",
                           support_hits=" ".join(f"{h:.1f}" for h in res["test"]["support_hits"]),
                           seconds=f"{sum(h['seconds'] for h in res['history']):.1f}",
                           machine=machine, torch=torch.__version__, command=command_line())
                append_rows(out, [row], FIELDS)
                print(f"task {task} hops {hops} seed {seed}: accuracy {row['accuracy']}%, "
                      f"support hits {row['support_hits']}, {row['seconds']} s", flush=True)
    print(f"rows in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
