"""Language-model benchmark: quality of each output head on PTB and output-layer speed.

    python bench/bench_lm.py quality [--config small|medium] [--jobs 2] [--heads full sampled nce]
    python bench/bench_lm.py speed [--datasets wikitext-2 synthetic-800k] [--steps 10]
    python bench/bench_lm.py breakdown [--datasets ...] [--heads ...] [--grads dense sparse]

quality: Zaremba et al. 2014 on PTB, every head trained in the same run from the same initial
model, test perplexity always with the exact softmax. `--config small` (default): 2x200 LSTM,
no dropout, batch 20, BPTT 20, SGD lr 1 halved every epoch after the 4th, clip 5, init ±0.1,
13 epochs; targets full ≤ 120, 'sampled' and 'nce' within 5% of full. `--config medium` (a GPU
run): 2x650, dropout 0.5, BPTT 35, lr /1.25 after epoch 6, init ±0.05, 39 epochs, tied
weights; targets full ≤ 80, 'sampled' within 3%. Our loss is the per-token mean, so their
lr 1 and clip 5 on the sum over BPTT steps are lr = bptt and clip = 5 / bptt here. `--jobs 2`
trains two heads at a time in separate processes. Each head is one call of
fastsoftmax.models.lm.fit, the same run as `fastsoftmax-lm train`; its checkpoints go to
--checkpoint-dir (a temporary folder by default).

speed: training tokens/s (forward + backward + SGD step of the whole model) per head against
'full' on WikiText-2 (33k words) and on a synthetic Zipf corpus with an 800k vocabulary.

breakdown: the same steps cut into phases (embedding and RNN forward, head forward, head
backward, RNN backward, SGD step with zero_grad and, with --clip, the clip before it), the
device synchronised at each cut: the median milliseconds of each and its share of the step.
`--grads dense sparse` runs each head with dense and with row-sparse gradients, side by side.

Rows are appended to bench/results/lm-<cpu|cuda>.csv (schema: bench/common.py).
"""

import argparse
import concurrent.futures
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from typing import Optional

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import bound_model  # noqa: E402
from common import DATA, write_results  # noqa: E402

from fastsoftmax.models import lm  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------------------
# Zaremba et al. (2014). They use SGD lr 1 and clip 5 on the loss summed over the BPTT steps
# (averaged over the batch); our loss is the per-token mean, so the same update is lr = bptt
# and clip = 5 / bptt. `decay` divides the lr after every epoch from `decay_after` on.
# 'medium' ties the input and output embeddings (Press & Wolf 2017).
CONFIGS = {
    "small": dict(
        size=200, dropout=0.0, epochs=13, bptt=20, decay=2.0, decay_after=4, init=0.1, tie=False
    ),
    "medium": dict(
        size=650, dropout=0.5, epochs=39, bptt=35, decay=1.25, decay_after=6, init=0.05, tie=True
    ),
}


def quality_setting(args) -> str:
    c = CONFIGS[args.config]
    return (
        f"{args.config}: 2x{c['size']} lstm, dropout {c['dropout']:g}, tied {c['tie']}, bs 20, "
        f"bptt {c['bptt']}, sgd lr {c['bptt']} on the per-token mean (= lr 1 on the sum), "
        f"/{c['decay']:g} after ep {c['decay_after']}, clip {5 / c['bptt']:.3g} (= 5), "
        f"init ±{c['init']:g}, output bias -log V, epochs {args.epochs or c['epochs']}, "
        f"max_steps {args.max_steps or 'all'}, num_sampled {args.num_sampled}"
        + (f", hs tree {args.hs_tree}" if "hs" in args.heads else "")
        + (f" from {os.path.basename(args.hs_tree_model)}" if args.hs_tree_model else "")
    )


def train_quality_head(head: str, args, device: torch.device, threads: Optional[int]):
    """One head of the quality run (Zaremba's recipe, `args.config`): one fit() call, then
    test perplexity. Runs in its own process when heads run in parallel (`--jobs`)."""
    if threads:
        torch.set_num_threads(threads)
    c = CONFIGS[args.config]
    bptt = c["bptt"]
    folder = args.checkpoint_dir or tempfile.mkdtemp(prefix="bench_lm_")
    config = lm.TrainConfig(
        data=os.path.join(DATA, "ptb"), output=head, embed_dim=c["size"], hidden_size=c["size"],
        layers=2, dropout=c["dropout"], tie_weights=c["tie"], num_sampled=args.num_sampled,
        sampler="unigram", init_range=c["init"], optimizer="sgd", lr=float(bptt),
        lr_decay=c["decay"], decay_after=c["decay_after"], clip=5.0 / bptt,
        epochs=args.epochs or c["epochs"], batch_size=20, eval_batch_size=10, bptt=bptt,
        eval_bptt=35,
        max_steps=args.max_steps, seed=args.seed,
        hs_tree=args.hs_tree if head == "hs" else "huffman",
        hs_tree_model=args.hs_tree_model if head == "hs" else None, device=str(device),
        checkpoint=os.path.join(folder, f"ptb-{args.config}-{head}.pt"), force=True,
        progress=sys.stderr.isatty() and args.jobs == 1,
    )
    start = time.perf_counter()
    res = lm.fit(config, log=lambda *parts: print(f"{head:8s}", *parts, flush=True))
    return dict(test_ppl=res["test_ppl"], seconds=time.perf_counter() - start,
                history=res["history"], vocab=len(res["vocab"]))


def plot_quality(histories, config: str, device: torch.device) -> None:
    """bench/results/lm-ptb-<config>-<device type>.png: validation perplexity per epoch and per
    training minute, one curve a head (the benchmark's own figure, replaced on each run)."""
    path = os.path.join(HERE, "results", f"lm-ptb-{config}-{device.type}.png")
    size = CONFIGS[config]["size"]
    title = f"PTB, {config} 2x{size} LSTM: " + " vs ".join(histories) + " heads"
    lm.plot_runs(list(histories.items()), path, title, overwrite=True)
    print("wrote", path)


def quality(args, device):
    setting = quality_setting(args)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if args.jobs > 1:
        # One process per head, the cores shared out; each head's numbers are what it would
        # give alone (its seconds are not: they reflect the sharing).
        threads = args.threads or max(1, cores // args.jobs)
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
            futures = {
                h: pool.submit(train_quality_head, h, args, device, threads) for h in args.heads
            }
            results = {h: f.result() for h, f in futures.items()}
        setting += f", {args.jobs} heads at a time x {threads} threads"
    else:
        results = {h: train_quality_head(h, args, device, args.threads) for h in args.heads}
    plot_quality({h: r["history"] for h, r in results.items()}, args.config, device)
    rows = []
    full = results["full"]["test_ppl"] if "full" in results else math.nan
    for head, r in results.items():
        common = dict(case="quality/ptb", provider=head, shape=f"V={r['vocab']} {setting}")
        rows.append(dict(common, metric="test_ppl", value=f"{r['test_ppl']:.2f}"))
        if math.isfinite(full):
            rows.append(dict(common, metric="test_ppl_relative_to_full",
                             value=f"{r['test_ppl'] / full:.4f}"))
        rows.append(dict(common, metric="valid_ppl_per_epoch",
                         value=" ".join(f"{h['val_ppl']:.2f}" for h in r["history"])))
        rows.append(dict(common, metric="train_seconds", value=f"{r['seconds']:.0f}"))
    return rows


# ---------------------------------------------------------------------------------------
def synthetic_stream(vocab_size: int, tokens: int, seed: int = 0) -> torch.Tensor:
    """Zipf(1) ids: p(i) ∝ 1 / (i + 1), id 0 most frequent, like a sorted real vocabulary."""
    g = torch.Generator().manual_seed(seed)
    p = 1.0 / torch.arange(1, vocab_size + 1, dtype=torch.float64)
    cdf = torch.cumsum(p / p.sum(), 0)
    u = torch.rand(tokens, generator=g, dtype=torch.float64)
    return torch.searchsorted(cdf, u).clamp_(max=vocab_size - 1)


def speed_data(name: str):
    if name == "wikitext-2":
        corpus = lm.Corpus(os.path.join(DATA, "wikitext-2"), splits=("train",))
        return corpus["train"], corpus.vocab.counts
    if name.startswith("synthetic-") and name.endswith("k"):  # synthetic-800k: V = 800,000
        v = int(name[len("synthetic-"):-1]) * 1000
        ids = synthetic_stream(v, 400_000)
        return ids, torch.bincount(ids, minlength=v).double()
    raise ValueError(name)


def check_full_nll(model, x, y) -> None:
    """Correctness before timing: the head's streamed exact NLL equals the one-shot cross
    entropy of all logits."""
    with torch.no_grad():
        model.eval()
        feats, _ = model.features(x)
        chunked = model.head.full_loss(feats, y)
        logits = F.linear(feats, model.head.linear_weight, model.head.linear_bias)
        direct = F.cross_entropy(logits.flatten(0, 1).float(), y.reshape(-1))
        model.train()
    if not torch.allclose(chunked, direct, rtol=1e-4, atol=1e-4):
        raise AssertionError(f"chunked NLL {chunked.item()} != direct {direct.item()}")


def speed_model(args, head: str, counts, device, sparse=None) -> "lm.RNNLanguageModel":
    torch.manual_seed(args.seed)
    return lm.RNNLanguageModel(counts.numel(), args.size, args.size, 2, output=head,
                               num_sampled=args.num_sampled, sampler="unigram", counts=counts,
                               sparse=args.sparse if sparse is None else sparse).to(device)


PHASES = ("rnn_forward", "head_forward", "head_backward", "rnn_backward", "optimizer")


def timed_phases(model, opt, x, y, hidden, device, clip=0.0):
    """One SGD step cut at the features fed to the head: seconds of each of PHASES (the
    device synchronised at each cut, so phases do not overlap), and the new hidden state.
    `clip` > 0 clips the global gradient norm (lm.clip_grad_norm) in the optimiser's phase."""
    def clock() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    marks = [clock()]
    feats, hidden = model.features(x, lm.detach_hidden(hidden))
    marks.append(clock())
    cut = feats.detach().requires_grad_()
    loss = model.head(cut, y)
    marks.append(clock())
    loss.backward()
    marks.append(clock())
    feats.backward(cut.grad)
    marks.append(clock())
    if clip > 0:
        lm.clip_grad_norm(model.parameters(), clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    marks.append(clock())
    return [b - a for a, b in zip(marks, marks[1:])], hidden


def breakdown_medians(args, head: str, counts, data, device, sparse: bool) -> list:
    """Median seconds of each of PHASES over --steps steps after --warmup."""
    model = speed_model(args, head, counts, device, sparse)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches, hidden, times = lm.bptt_batches(data, args.bptt), None, []
    for step in range(args.warmup + args.steps):
        x, y = next(batches)
        seconds, hidden = timed_phases(model, opt, x, y, hidden, device, args.clip)
        if step >= args.warmup:
            times.append(seconds)
    return [statistics.median(col) for col in zip(*times)]


def breakdown(args, device):
    """Where a training step's time goes, per head and gradient layout (--grads): median
    seconds of each phase, and its share of their sum."""
    rows = []
    for name in args.datasets:
        ids, counts = speed_data(name)
        data = lm.batchify(ids, args.batch_size).to(device)
        for head in args.heads:
            for grads in args.grads:
                med = breakdown_medians(args, head, counts, data, device, grads == "sparse")
                total = sum(med)
                print(f"{name:15s} V={counts.numel():7d} {head:8s} {grads:6s} "
                      f"{1e3 * total:8.2f} ms/step: " + ", ".join(
                          f"{p} {1e3 * m:.2f} ms ({m / total:.0%})" for p, m in zip(PHASES, med)),
                      flush=True)
                setting = (f"V={counts.numel()} 2x{args.size} lstm, bs {args.batch_size}, bptt "
                           f"{args.bptt}, num_sampled {args.num_sampled}, median of {args.steps}"
                           + (", sparse grads" if grads == "sparse" else "")
                           + (f", clip {args.clip:g}" if args.clip > 0 else ""))
                common = dict(case=f"breakdown/{name}", provider=head, shape=setting)
                for phase, m in zip(PHASES, med):
                    rows.append(dict(common, metric=f"ms_{phase}", value=f"{1e3 * m:.3f}"))
                    rows.append(dict(common, metric=f"share_{phase}", value=f"{m / total:.3f}"))
    return rows


def speed(args, device):
    rows = []
    for name in args.datasets:
        ids, counts = speed_data(name)
        v = counts.numel()
        data = lm.batchify(ids, args.batch_size).to(device)
        x0, y0 = next(lm.bptt_batches(data[:2], args.bptt))
        rates = {}
        for head in args.heads:
            model = speed_model(args, head, counts, device)
            check_full_nll(model, x0, y0)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            times = []
            hidden = None
            batches = lm.bptt_batches(data, args.bptt)
            for step in range(args.warmup + args.steps):
                x, y = next(batches)
                hidden = lm.detach_hidden(hidden)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                loss, hidden = model(x, y, hidden)
                loss.backward()
                opt.step()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                if step >= args.warmup:
                    times.append(time.perf_counter() - t0)
                if not math.isfinite(loss.item()):
                    raise AssertionError(f"{head} loss is not finite")
            med = statistics.median(times)
            spread = (max(times) - min(times)) / med if len(times) > 1 else 0.0
            rate = x.numel() / med
            rates[head] = rate
            print(
                f"{name:15s} V={v:7d} {head:8s} {rate:10,.0f} tok/s (median of {len(times)} steps, "
                f"spread {spread:.0%})",
                flush=True,
            )
            del model, opt
        setting = (f"V={v} 2x{args.size} lstm, bs {args.batch_size}, bptt {args.bptt}, "
                   f"num_sampled {args.num_sampled}, {args.steps} steps"
                   f"{', sparse grads' if args.sparse else ''}")
        for head, rate in rates.items():
            common = dict(case=f"speed/{name}", provider=head, shape=setting)
            rows.append(dict(common, metric="train_tokens_per_s", value=f"{rate:.0f}"))
            if "full" in rates:
                rows.append(dict(common, metric="train_tokens_per_s_relative_to_full",
                                 value=f"{rate / rates['full']:.2f}"))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="bench", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--config", choices=sorted(CONFIGS), default="small")
    q.add_argument("--epochs", type=int, default=None, help="default: the config's (13, 39)")
    q.add_argument(
        "--max-steps", type=int, default=None, help="total training steps per head (reduced run)"
    )
    q.add_argument("--checkpoint-dir", default=None,
                   help="where each head's checkpoint goes (default: a temporary folder)")
    q.add_argument("--heads", nargs="+", default=["full", "sampled", "nce", "neg"])
    q.add_argument("--num-sampled", type=int, default=1024)
    q.add_argument("--hs-tree", choices=("huffman", "context", "features"), default="huffman",
                   help="tree of the 'hs' head (fastsoftmax.models.lm.hs_tree)")
    q.add_argument("--hs-tree-model", default=None,
                   help="checkpoint of a trained LM for --hs-tree features")
    q.add_argument("--seed", type=int, default=1234)
    q.add_argument("--device", default=None)
    q.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    q.add_argument(
        "--jobs", type=int, default=1, help="heads trained at once, each in its own process"
    )
    shared = argparse.ArgumentParser(add_help=False)  # the step's setting: speed, breakdown
    shared.add_argument("--datasets", nargs="+", default=["wikitext-2", "synthetic-800k"])
    shared.add_argument("--heads", nargs="+", default=["full", "sampled", "nce", "neg"])
    shared.add_argument("--num-sampled", type=int, default=1024)
    shared.add_argument("--size", type=int, default=200)
    shared.add_argument(
        "--sparse", action="store_true", help="sparse embedding (and sampled-head) gradients"
    )
    shared.add_argument("--batch-size", type=int, default=20)
    shared.add_argument("--bptt", type=int, default=20)
    shared.add_argument("--warmup", type=int, default=2)
    shared.add_argument("--steps", type=int, default=10)
    shared.add_argument("--seed", type=int, default=1234)
    shared.add_argument("--device", default=None)
    shared.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    s = sub.add_parser("speed", parents=[shared])
    b = sub.add_parser("breakdown", parents=[shared],
                       help="ms of each phase of a step: embedding and RNN forward, head "
                            "forward, head backward, RNN backward, optimiser")
    b.add_argument("--grads", nargs="+", choices=("dense", "sparse"), default=None,
                   help="gradient layouts to run each head with (default: sparse with "
                        "--sparse, else dense)")
    b.add_argument("--clip", type=float, default=0.0,
                   help="clip the global gradient norm in the optimiser's phase (0: off; "
                        "fastsoftmax-lm's default is 0.25)")
    bound_model.add_flag(s)
    args = p.parse_args()
    if getattr(args, "bound_model", False):
        # The output layer of one training step (the LSTM below it is not modelled); V of
        # WikiText-2 and the synthetic 800k vocabulary.
        n = args.batch_size * args.bptt
        bound_model.print_model(
            [f(v) for v in (33_278, 800_000) for f in (
                lambda v: bound_model.sampled_softmax(n, args.num_sampled, args.size, v),
                lambda v: bound_model.full_softmax(n, args.size, v))])
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    if getattr(args, "grads", False) is None:
        args.grads = ["sparse" if args.sparse else "dense"]
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rows = dict(quality=quality, speed=speed, breakdown=breakdown)[args.bench](args, device)
    if rows:
        print("wrote", write_results("lm", device, rows))


if __name__ == "__main__":
    main()
