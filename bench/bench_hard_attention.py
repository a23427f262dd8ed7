"""Soft against hard (REINFORCE) attention on date conversion and addition; rows go to
bench/results/hard-attention-<cpu|cuda>.csv, heatmaps to bench/results/hard-attention-<task>.png.

    python bench/bench_hard_attention.py                     # both tasks, a few minutes on CPU
    python bench/bench_hard_attention.py --bench date --epochs 3 --limit 10000

Per task, the same seeded split and model size are trained four times (one call of
fastsoftmax.models.seq2seq.fit each, the run of `fastsoftmax-seq2seq train`): soft attention,
and hard attention with the baselines 'none', 'mean' and 'value'. Rows: held-out exact match
(greedy decoding) and loss after the last epoch, training seconds (summed over epochs) and the
median throughput; and, timed side by side after training (the four models' steps
interleaved on one batch), the median milliseconds of a training step and its ratio to soft.

Gradient variance: on the model trained with the 'value' baseline (which has all three
baselines at hand), after its first and its last epoch, we draw `--draws` gradients of the
score network's weight (attn_W, the only parameter that sees nothing but the REINFORCE term)
on one fixed training batch, each with a fresh draw of the positions, once per baseline, and
report the total variance Σ_k Var[g_k] and its ratio to the variance without a baseline. The
parameters, the batch and the position draws (common random numbers) are the same for the
three, so the ratio isolates the baseline.

The heatmap of a task shows, for one held-out source: the soft model's attention weights, the
hard model's chosen (argmax) positions, and how often the hard model chooses each source
position at each output step over the held-out pairs. An existing heatmap is never
overwritten without --force.
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

from common import DATA, sync, write_results  # noqa: E402

from fastsoftmax.atomic import atomic_path  # noqa: E402
from fastsoftmax.models import seq2seq as s2s  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
CONFIGS = [("soft", {}),
           ("hard baseline=none", {"attention_mode": "hard", "baseline": "none"}),
           ("hard baseline=mean", {"attention_mode": "hard", "baseline": "mean"}),
           ("hard baseline=value", {"attention_mode": "hard", "baseline": "value"})]
TASKS = {
    # Same model for both: bidirectional encoder (every source position knows its neighbours),
    # Luong 'general' score, H=128, batch 64. Addition learns much faster at lr 3e-3 (soft:
    # 61% exact match after 3 epochs of 18k pairs, against 10% at 1e-3).
    "date": dict(embed_dim=32, epochs=3, limit=10000, lr=1e-3),
    "addition": dict(embed_dim=16, epochs=4, limit=20000, lr=3e-3),
}


def score_gradient_variance(model, batch, kinds, draws, seed):
    """{kind: (total variance of the attn_W gradient over `draws` draws, squared norm of its
    mean)} on one batch. Every kind sees the same `draws` position draws (the generator is
    reseeded per kind: common random numbers), so the figures differ by the baseline only.
    The baseline's running mean is restored after every draw, so each draw sees the same
    baseline, and the model and the global generator leave as they came."""
    model.train()
    saved = {k: v.clone() for k, v in model.reward_baseline.state_dict().items()}
    out = {}
    for kind in kinds:
        model.baseline_kind = kind
        grads = []
        with torch.random.fork_rng(devices=[] if batch.src.device.type == "cpu" else None):
            torch.manual_seed(seed)
            for _ in range(draws):
                model.zero_grad(set_to_none=True)
                model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out).backward()
                grads.append(model.attn_W.weight.grad.detach().double().flatten().clone())
                model.reward_baseline.load_state_dict(saved)
        g = torch.stack(grads)
        out[kind] = (float(g.var(0, unbiased=True).sum()), float(g.mean(0).pow(2).sum()))
    model.baseline_kind = None
    model.zero_grad(set_to_none=True)
    return out


def step_times(models, batch, repeats, device):
    """Median ms of one training step (forward + backward) per model, the models interleaved
    step by step so that the machine's load falls on all of them alike."""
    times = {name: [] for name in models}
    for model in models.values():
        model.train()
    for _ in range(repeats + 1):  # the first round warms up
        for name, model in models.items():
            sync(device)
            t0 = time.perf_counter()
            model.zero_grad(set_to_none=True)
            model(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out).backward()
            sync(device)
            times[name].append(time.perf_counter() - t0)
    for model in models.values():
        model.zero_grad(set_to_none=True)
    return {name: 1e3 * statistics.median(t[1:]) for name, t in times.items()}


def variance_rows(task, when, model, batch, args, shape):
    res = score_gradient_variance(model, batch, ("none", "mean", "value"), args.draws,
                                  args.seed)
    rows = []
    for kind, (var, mean_sq) in res.items():
        provider = f"hard baseline=value, estimate with baseline={kind} ({when})"
        rows += [dict(case=task, provider=provider, shape=shape, metric="score_grad_var",
                      value=var),
                 dict(case=task, provider=provider, shape=shape, metric="score_grad_var_ratio",
                      value=var / res["none"][0]),
                 dict(case=task, provider=provider, shape=shape,
                      metric="score_grad_mean_sq_norm", value=mean_sq)]
        print(f"  gradient variance {when}, baseline {kind}: {var:.4g} "
              f"(x{var / res['none'][0]:.3f} of none; |mean|² {mean_sq:.4g})", flush=True)
    return rows


def train(task, config, extra, data, args, folder, shape):
    settings = dict(attention="general", bidirectional=True, hidden_size=128, batch_size=64,
                    lr=TASKS[task]["lr"], seed=args.seed, embed_dim=TASKS[task]["embed_dim"],
                    epochs=args.epochs or TASKS[task]["epochs"], device=args.device,
                    progress=args.progress, force=True, **extra)
    ckpt = os.path.join(folder, f"{task}-{config.replace(' ', '-').replace('=', '-')}.pt")
    log = lambda m: print("  " + m, flush=True)  # noqa: E731
    print(f"[{task}] {config}", flush=True)
    rows = []
    if config == "hard baseline=value":
        # One epoch, the variance at that point, then resumed to the full run (the resumed
        # run restores the random state, so the measurement does not change the training).
        first = s2s.fit(dict(settings, epochs=1, checkpoint=ckpt), data=data, log=log)
        rows += variance_rows(task, "after epoch 1", first["model"], args.variance_batch, args,
                              shape)
        res = first
        if settings["epochs"] > 1:
            res = s2s.fit(dict(resume=ckpt, epochs=settings["epochs"], progress=args.progress,
                               device=args.device), data=data, given={"epochs"}, log=log)
        rows += variance_rows(task, f"after epoch {settings['epochs']}", res["model"],
                              args.variance_batch, args, shape)
    else:
        res = s2s.fit(dict(settings, checkpoint=ckpt), data=data, log=log)
    last = res["history"][-1]
    metrics = {
        "exact_match": round(last["exact"], 2),
        "heldout_loss": round(last["valid_loss"], 4),
        "train_s": round(sum(h["train_s"] for h in res["history"]), 1),
        "examples_per_s": round(statistics.median(h["examples_per_s"] for h in res["history"])),
    }
    print("  " + ", ".join(f"{k}={v}" for k, v in metrics.items()), flush=True)
    rows += [dict(case=task, provider=config, shape=f"{shape} epochs={last['epoch']}", metric=k,
                  value=v) for k, v in metrics.items()]
    return res["model"], rows


@torch.no_grad()
def heatmap(path, task, soft, hard, data, device):
    """Three panels: soft weights and hard choices for one held-out source, and the hard
    model's choice frequencies (output step × source position) over the held-out pairs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs, examples = data["valid_pairs"], data["valid"]
    index = next((i for i, (src, _) in enumerate(pairs)
                  if any(c.isalpha() for c in src) and "," in src), 0)
    src_toks = s2s.tokenize(pairs[index][0], "chars")
    one = s2s.Batch([examples[index]]).to(device)
    panels = []
    for model in (soft, hard):
        model.eval()
        tokens, _, attn = model.greedy(one.src, one.src_len, max_len=2 * len(src_toks) + 10)
        row = tokens[0].tolist()
        n = row.index(s2s.EOS) + 1 if s2s.EOS in row else len(row)
        panels.append((attn[0, :n].cpu().numpy(),
                       [data["tgt_vocab"].itos[i] for i in row[:n]]))
    max_out = max(len(tgt) for _, tgt in examples) + 5
    counts = torch.zeros(max_out, max(len(src) for src, _ in examples), device=device)
    for i in range(0, len(examples), 256):
        b = s2s.Batch(examples[i:i + 256]).to(device)
        _, _, attn = hard.greedy(b.src, b.src_len, max_len=max_out)
        counts[:attn.shape[1], :attn.shape[2]] += attn.sum(0)
    freq = (counts / counts.sum(1, keepdim=True).clamp(min=1)).cpu().numpy()
    labels = [t if t != " " else "␣" for t in src_toks]
    fig, axes = plt.subplots(1, 3, figsize=(max(12, 0.9 * len(src_toks) + 6), 4.5))
    for ax, (weights, out_toks), title in zip(axes, panels,
                                              ("soft: attention weights",
                                               "hard: chosen position (argmax)")):
        ax.imshow(weights, cmap="gray_r", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=90)
        ax.set_yticks(range(len(out_toks)))
        ax.set_yticklabels(out_toks)
        ax.set_xlabel("source")
        ax.set_ylabel("output")
        ax.set_title(title)
    axes[2].imshow(freq, cmap="gray_r", vmin=0.0, vmax=1.0, aspect="auto")
    axes[2].set_xlabel("source position")
    axes[2].set_ylabel("output step")
    axes[2].set_title(f"hard: choice frequency, {len(examples)} held-out")
    fig.suptitle(f"{task}: {pairs[index][0].strip()!r}")
    fig.tight_layout()
    with atomic_path(path) as tmp:  # the format from path's extension, not the temporary's
        fig.savefig(tmp, dpi=110, format=os.path.splitext(path)[1][1:] or None)
    plt.close(fig)


def bench(task, args, out):
    data = s2s.load_task(os.path.join(DATA, "dlfs2-toy-seq2seq", f"{task}.txt"), "chars",
                         valid_fraction=0.1, seed=args.seed,
                         limit=args.limit or TASKS[task]["limit"])
    data["valid_pairs"] = data["valid_pairs"][:args.heldout]
    data["valid"] = data["valid"][:args.heldout]
    shape = f"train_pairs={len(data['train'])} heldout_pairs={len(data['valid'])} H=128"
    args.variance_batch = s2s.Batch(data["train"][:args.variance_batch_size]).to(args.device)
    folder = args.checkpoint_dir or tempfile.mkdtemp(prefix="bench_hard_attention_")
    models = {}
    for config, extra in CONFIGS:
        models[config], rows = train(task, config, extra, data, args, folder, shape)
        write_results("hard-attention", args.device, rows, out)
    ms = step_times(models, args.variance_batch, args.step_repeats, args.device)
    rows = []
    for config, value in ms.items():
        rows += [dict(case=task, provider=config, shape=f"{shape} batch={args.variance_batch_size}",
                      metric=metric, value=v)
                 for metric, v in (("step_ms_median", round(value, 2)),
                                   ("step_time_vs_soft", round(value / ms["soft"], 3)))]
        print(f"  {config}: training step {value:.1f} ms (x{value / ms['soft']:.2f} of soft)",
              flush=True)
    write_results("hard-attention", args.device, rows, out)
    path = os.path.join(args.results, f"hard-attention-{task}.png")
    heatmap(path, task, models["soft"], models["hard baseline=value"], data, args.device)
    print(f"  heatmap: {path}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=1, help="CPU threads")
    p.add_argument("--epochs", type=int, default=None, help="default: 3 date, 4 addition")
    p.add_argument("--limit", type=int, default=None,
                   help="first N pairs of each file (default: 10000 date, 20000 addition)")
    p.add_argument("--heldout", type=int, default=1000, help="held-out pairs scored")
    p.add_argument("--draws", type=int, default=32, help="gradient draws per variance figure")
    p.add_argument("--variance-batch-size", type=int, default=64,
                   help="training pairs in the batch the variance is measured on")
    p.add_argument("--step-repeats", type=int, default=15,
                   help="interleaved training steps timed per model")
    p.add_argument("--seed", type=int, default=1984)
    p.add_argument("--progress", action="store_true")
    p.add_argument("--results", default=RESULTS, help="folder for the CSV and the heatmaps")
    p.add_argument("--force", action="store_true", help="overwrite existing heatmaps")
    p.add_argument("--checkpoint-dir", default=None,
                   help="where each run's checkpoint goes (default: a temporary folder)")
    args = p.parse_args()
    if args.draws < 2:
        p.error("--draws must be at least 2 (a variance needs two draws)")
    # Refuse before any training rather than after it.
    for task in args.bench:
        png = os.path.join(args.results, f"hard-attention-{task}.png")
        if os.path.exists(png) and not args.force:
            p.error(f"heatmap {png} already exists; pass --force to overwrite it or choose "
                    f"another --results folder")
    torch.set_num_threads(args.threads)
    out = os.path.join(args.results, f"hard-attention-{torch.device(args.device).type}.csv")
    for task in args.bench:
        bench(task, args, out)


if __name__ == "__main__":
    main()
