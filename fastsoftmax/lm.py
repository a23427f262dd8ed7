"""Command line for the recurrent language models of `fastsoftmax.models.lm`.

    python -m fastsoftmax.lm train --data DIR --output {full,sampled,nce,neg} [...]
    python -m fastsoftmax.lm eval --checkpoint FILE --data DIR
    python -m fastsoftmax.lm generate --checkpoint FILE --prompt "..."
    python -m fastsoftmax.lm compare RUN.pt [RUN.pt ...] --plot FILE.png

Data-parallel under torchrun (`torchrun --nproc_per_node N -m fastsoftmax.lm train ...`):
gloo on CPU, nccl on GPU; --batch-size is the global batch, split evenly over the ranks.
Every rank seeds its generators identically and builds the sampler from the same training
counts, so all ranks draw from one noise distribution (and the same draws), which makes the
N-process step equal the single-process step on the same global batch.
"""

import argparse
import json
import math
import os
import sys
from typing import List, Optional

import torch

from .models import lm


def _dist_env():
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    return world, rank, local_rank


def _device(name: Optional[str], local_rank: int) -> torch.device:
    if name is None:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", local_rank)
    return device


def _log(rank: int, *parts) -> None:
    if rank == 0:
        print(*parts, flush=True)


def plot_runs(runs, path: str, title: str = "validation perplexity") -> None:
    """One curve of validation perplexity per epoch for each (label, history) pair."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, history in runs:
        ax.plot(
            [h["epoch"] for h in history], [h["val_ppl"] for h in history], marker="o", label=label
        )
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation perplexity")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _map_hidden(hidden, fn):
    if hidden is None:
        return None
    return tuple(fn(h) for h in hidden) if isinstance(hidden, (tuple, list)) else fn(hidden)


def _gather_streams(h, world: int):
    """[layers, B/world, H] on each rank → [layers, B, H], the ranks' streams in order (a
    collective: every rank must call it)."""
    if world == 1:
        return h
    import torch.distributed as dist

    parts = [torch.empty_like(h) for _ in range(world)]
    dist.all_gather(parts, h.contiguous())
    return torch.cat(parts, dim=1)


def train(args) -> dict:
    """Train (or resume) as the `train` subcommand does; returns a summary dict."""
    world, rank, local_rank = _dist_env()
    device = _device(args.device, local_rank)
    distributed = world > 1
    if distributed:
        import torch.distributed as dist

        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")

    resume = lm.load_checkpoint(args.resume) if args.resume else None
    if resume is not None:
        model, vocab = lm.model_from_checkpoint(resume)
        corpus = lm.Corpus(args.data, vocab=vocab)
        config = resume["train_config"]
        # What may change on resume: how far to go, where to write, how to show it.
        for key in ("epochs", "checkpoint", "plot", "progress", "max_steps", "save_every"):
            config[key] = getattr(args, key)
    else:
        corpus = lm.Corpus(args.data)
        vocab = corpus.vocab
        config = {k: v for k, v in vars(args).items() if k not in ("func", "resume", "command")}
        if config["lr"] is None:
            config["lr"] = 20.0 if config["optimizer"] == "sgd" else 1e-3
        torch.manual_seed(config["seed"])
        model = lm.RNNLanguageModel(
            len(vocab),
            config["emb_size"],
            config["hidden_size"],
            config["layers"],
            rnn_type=config["rnn"],
            dropout=config["dropout"],
            tie_weights=config["tie_weights"],
            projection=config["projection"],
            output=config["output"],
            num_sampled=config["num_sampled"],
            sampler=config["sampler"],
            counts=vocab.counts,
            power=config["power"],
            init_range=config["init_range"],
            sparse=config["sparse"],
            eval_chunk=config["eval_chunk"],
        )
    model.to(device)

    optimizer = lm.make_optimizer(model, config["optimizer"], config["lr"])
    schedule = lm.LRSchedule(config["lr"], config["lr_decay"], config["decay_after"])
    history: List[dict] = []
    start_epoch = 0
    position = None
    if resume is not None:
        optimizer.load_state_dict(resume["optimizer"])
        schedule.load_state_dict(resume["schedule"])
        history = resume["history"]
        start_epoch = resume["epoch"]
        position = resume.get("position")
        lm.set_rng_state(resume["rng"])
    schedule.apply(optimizer)

    train_data = lm.shard_rows(lm.batchify(corpus["train"], config["batch_size"]), rank, world).to(
        device
    )
    valid_data = lm.batchify(corpus["valid"], config["eval_batch_size"]).to(device)
    test_data = lm.batchify(corpus["test"], config["eval_batch_size"]).to(device)

    runner = model
    if distributed:
        from torch.nn.parallel import DistributedDataParallel

        runner = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )

    nparams = sum(p.numel() for p in model.parameters())
    if resume is None:
        _log(
            rank,
            f"vocab {len(vocab)}  train {corpus['train'].numel()} tokens  "
            f"params {nparams:,}  output {config['output']}  processes {world}  device {device}",
        )
    steps_per_epoch = lm.num_bptt_batches(train_data, config["bptt"])
    if config.get("max_steps"):
        steps_per_epoch = min(steps_per_epoch, config["max_steps"])
    # The bar redraws one line with carriage returns: only worth it on a terminal.
    show_bar = config["progress"] if config["progress"] is not None else sys.stderr.isatty()
    # Mid-epoch checkpoints only when there is somewhere to write them (gathering the hidden
    # state is a collective and a device-to-host copy).
    save_every = (config.get("save_every") or 0) if config.get("checkpoint") else 0

    def checkpoint(finished_epochs: int, position: Optional[dict] = None) -> None:
        if rank == 0 and config.get("checkpoint"):
            lm.save_checkpoint(
                config["checkpoint"],
                model=model,
                vocab=vocab,
                optimizer=optimizer,
                schedule=schedule,
                epoch=finished_epochs,
                history=history,
                train_config=config,
                position=position,
            )

    for epoch in range(start_epoch + 1, config["epochs"] + 1):
        progress = lm.Progress(steps_per_epoch, f"epoch {epoch}", enabled=rank == 0 and show_bar)
        resumed = {}
        if position is not None:
            # The global batch's hidden state, saved by rank 0: take this rank's streams.
            resumed = dict(
                hidden=_map_hidden(
                    position["hidden"],
                    lambda h: lm.shard_rows(h, rank, world, dim=1).contiguous().to(device),
                ),
                totals=position["totals"],
            )
            position = None

        def save_mid_epoch(step, hidden, totals, epoch=epoch):
            if not save_every or step % save_every or step >= steps_per_epoch:
                return
            hidden = _map_hidden(hidden, lambda h: _gather_streams(h.detach(), world).cpu())
            checkpoint(epoch - 1, dict(epoch=epoch, step=step, hidden=hidden, totals=dict(totals)))

        stats = lm.train_epoch(
            runner,
            train_data,
            optimizer,
            bptt=config["bptt"],
            clip=config["clip"],
            max_steps=config.get("max_steps"),
            world_size=world,
            progress=progress,
            on_step=save_mid_epoch,
            **resumed,
        )
        # Every rank evaluates the whole validation set on its identical replica: the same
        # number everywhere drives the same learning-rate decision without a collective.
        val_ppl = lm.evaluate(model, valid_data, config["bptt"])
        lr_used = schedule.lr
        row = dict(
            epoch=epoch,
            train_loss=stats["loss"],
            val_ppl=val_ppl,
            lr=lr_used,
            seconds=stats["seconds"],
            tokens_per_s=stats["tokens"] / max(stats["seconds"], 1e-9),
        )
        history.append(row)
        _log(
            rank,
            f"epoch {epoch:3d} | train loss {stats['loss']:.3f} | valid ppl {val_ppl:9.2f} | "
            f"lr {lr_used:.4g} | {stats['seconds']:.1f} s | {row['tokens_per_s']:,.0f} tok/s",
        )
        schedule.step(epoch, val_ppl)
        schedule.apply(optimizer)
        checkpoint(epoch)
    test_ppl = lm.evaluate(model, test_data, config["bptt"])
    _log(rank, f"test ppl {test_ppl:.2f}")
    if rank == 0 and config.get("plot") and history:
        plot_runs([(config["output"], history)], config["plot"])
    if distributed:
        import torch.distributed as dist

        dist.destroy_process_group()
    return dict(history=history, test_ppl=test_ppl, model=model, vocab=vocab, config=config)


def cmd_train(args) -> None:
    train(args)


def cmd_eval(args) -> None:
    state = lm.load_checkpoint(args.checkpoint)
    model, vocab = lm.model_from_checkpoint(state)
    model.to(_device(args.device, 0))
    if args.eval_chunk:
        model.head.eval_chunk = args.eval_chunk
    corpus = lm.Corpus(args.data, vocab=vocab, splits=(args.split,))
    # By default the streams and BPTT length training evaluated with, so the figure matches
    # the "test ppl" line of the run (the carried state makes it depend on both, slightly).
    trained = state.get("train_config", {})
    batch_size = args.batch_size or trained.get("eval_batch_size", 10)
    bptt = args.bptt or trained.get("bptt", 35)
    data = lm.batchify(corpus[args.split], batch_size).to(next(model.parameters()).device)
    ppl = lm.evaluate(model, data, bptt)
    print(f"{args.split} ppl {ppl:.2f}")


def cmd_generate(args) -> None:
    state = lm.load_checkpoint(args.checkpoint)
    model, vocab = lm.model_from_checkpoint(state)
    model.to(_device(args.device, 0))
    words = lm.generate(
        model,
        vocab,
        args.prompt,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        seed=args.seed,
    )
    text = " ".join(w if w != lm.EOS else "\n" for w in words)
    print((args.prompt + " " + text).strip())


def cmd_compare(args) -> None:
    labels = args.labels or []
    if labels and len(labels) != len(args.runs):
        raise SystemExit(f"--labels has {len(labels)} names for {len(args.runs)} runs")
    runs = []
    for i, path in enumerate(args.runs):
        state = lm.load_checkpoint(path)
        label = (
            labels[i] if labels else f"{state['model_config']['output']} ({os.path.basename(path)})"
        )
        runs.append((label, state["history"]))
        best = min(h["val_ppl"] for h in state["history"]) if state["history"] else math.nan
        print(f"{label}: {len(state['history'])} epochs, best valid ppl {best:.2f}")
    plot_runs(runs, args.plot)
    print(f"wrote {args.plot}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({label: h for label, h in runs}, f, indent=1)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fastsoftmax.lm", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a language model")
    t.add_argument("--data", required=True, help="folder with train/valid/test token files")
    t.add_argument("--output", choices=lm.OUTPUTS, default="full")
    t.add_argument("--rnn", choices=("lstm", "gru"), default="lstm")
    t.add_argument("--emb-size", type=int, default=200)
    t.add_argument("--hidden-size", type=int, default=200)
    t.add_argument("--layers", type=int, default=2)
    t.add_argument("--dropout", type=float, default=0.0)
    t.add_argument("--tie-weights", action="store_true")
    t.add_argument(
        "--projection", action="store_true", help="hidden→embedding projection before the output"
    )
    t.add_argument("--num-sampled", type=int, default=1024)
    t.add_argument("--sampler", choices=("unigram", "log_uniform"), default="unigram")
    t.add_argument("--power", type=float, default=0.75)
    t.add_argument("--init-range", type=float, default=0.1)
    t.add_argument(
        "--sparse", action="store_true", help="sparse embedding/output gradients (SGD only)"
    )
    t.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    t.add_argument(
        "--lr",
        type=float,
        default=None,
        help="default 20 (sgd) or 1e-3 (adam). The loss is the per-token mean, so lr 20 and "
        "clip 0.25 are Zaremba et al.'s lr 1 and clip 5 on the loss summed over 20 BPTT steps",
    )
    t.add_argument(
        "--lr-decay", type=float, default=2.0, help="divisor applied when valid ppl stalls"
    )
    t.add_argument(
        "--decay-after",
        type=int,
        default=None,
        help="also divide after every epoch from this one on (Zaremba small: 4)",
    )
    t.add_argument("--clip", type=float, default=0.25, help="max gradient norm (0: off)")
    t.add_argument("--epochs", type=int, default=13)
    t.add_argument(
        "--save-every",
        type=int,
        default=0,
        metavar="STEPS",
        help="also checkpoint every STEPS steps within an epoch (--resume continues from there)",
    )
    t.add_argument("--batch-size", type=int, default=20, help="global batch (streams)")
    t.add_argument("--eval-batch-size", type=int, default=10)
    t.add_argument("--bptt", type=int, default=20)
    t.add_argument("--max-steps", type=int, default=None, help="cap on steps per epoch")
    t.add_argument("--eval-chunk", type=int, default=1 << 22, help="logits per evaluation chunk")
    t.add_argument("--seed", type=int, default=1234)
    t.add_argument("--device", default=None)
    t.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    t.add_argument("--checkpoint", default=None, help="written after every epoch")
    t.add_argument("--resume", default=None, help="checkpoint to continue from")
    t.add_argument("--plot", default=None, help="PNG of validation perplexity per epoch")
    t.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="progress bar even when stderr is not a terminal",
    )
    t.add_argument("--no-progress", dest="progress", action="store_false")
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("eval", help="exact perplexity of a checkpoint")
    e.add_argument("--checkpoint", required=True)
    e.add_argument("--data", required=True)
    e.add_argument("--split", choices=("train", "valid", "test"), default="test")
    e.add_argument("--batch-size", type=int, default=None, help="default: as in training")
    e.add_argument("--bptt", type=int, default=None, help="default: as in training")
    e.add_argument("--eval-chunk", type=int, default=None)
    e.add_argument("--device", default=None)
    e.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    e.set_defaults(func=cmd_eval)

    g = sub.add_parser("generate", help="continue a prompt")
    g.add_argument("--checkpoint", required=True)
    g.add_argument("--prompt", default="")
    g.add_argument("--max-tokens", type=int, default=50)
    g.add_argument("--temperature", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=None)
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--device", default=None)
    g.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    g.set_defaults(func=cmd_generate)

    c = sub.add_parser("compare", help="plot validation perplexity of several runs")
    c.add_argument("runs", nargs="+", help="checkpoints written by train")
    c.add_argument("--labels", nargs="*", default=None)
    c.add_argument("--plot", default="compare.png")
    c.add_argument("--json", default=None, help="also write the histories as JSON")
    c.set_defaults(func=cmd_compare)
    return p


def main(argv: Optional[List[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    try:
        args.func(args)
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
