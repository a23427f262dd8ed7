"""Dynamic memory network against MemN2N on the real bAbI tasks; one CSV row per run,
appended to bench/results/dmn-babi-cpu.csv as soon as the run ends (a long sweep that is
stopped keeps the rows it finished).

    FASTSOFTMAX_BABI=/path/to/babi python bench/bench_dmn.py                 # tasks 1-3
    python bench/bench_dmn.py --tasks 1 --models dmn --epochs 5 --seeds 0 1

Both models read the same questions (fastsoftmax.models.babi.load_task: the task's 10k
training file where the set has it, else 1k; the last 10% held out for validation) and are
scored on the task's 1000 test questions. The DMN run is fastsoftmax.models.dmn.fit (the
run of `fastsoftmax-dmn train`); MemN2N is fastsoftmax.models.memn2n.fit given the same
stories, encoded by its own data module (its command line generates stories of its own).
`--supervision` picks strong (the supporting facts train the gates / attention), weak or
both.
"""

import argparse
import csv
import logging
import os
import platform
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fastsoftmax.models import babi  # noqa: E402
from fastsoftmax.models import dmn  # noqa: E402
from fastsoftmax.models import memn2n as mn  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
FIELDS = ["model", "task", "train_size", "train_questions", "supervision", "accuracy",
          "support_hits", "seed", "epochs", "seconds", "settings", "machine"]


def machine() -> str:
    return (f"{os.cpu_count()}-core CPU ({platform.machine()}), torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread(s)")


def size_of(root, task: int) -> str:
    """10k where the set has the task's training file, else 1k (qa3 in the shared copy)."""
    try:
        babi.task_file(root, task, "train", "10k")
        return "10k"
    except FileNotFoundError:
        return "1k"


def memn2n_data(data: dict) -> dict:
    """The DMN run's stories, encoded for MemN2N (its vocabulary: <pad> and <unk> first)."""
    vocab = mn.Vocabulary(data["vocab"].itos, data["vocab"].counts,
                          specials=data["vocab"].specials)
    answers = data["answers"]
    split = {k: data[k] for k in ("train", "valid", "test")}
    encoded = {k: mn.encode(v, vocab, answers) for k, v in split.items()}
    counts = torch.ones(len(answers), dtype=torch.float64)
    for item in encoded["train"]:
        counts[item[2]] += 1
    return dict(split, vocab=vocab, answers=answers, encoded=encoded, counts=counts)


def run_dmn(args, root, task, size, data, supervised, seed, folder):
    epochs = args.epochs if size == "10k" else args.epochs_1k
    settings = dict(hidden=args.hidden, passes=args.passes, gate=args.gate,
                    temporal=not args.no_temporal, lr=args.lr,
                    batch_size=args.batch_size, dropout=args.dropout, epochs=epochs)
    if args.init_embeddings:
        settings["init_embeddings"] = os.path.basename(args.init_embeddings)
    config = dmn.TrainConfig(data=root, task=task, size=size, seed=seed,
                             init_embeddings=args.init_embeddings,
                             supporting_facts=supervised, device="cpu", progress=False,
                             checkpoint=os.path.join(folder, f"dmn-{task}-{seed}.pt"),
                             force=True, **{k: v for k, v in settings.items()
                                            if k != "init_embeddings"})
    start = time.perf_counter()
    res = dmn.fit(config, data=data)
    return res, time.perf_counter() - start, settings


def run_memn2n(args, task, size, data, supervised, seed, folder):
    # 10k: 20 epochs, the rate halved every 5; 1k: three times as many, halved every 15.
    long = size != "10k"
    settings = dict(embed_dim=20, hops=3, memory_size=50,
                    epochs=args.memn2n_epochs * (3 if long else 1), batch_size=32, lr=0.01,
                    anneal_every=15 if long else 5, noise=0.1)
    config = mn.TrainConfig(task=f"babi{task}", seed=seed, supporting_facts=supervised,
                            device="cpu", progress=False, force=True,
                            checkpoint=os.path.join(folder, f"memn2n-{task}-{seed}.pt"),
                            **settings)
    start = time.perf_counter()
    res = mn.fit(config, data=memn2n_data(data))
    return res, time.perf_counter() - start, settings


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=os.environ.get(babi.ROOT_VARIABLE),
                   help="folder holding en/ and en-10k/")
    p.add_argument("--tasks", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--models", nargs="+", default=["dmn", "memn2n"], choices=("dmn", "memn2n"))
    p.add_argument("--supervision", choices=("strong", "weak", "both"), default="strong")
    p.add_argument("--size", choices=("auto", "1k", "10k"), default="auto",
                   help="training set (auto: 10k where the task has it, else 1k)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--epochs", type=int, default=12, help="DMN epochs on a 10k set")
    p.add_argument("--epochs-1k", type=int, default=60, help="DMN epochs on a 1k set")
    p.add_argument("--memn2n-epochs", type=int, default=20, help="on a 10k set (1k: 3x)")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--gate", choices=("softmax", "sigmoid"), default="softmax")
    p.add_argument("--no-temporal", action="store_true", help="no fact-age vectors")
    p.add_argument("--init-embeddings", default=None,
                   help="word2vec file that starts the DMN's word embeddings")
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=50)
    p.add_argument("--out", default=os.path.join(RESULTS, "dmn-babi-cpu.csv"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # the runs' epoch lines
    modes = {"strong": [True], "weak": [False], "both": [True, False]}[args.supervision]
    new = not os.path.exists(args.out)
    with tempfile.TemporaryDirectory() as folder:
        loaded = {}
        for supervised in modes:
            for task in args.tasks:
                size = size_of(args.data, task) if args.size == "auto" else args.size
                if task not in loaded:
                    loaded[task] = dmn.load_babi(args.data, task, size)
                data = loaded[task]
                for seed in args.seeds:
                    for model in args.models:
                        if model == "dmn":
                            res, seconds, settings = run_dmn(args, args.data, task, size, data,
                                                             supervised, seed, folder)
                        else:
                            res, seconds, settings = run_memn2n(args, task, size, data,
                                                                supervised, seed, folder)
                        row = dict(model=model, task=task, train_size=size,
                                   train_questions=len(data["train"]),
                                   supervision="strong" if supervised else "weak",
                                   accuracy=f"{res['test']['accuracy']:.2f}",
                                   support_hits=f"{res['test']['support_hits']:.1f}",
                                   seed=seed, epochs=len(res["history"]),
                                   seconds=f"{seconds:.0f}",
                                   settings=" ".join(f"{k}={v}" for k, v in settings.items()),
                                   machine=machine())
                        with open(args.out, "a", newline="") as f:
                            w = csv.DictWriter(f, FIELDS)
                            if new:
                                w.writeheader()
                                new = False
                            w.writerow(row)
                        print(",".join(str(row[k]) for k in FIELDS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
