"""Where a MemN2N epoch's time goes on the 20 joint bAbI 1k tasks: one training epoch of the
joint model with each output layer, against the same model whose answer layer is plain
PyTorch (nn.Linear's weight, F.linear + F.cross_entropy), not ours.

    python bench/bench_memn2n_epoch.py --babi-dir DIR                 # every head, 1 thread
    python bench/bench_memn2n_epoch.py --babi-dir DIR --heads plain full sampled
    python bench/bench_memn2n_epoch.py --babi-dir DIR --layer-only    # the layers alone

Each run is fastsoftmax.models.memn2n.fit on babi_task 'all' (d = 50, 3 hops, memory 50,
answers over the whole vocabulary so that every head has the same classes, untied, no
linear start, seed 0) for --epochs epochs; the row is the median of the epochs after the
first (the training pass only: the trainer's own timer, evaluation excluded). Beside it, the
answer layer alone: the median of --repeat forward + backward calls on one batch (32 rows
of d = 50, the joint vocabulary's classes), which shows the layer's own cost without the
rest of the epoch's noise. Rows:
bench/results/memn2n-epoch-<cpu|cuda>.csv (bench/common.py's schema): seconds per epoch and
its ratio to plain.
"""

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from unittest import mock

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from common import time_it, write_results  # noqa: E402

from fastsoftmax.models import memn2n as mn  # noqa: E402
from fastsoftmax.models.memn2n import model as memn2n_model  # noqa: E402

HEADS = ["plain", "full", "sampled", "nce", "neg", "hs", "multi_margin"]


class PlainAnswers(nn.Module):
    """The answer layer without fastsoftmax: nn.Linear's weight, F.cross_entropy."""

    def __init__(self, in_features: int, num_classes: int):
        super().__init__()
        self.linear_weight = nn.Parameter(torch.empty(num_classes, in_features))

    def forward(self, u, target):
        return F.cross_entropy(F.linear(u, self.linear_weight), target)

    def full_loss(self, u, target, reduction="mean"):
        return F.cross_entropy(F.linear(u, self.linear_weight), target, reduction=reduction)

    def predict(self, u):
        return F.linear(u, self.linear_weight).argmax(-1)

    def log_prob(self, u):
        return F.linear(u, self.linear_weight).log_softmax(-1)


def epoch_seconds(args, head: str, folder: str) -> list:
    config = mn.TrainConfig(
        babi_dir=args.babi_dir, babi_task="all", embed_dim=50, hops=3, memory_size=50,
        answers="vocabulary", output="full" if head == "plain" else head,
        num_sampled=args.num_sampled, epochs=args.epochs, linear_start=0, seed=0,
        device=args.device, progress=False, force=True,
        checkpoint=os.path.join(folder, f"{head}.pt"))
    plain = mock.patch.object(memn2n_model, "model_head",
                              lambda output, in_features, num_classes, **_: PlainAnswers(
                                  in_features, num_classes))
    with plain if head == "plain" else contextlib.nullcontext():
        history = mn.fit(config, log=lambda *_: None)["history"]
    return [float(e["seconds"]) for e in history]


def layer_seconds(head: str, num_classes: int, args) -> float:
    """Median seconds of one forward + backward of the answer layer alone on a batch."""
    g = torch.Generator().manual_seed(0)
    counts = torch.arange(num_classes, 0, -1, dtype=torch.float64)
    layer = (PlainAnswers(50, num_classes) if head == "plain" else memn2n_model.model_head(
        head, 50, num_classes, num_sampled=args.num_sampled, counts=counts, sampler="unigram"))
    nn.init.normal_(layer.linear_weight, std=0.1)
    u = torch.randn(32, 50, generator=g, requires_grad=True)
    target = torch.randint(1, num_classes, (32,), generator=g)

    def step():
        layer.zero_grad()
        layer(u, target).backward()
    return time_it(step, torch.device("cpu"), args.repeat, 20)[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--babi-dir", default=os.environ.get("FASTSOFTMAX_BABI"))
    ap.add_argument("--heads", nargs="+", default=HEADS, choices=HEADS)
    ap.add_argument("--epochs", type=int, default=3, help="the first is warm-up")
    ap.add_argument("--num-sampled", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=200, help="calls of the layer alone")
    ap.add_argument("--layer-only", action="store_true", help="time the answer layers alone")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.babi_dir is None:
        ap.error("give --babi-dir or set $FASTSOFTMAX_BABI")
    if args.epochs < 2:
        ap.error("--epochs must be at least 2 (the first is warm-up)")
    torch.set_num_threads(args.threads)
    rows, medians = [], {}
    with tempfile.TemporaryDirectory() as folder:
        for head in [] if args.layer_only else args.heads:
            seconds = epoch_seconds(args, head, folder)
            medians[head] = statistics.median(seconds[1:])
            ratio = medians[head] / medians["plain"] if "plain" in medians else float("nan")
            print(f"{head:13s} {medians[head]:7.2f} s per epoch "
                  f"(epochs: {', '.join(f'{s:.2f}' for s in seconds)}); / plain {ratio:.2f}",
                  flush=True)
            shape = f"bAbI 1k joint, d=50, S={args.num_sampled}, {args.threads} thread(s)"
            rows += [dict(case="memn2n_joint_epoch", provider=head, shape=shape, metric=m,
                          value=v) for m, v in (("seconds_per_epoch", medians[head]),
                                                ("ratio_to_plain", ratio))]
        classes = len(mn.load_data(mn.TrainConfig(babi_dir=args.babi_dir, babi_task="all",
                                                  answers="vocabulary"))["answers"])
        for head in args.heads:
            alone = layer_seconds(head, classes, args)
            print(f"{head:13s} answer layer alone: {alone * 1e6:8.1f} us per batch "
                  f"(V = {classes})", flush=True)
            rows.append(dict(case="memn2n_answer_layer", provider=head,
                             shape=f"batch 32, d=50, V={classes}, S={args.num_sampled}",
                             metric="median_us", value=alone * 1e6))
    print("wrote", write_results("memn2n-epoch", torch.device(args.device), rows, args.out))


if __name__ == "__main__":
    main()
