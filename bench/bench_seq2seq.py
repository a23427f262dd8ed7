"""Seq2seq quality and speed benchmarks; rows go to bench/results/seq2seq-<cpu|cuda>.csv.

    python bench/bench_seq2seq.py --bench date          # attention, ≥99.9% exact match target
    python bench/bench_seq2seq.py --bench addition      # plain vs reversed vs reversed+peeky
    python bench/bench_seq2seq.py --bench tatoeba       # En→Fr ≤10 words: full vs sampled

Each configuration is one call of fastsoftmax.models.seq2seq.fit (the run of
`fastsoftmax-seq2seq train`); rows (schema: bench/common.py) give the epochs run, the median
training throughput over epochs and the held-out scores after the last epoch. The held-out
split is a seeded 10% of the file. Outputs are decoded greedily.
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

from common import DATA, write_results  # noqa: E402

from fastsoftmax.models import seq2seq as s2s  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def run(name, config, settings, data, args, out, note=""):
    print(f"[{name}] {config}", flush=True)
    t0 = time.perf_counter()
    folder = args.checkpoint_dir or tempfile.mkdtemp(prefix="bench_seq2seq_")
    label = "".join(ch if ch.isalnum() else "-" for ch in config)
    res = s2s.fit(
        dict(settings, device=args.device, progress=args.progress, force=True,
             checkpoint=os.path.join(folder, f"{name}-{label}.pt")),
        data=data,
        log=lambda m: print("  " + m, flush=True),
    )
    last = res["history"][-1]
    shape = (f"train_pairs={len(data['train'])} heldout_pairs={len(data['valid'])} "
             f"epochs={last['epoch']}")
    metrics = {
        "examples_per_s": round(statistics.median(h["examples_per_s"] for h in res["history"]), 1),
        "epoch_s_median": round(statistics.median(h["train_s"] for h in res["history"]), 2),
        "heldout_loss": round(last.get("valid_loss", float("nan")), 4),
        "exact_match": round(last.get("exact", float("nan")), 3),
        "total_s": round(time.perf_counter() - t0),
    }
    if "bleu" in last:
        metrics["bleu"] = round(last["bleu"], 2)
    rows = [dict(case=name, provider=config, shape=shape, metric=k, value=v)
            for k, v in metrics.items()]
    write_results("seq2seq", args.device, rows, out)
    print("  " + ", ".join(f"{k}={v}" for k, v in metrics.items()) + (f" ({note})" if note else ""),
          flush=True)
    return res


def bench_date(args, out):
    data = s2s.load_task(
        os.path.join(DATA, "dlfs2-toy-seq2seq", "date.txt"),
        "chars",
        valid_fraction=0.1,
        seed=args.seed,
        limit=args.limit,
    )
    settings = {
        "attention": "general",
        "embed_dim": 32,
        "hidden_size": 128,
        "batch_size": 64,
        "lr": 1e-3,
        "epochs": args.epochs or 4,
        "seed": args.seed,
        # A one-way encoder's state at "J" cannot tell JUN from JUL; reading both ways lets every
        # attended position know the whole month name. (One-way, lr 2e-3: stuck near 91%.)
        "bidirectional": True,
    }
    res = run("date", "attention=general bidirectional H=128 lr=1e-3", settings, data, args, out)
    png = os.path.join(args.results, "seq2seq-date-attention.png")
    # A spelled-out month shows the alignment best: year digits ← year, month ← month name.
    idx = next(
        (
            i
            for i, (src, _) in enumerate(data["valid_pairs"])
            if any(c.isalpha() for c in src) and "," in src
        ),
        0,
    )
    src, ref = data["valid_pairs"][idx]
    got = s2s.save_heatmap(
        res["model"], src, "chars", data["src_vocab"], data["tgt_vocab"], png, device=args.device
    )
    print(f"  heatmap {src!r} → {got!r} (reference {ref!r}): {png}", flush=True)


def bench_addition(args, out):
    data = s2s.load_task(
        os.path.join(DATA, "dlfs2-toy-seq2seq", "addition.txt"),
        "chars",
        valid_fraction=0.1,
        seed=args.seed,
        limit=args.limit,
    )
    base = {
        "attention": None,
        "embed_dim": 16,
        "hidden_size": 128,
        "batch_size": 128,
        "lr": 1e-3,
        "epochs": args.epochs or 10,
        "seed": args.seed,
    }
    for config, extra in [
        ("plain", {}),
        ("reversed", {"reverse_source": True}),
        ("reversed+peeky", {"reverse_source": True, "peeky": True}),
    ]:
        run("addition", config + " (no attention, H=128)", dict(base, **extra), data, args, out)


def bench_tatoeba(args, out):
    data = s2s.load_task(
        os.path.join(DATA, "tatoeba-fra-eng", "fra.txt"),
        "pairs",
        max_words=10,
        valid_fraction=0.1,
        seed=args.seed,
        limit=args.limit,
        src_vocab_size=args.vocab,
        tgt_vocab_size=args.vocab,
    )
    # A bounded held-out set: beam-free greedy decoding of every held-out sentence would
    # otherwise cost as much as an epoch on a CPU.
    data["valid_pairs"] = data["valid_pairs"][: args.heldout]
    data["valid"] = data["valid"][: args.heldout]
    base = {
        "attention": "general",
        "embed_dim": 128,
        "hidden_size": 256,
        "batch_size": 64,
        "lr": 1e-3,
        "epochs": args.epochs or 3,
        "seed": args.seed,
        "num_sampled": args.num_sampled,
    }
    for output in ("full", "sampled"):
        config = f"{output} V={len(data['tgt_vocab'])}"
        if output == "sampled":
            config += f" K={args.num_sampled}"
        run("tatoeba", config, dict(base, output=output), data, args, out)


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--bench",
        nargs="+",
        default=["date", "addition", "tatoeba"],
        choices=["date", "addition", "tatoeba"],
    )
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads (1 is fastest for these small models on a shared machine)",
    )
    p.add_argument(
        "--epochs", type=int, default=None, help="default: 4 date, 10 addition, 3 tatoeba"
    )
    p.add_argument("--limit", type=int, default=None, help="first N pairs of each file")
    p.add_argument("--vocab", type=int, default=8000, help="Tatoeba vocabulary limit per side")
    p.add_argument("--num-sampled", type=int, default=512)
    p.add_argument("--heldout", type=int, default=2000, help="Tatoeba held-out pairs scored")
    p.add_argument("--seed", type=int, default=1984)
    p.add_argument("--progress", action="store_true")
    p.add_argument("--results", default=RESULTS, help="folder for the CSV and the heatmap")
    p.add_argument("--checkpoint-dir", default=None,
                   help="where each run's checkpoint goes (default: a temporary folder)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    out = os.path.join(args.results, f"seq2seq-{torch.device(args.device).type}.csv")
    for b in args.bench:
        globals()[f"bench_{b}"](args, out)


if __name__ == "__main__":
    main()
