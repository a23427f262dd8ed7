"""Train, evaluate and run attention seq2seq models from the command line.

    python -m fastsoftmax.seq2seq train --data FILE --task {pairs,chars} \\
        --attention {dot,general,concat,none} --output {full,sampled} --checkpoint CKPT ...
    python -m fastsoftmax.seq2seq translate --checkpoint CKPT < sources.txt
    python -m fastsoftmax.seq2seq eval --checkpoint CKPT [--data FILE]

Training holds out a seeded fraction of the data (--valid-fraction) and reports, per epoch, the
training loss, the exact validation cross entropy, exact-match accuracy and, for word tasks,
corpus BLEU. The held-out split is stored in the checkpoint's settings so `eval` and `--resume`
see the same split.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Sequence

import torch

from .models.seq2seq import (
    EOS,
    Batch,
    Seq2Seq,
    Vocab,
    batches,
    corpus_bleu,
    detokenize,
    encode_pairs,
    read_pairs,
    split_indices,
    tokenize,
)


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most every `interval` seconds."""

    def __init__(
        self, total: int, desc: str = "", enabled: bool = True, interval: float = 0.25, stream=None
    ):
        self.total, self.desc, self.enabled, self.interval = total, desc, enabled, interval
        self.stream = stream if stream is not None else sys.stderr
        self.n = 0
        self.start = self.last = time.perf_counter()
        self.info = ""

    def update(self, n: int = 1, info: str = "") -> None:
        self.n += n
        self.info = info or self.info
        now = time.perf_counter()
        if self.enabled and (now - self.last >= self.interval or self.n >= self.total):
            self.last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        frac = self.n / self.total if self.total else 1.0
        width = 24
        filled = round(width * frac)
        rate = self.n / max(now - self.start, 1e-9)
        eta = (self.total - self.n) / rate if rate > 0 else float("inf")
        line = (
            f"\r{self.desc} [{'#' * filled}{'.' * (width - filled)}] {self.n}/{self.total} "
            f"{rate:.1f} it/s eta {eta:.0f}s {self.info}"
        )
        self.stream.write(line.ljust(100))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()


# -- data ------------------------------------------------------------------------------------
def load_task(
    data: str,
    task: str,
    *,
    max_words: int | None = None,
    valid_fraction: float = 0.1,
    seed: int = 0,
    limit: int | None = None,
    src_vocab_size: int | None = None,
    tgt_vocab_size: int | None = None,
    vocabs: tuple[Vocab, Vocab] | None = None,
) -> dict:
    """Reads a pair file, splits it (seeded) and builds vocabularies from the training part
    (or reuses `vocabs`). limit keeps the first `limit` usable pairs."""
    pairs = read_pairs(data, task, max_words=max_words)
    if limit is not None:
        pairs = pairs[:limit]
    return split_task(
        pairs,
        task,
        valid_fraction=valid_fraction,
        seed=seed,
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
        vocabs=vocabs,
    )


def split_task(
    pairs: Sequence[tuple[str, str]],
    task: str,
    *,
    valid_fraction: float = 0.1,
    seed: int = 0,
    src_vocab_size: int | None = None,
    tgt_vocab_size: int | None = None,
    vocabs: tuple[Vocab, Vocab] | None = None,
) -> dict:
    tr, va = split_indices(len(pairs), valid_fraction, seed)
    train_pairs = [pairs[i] for i in tr]
    valid_pairs = [pairs[i] for i in va]
    if vocabs is None:
        src_vocab = Vocab.build((tokenize(s, task) for s, _ in train_pairs), src_vocab_size)
        tgt_vocab = Vocab.build((tokenize(t, task) for _, t in train_pairs), tgt_vocab_size)
    else:
        src_vocab, tgt_vocab = vocabs
    return {
        "task": task,
        "train_pairs": train_pairs,
        "valid_pairs": valid_pairs,
        "src_vocab": src_vocab,
        "tgt_vocab": tgt_vocab,
        "train": encode_pairs(train_pairs, task, src_vocab, tgt_vocab),
        "valid": encode_pairs(valid_pairs, task, src_vocab, tgt_vocab),
    }


def target_counts(examples, vocab_size: int) -> torch.Tensor:
    """Frequency of each target id (with one <eos> per example) for the sampled head."""
    counts = torch.zeros(vocab_size, dtype=torch.float64)
    for _, t in examples:
        counts += torch.bincount(torch.tensor(t + [EOS], dtype=torch.long), minlength=vocab_size)
    return counts


# -- evaluation ------------------------------------------------------------------------------
@torch.no_grad()
def evaluate(
    model: Seq2Seq,
    pairs: Sequence[tuple[str, str]],
    examples,
    task: str,
    tgt_vocab: Vocab,
    *,
    beam_size: int = 1,
    alpha: float = 1.0,
    batch_size: int = 256,
    max_len: int | None = None,
    device="cpu",
) -> dict:
    """Exact cross entropy per target token, exact-match accuracy of decoded outputs (token
    sequences equal) and corpus BLEU (word tasks). Batches keep data order, so hyps[i] answers
    pairs[i]."""
    was_training = model.training
    model.eval()
    loss_sum, tokens = 0.0, 0
    hyps: list[list[str]] = []
    refs = [tokenize(t, task) for _, t in pairs]
    if max_len is None:
        max_len = max(len(r) for r in refs) * 2 + 5
    for i in range(0, len(examples), batch_size):
        b = Batch(examples[i : i + batch_size]).to(device)
        n = int((b.tgt_out != 0).sum())
        loss_sum += float(model(b.src, b.src_len, b.tgt_in, b.tgt_out)) * n
        tokens += n
        out = model.decode(b.src, b.src_len, beam_size=beam_size, max_len=max_len, alpha=alpha)
        hyps += [tgt_vocab.decode(row.tolist()) for row in out]
    model.train(was_training)
    exact = sum(h == r for h, r in zip(hyps, refs)) / max(len(refs), 1)
    res = {"loss": loss_sum / max(tokens, 1), "exact": 100.0 * exact, "hyps": hyps}
    if task == "pairs":
        res["bleu"] = corpus_bleu(hyps, refs)
    return res


def translate_lines(
    model: Seq2Seq,
    lines: Sequence[str],
    task: str,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    *,
    beam_size: int = 1,
    alpha: float = 1.0,
    max_len: int = 100,
    batch_size: int = 64,
    device="cpu",
) -> list[str]:
    model.eval()
    out = []
    for i in range(0, len(lines), batch_size):
        chunk = lines[i : i + batch_size]
        ids = []
        for n, line in enumerate(chunk, i + 1):
            toks = tokenize(line.strip() if task == "chars" else line, task)
            if not toks:
                raise ValueError(f"input line {n} is empty")
            ids.append((src_vocab.encode(toks), []))
        b = Batch(ids).to(device)
        rows = model.decode(b.src, b.src_len, beam_size=beam_size, max_len=max_len, alpha=alpha)
        out += [detokenize(tgt_vocab.decode(r.tolist()), task) for r in rows]
    return out


def save_heatmap(
    model: Seq2Seq,
    source: str,
    task: str,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    path: str,
    max_len: int | None = None,
    device="cpu",
) -> str:
    """Greedy-decodes `source` and draws its attention weights (rows: output tokens, columns:
    source tokens) to a PNG. Returns the decoded output."""
    if model.attention is None:
        raise ValueError("a heatmap needs a model with attention")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model.eval()
    src_toks = tokenize(source, task)
    b = Batch([(src_vocab.encode(src_toks), [])]).to(device)
    if max_len is None:
        max_len = 2 * len(src_toks) + 10
    tokens, _, attn = model.greedy(b.src, b.src_len, max_len)
    row = tokens[0].tolist()
    n_out = row.index(EOS) + 1 if EOS in row else len(row)
    # Rows name every emitted token, <eos> included, so they line up with the weights.
    out_toks = [tgt_vocab.itos[i] for i in row[:n_out]]
    weights = attn[0, :n_out].cpu().numpy()
    fig, ax = plt.subplots(
        figsize=(max(4, 0.35 * len(src_toks) + 1.5), max(3, 0.35 * len(out_toks) + 1.5))
    )
    ax.imshow(weights, cmap="gray_r", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(src_toks)))
    ax.set_xticklabels([t if t != " " else "␣" for t in src_toks], rotation=90)
    ax.set_yticks(range(len(out_toks)))
    ax.set_yticklabels(out_toks)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return detokenize(tgt_vocab.decode(row), task)


# -- training --------------------------------------------------------------------------------
MODEL_KEYS = (
    "embed_dim",
    "hidden_size",
    "num_layers",
    "bidirectional",
    "reverse_source",
    "attention",
    "peeky",
    "output",
    "num_sampled",
    "dropout",
)
DATA_KEYS = (
    "data",
    "task",
    "max_words",
    "valid_fraction",
    "seed",
    "limit",
    "src_vocab_size",
    "tgt_vocab_size",
)


def train(
    settings: dict,
    *,
    data: dict | None = None,
    log=print,
    progress: bool = True,
    device="cpu",
    checkpoint: str | None = None,
    resume: bool = False,
    eval_every: int = 1,
    eval_limit: int | None = None,
) -> dict:
    """Trains per `settings` (the CLI options as a dict) and returns dict(model, history, data).

    `data` may be given ready-made (from split_task) instead of settings['data']. With
    checkpoint, the model, optimizer and vocabularies are saved after every epoch; with resume,
    training continues from that file up to settings['epochs'] epochs in total."""
    s = dict(settings)
    torch.manual_seed(s.get("seed", 0))
    start_epoch, history, opt_state, ckpt = 0, [], None, None
    if resume:
        if not checkpoint or not os.path.exists(checkpoint):
            raise FileNotFoundError(f"--resume: checkpoint {checkpoint!r} does not exist")
        ckpt = torch.load(checkpoint, map_location="cpu", weights_only=False)
        epochs = s.get("epochs")
        s.update(ckpt["settings"])
        if epochs is not None:
            s["epochs"] = epochs
        start_epoch, history, opt_state = ckpt["epoch"], ckpt["history"], ckpt["optimizer"]
    if data is None:
        vocabs = None
        if ckpt is not None:
            vocabs = (Vocab(ckpt["src_vocab"]), Vocab(ckpt["tgt_vocab"]))
        data = load_task(
            s["data"],
            s["task"],
            max_words=s.get("max_words"),
            valid_fraction=s.get("valid_fraction", 0.1),
            seed=s.get("seed", 0),
            limit=s.get("limit"),
            src_vocab_size=s.get("src_vocab_size"),
            tgt_vocab_size=s.get("tgt_vocab_size"),
            vocabs=vocabs,
        )
    task, src_vocab, tgt_vocab = data["task"], data["src_vocab"], data["tgt_vocab"]
    if ckpt is not None:
        model = Seq2Seq.from_checkpoint(ckpt["model"])
    else:
        kw = {k: s[k] for k in MODEL_KEYS if k in s}
        counts = None
        if kw.get("output") == "sampled":
            counts = target_counts(data["train"], len(tgt_vocab))
        model = Seq2Seq(len(src_vocab), len(tgt_vocab), counts=counts, **kw)
    model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=s.get("lr", 1e-3))
    if opt_state is not None:
        opt.load_state_dict(opt_state)
    batch_size = s.get("batch_size", 64)
    valid_pairs, valid = data["valid_pairs"], data["valid"]
    if eval_limit is not None:
        valid_pairs, valid = valid_pairs[:eval_limit], valid[:eval_limit]
    log(
        f"{task}: {len(data['train'])} train / {len(valid)} held-out pairs, vocab "
        f"{len(src_vocab)} → {len(tgt_vocab)}, {sum(p.numel() for p in model.parameters())} "
        f"parameters, output {model.config['output']}, attention {model.attention}"
    )
    for epoch in range(start_epoch, s.get("epochs", 10)):
        model.train()
        n_batches = math.ceil(len(data["train"]) / batch_size)
        bar = ProgressBar(n_batches, f"epoch {epoch + 1}", enabled=progress)
        t0 = time.perf_counter()
        loss_sum, seen = 0.0, 0
        for b in batches(data["train"], batch_size, shuffle=True, seed=s.get("seed", 0) + epoch):
            b.to(device)
            loss = model(b.src, b.src_len, b.tgt_in, b.tgt_out)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), s.get("clip", 5.0))
            opt.step()
            loss_sum += loss.item()
            seen += 1
            bar.update(1, f"loss {loss_sum / seen:.4f}")
        bar.close()
        if device != "cpu" and torch.cuda.is_available():
            torch.cuda.synchronize()
        train_time = time.perf_counter() - t0
        row = {
            "epoch": epoch + 1,
            "train_loss": loss_sum / max(seen, 1),
            "train_s": train_time,
            "examples_per_s": len(data["train"]) / train_time,
        }
        if valid and ((epoch + 1) % eval_every == 0 or epoch + 1 == s.get("epochs", 10)):
            ev = evaluate(
                model,
                valid_pairs,
                valid,
                task,
                tgt_vocab,
                beam_size=s.get("beam_size") or 1,
                device=device,
            )
            row.update(valid_loss=ev["loss"], exact=ev["exact"])
            if "bleu" in ev:
                row["bleu"] = ev["bleu"]
        history.append(row)
        log(
            "epoch {epoch}: train loss {train_loss:.4f} ({train_s:.1f} s, {examples_per_s:.0f} "
            "ex/s)".format(**row)
            + (
                f", held-out loss {row['valid_loss']:.4f}, exact match {row['exact']:.2f}%"
                if "exact" in row
                else ""
            )
            + (f", BLEU {row['bleu']:.2f}" if "bleu" in row else "")
        )
        if checkpoint:
            keys = DATA_KEYS + MODEL_KEYS + ("epochs", "batch_size", "lr", "beam_size", "clip")
            save = {k: s[k] for k in keys if s.get(k) is not None}
            state = {
                "model": model.checkpoint(),
                "optimizer": opt.state_dict(),
                "epoch": epoch + 1,
                "history": history,
                "settings": save,
                "src_vocab": src_vocab.itos,
                "tgt_vocab": tgt_vocab.itos,
            }
            tmp = checkpoint + ".tmp"
            torch.save(state, tmp)
            os.replace(tmp, checkpoint)  # never leave a half-written checkpoint behind
    return {"model": model, "history": history, "data": data}


def load_checkpoint(path: str, device="cpu"):
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path!r} does not exist")
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    model = Seq2Seq.from_checkpoint(ckpt["model"]).to(device).eval()
    return model, ckpt, Vocab(ckpt["src_vocab"]), Vocab(ckpt["tgt_vocab"])


# -- command line ----------------------------------------------------------------------------
def _positive(v: str) -> int:
    n = int(v)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {v}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m fastsoftmax.seq2seq",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a model on a pair file")
    t.add_argument("--data", required=True, help="pair file (source TAB target, or source_target)")
    t.add_argument("--task", required=True, choices=["pairs", "chars"])
    t.add_argument("--attention", default="general", choices=["dot", "general", "concat", "none"])
    t.add_argument("--output", default="full", choices=["full", "sampled"])
    t.add_argument("--num-sampled", type=_positive, default=64)
    t.add_argument("--embed-dim", type=_positive, default=64)
    t.add_argument("--hidden-size", type=_positive, default=128)
    t.add_argument("--num-layers", type=_positive, default=1)
    t.add_argument("--bidirectional", action="store_true")
    t.add_argument("--reverse-source", action="store_true")
    t.add_argument("--peeky", action="store_true")
    t.add_argument("--dropout", type=float, default=0.0)
    t.add_argument("--epochs", type=_positive, default=10)
    t.add_argument("--batch-size", type=_positive, default=64)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument(
        "--max-words",
        type=_positive,
        default=None,
        help="drop pairs with more words than this on either side (word tasks)",
    )
    t.add_argument("--src-vocab-size", type=_positive, default=None)
    t.add_argument("--tgt-vocab-size", type=_positive, default=None)
    t.add_argument("--limit", type=_positive, default=None, help="use the first N pairs only")
    t.add_argument("--valid-fraction", type=float, default=0.1)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--beam-size", type=_positive, default=1, help="decoding for held-out scores")
    t.add_argument("--checkpoint", help="saved after every epoch")
    t.add_argument("--resume", action="store_true", help="continue training from --checkpoint")
    t.add_argument("--heatmap", help="write the attention heatmap of one held-out example here")
    t.add_argument("--heatmap-index", type=int, default=0)
    t.add_argument("--device", default="cpu")
    t.add_argument(
        "--threads",
        type=_positive,
        default=None,
        help="CPU threads (default: torch's); 1 is often fastest for small models on a busy machine",
    )
    t.add_argument("--no-progress", action="store_true")

    r = sub.add_parser("translate", help="translate lines read from stdin")
    r.add_argument("--checkpoint", required=True)
    r.add_argument("--beam-size", type=_positive, default=1)
    r.add_argument("--alpha", type=float, default=1.0, help="length normalisation exponent")
    r.add_argument("--max-len", type=_positive, default=100)
    r.add_argument("--device", default="cpu")
    r.add_argument(
        "--threads",
        type=_positive,
        default=None,
        help="CPU threads (default: torch's); 1 is often fastest for small models on a busy machine",
    )

    e = sub.add_parser("eval", help="score a checkpoint on its held-out split (or on --data)")
    e.add_argument("--checkpoint", required=True)
    e.add_argument("--data", help="score all of this file instead of the held-out split")
    e.add_argument("--beam-size", type=_positive, default=1)
    e.add_argument("--alpha", type=float, default=1.0)
    e.add_argument("--heatmap")
    e.add_argument("--heatmap-index", type=int, default=0)
    e.add_argument("--device", default="cpu")
    e.add_argument(
        "--threads",
        type=_positive,
        default=None,
        help="CPU threads (default: torch's); 1 is often fastest for small models on a busy machine",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args) -> int:
    log = lambda msg: print(msg, file=sys.stderr, flush=True)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.command == "train":
        if args.resume and not args.checkpoint:
            raise ValueError("--resume needs --checkpoint")
        settings = {
            k: v
            for k, v in vars(args).items()
            if k
            not in (
                "command",
                "checkpoint",
                "resume",
                "heatmap",
                "heatmap_index",
                "device",
                "threads",
                "no_progress",
            )
        }
        settings["attention"] = None if args.attention == "none" else args.attention
        res = train(
            settings,
            log=log,
            progress=not args.no_progress and sys.stderr.isatty(),
            device=args.device,
            checkpoint=args.checkpoint,
            resume=args.resume,
        )
        if args.heatmap:
            _heatmap(res["model"], res["data"], args.heatmap, args.heatmap_index, args.device, log)
        return 0
    model, ckpt, src_vocab, tgt_vocab = load_checkpoint(args.checkpoint, args.device)
    task = ckpt["settings"]["task"]
    if args.command == "translate":
        lines = [ln.rstrip("\n") for ln in sys.stdin]
        for out in translate_lines(
            model,
            lines,
            task,
            src_vocab,
            tgt_vocab,
            beam_size=args.beam_size,
            alpha=args.alpha,
            max_len=args.max_len,
            device=args.device,
        ):
            print(out)
        return 0
    s = ckpt["settings"]
    if args.data:
        pairs = read_pairs(args.data, task, max_words=s.get("max_words"))
        data = {
            "task": task,
            "valid_pairs": pairs,
            "src_vocab": src_vocab,
            "tgt_vocab": tgt_vocab,
            "valid": encode_pairs(pairs, task, src_vocab, tgt_vocab),
        }
    else:
        data = load_task(
            s["data"],
            task,
            max_words=s.get("max_words"),
            valid_fraction=s["valid_fraction"],
            seed=s["seed"],
            limit=s.get("limit"),
            vocabs=(src_vocab, tgt_vocab),
        )
    ev = evaluate(
        model,
        data["valid_pairs"],
        data["valid"],
        task,
        tgt_vocab,
        beam_size=args.beam_size,
        alpha=args.alpha,
        device=args.device,
    )
    print(
        f"pairs {len(data['valid'])}  loss {ev['loss']:.4f}  exact match {ev['exact']:.2f}%"
        + (f"  BLEU {ev['bleu']:.2f}" if "bleu" in ev else "")
    )
    if args.heatmap:
        _heatmap(model, data, args.heatmap, args.heatmap_index, args.device, log)
    return 0


def _heatmap(model, data, path, index, device, log):
    pairs = data["valid_pairs"] or data.get("train_pairs", [])
    if not pairs:
        raise ValueError("no example to draw a heatmap for")
    if not 0 <= index < len(pairs):
        raise ValueError(f"--heatmap-index {index} is outside the {len(pairs)} held-out pairs")
    src, ref = pairs[index]
    out = save_heatmap(
        model, src, data["task"], data["src_vocab"], data["tgt_vocab"], path, device=device
    )
    log(f"heatmap of {src!r} → {out!r} (reference {ref!r}) written to {path}")


if __name__ == "__main__":
    sys.exit(main())
