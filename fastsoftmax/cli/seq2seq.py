"""Train, evaluate and run attention seq2seq models.

    fastsoftmax-seq2seq train --data FILE --task {pairs,chars} \\
        --attention {dot,general,concat,none} --output {HEADS} [--checkpoint CKPT]
    fastsoftmax-seq2seq train ... --attention-mode hard [--baseline {none,mean,value}] \\
        [--entropy-bonus 0.01]
    fastsoftmax-seq2seq train ... --alignment {local-m,local-p} [--window 10]
    fastsoftmax-seq2seq train --resume CKPT [--epochs N]
    fastsoftmax-seq2seq translate --checkpoint CKPT < sources.txt
    fastsoftmax-seq2seq eval --checkpoint CKPT [--data FILE]

(or python -m fastsoftmax.cli.seq2seq). Training holds out a seeded fraction of the data
(--valid-fraction) and reports, per epoch, the training loss, the exact held-out cross
entropy, exact-match accuracy and, for word tasks, corpus BLEU. It always checkpoints, after
every epoch, to --checkpoint or a new seq2seq-<output>-<time>.pt here, and prints the path;
`eval` and --resume see the same held-out split. translate answers every input line, one
output line each; a line it cannot translate (empty) gets an empty output line and is named
on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


from ..atomic import check_writable
from ..models import seq2seq as s2s
from ..models.checkpoints import refuse_overwrite
from ..nn import HEADS
from . import (add_run_options, bind_commands, given_options, heads_in, main_of, new_parser,
               positive_int)


def cmd_train(args, argv) -> None:
    log = lambda msg: print(msg, file=sys.stderr, flush=True)
    given = given_options(build_parser, "train", argv)
    fields = {k: v for k, v in vars(args).items() if k in s2s.TrainConfig.__dataclass_fields__}
    refuse_overwrite(args.heatmap, "heatmap", "--heatmap", args.force)  # before training
    res = s2s.fit(s2s.TrainConfig(**fields), given=given & set(fields))
    if args.heatmap:
        _heatmap(res["model"], res["data"], args.heatmap, args.heatmap_index,
                 res["config"].device, log, args.force)


def cmd_translate(args, argv) -> None:
    state = s2s.load_checkpoint(args.checkpoint)
    model, src_vocab, tgt_vocab = s2s.model_from_checkpoint(state)
    model.to(args.device)
    lines = [ln.rstrip("\n") for ln in sys.stdin]
    outputs, bad = s2s.translate_lines(
        model, lines, state["train_config"]["task"], src_vocab, tgt_vocab,
        beam_size=args.beam_size, alpha=args.alpha, max_len=args.max_len, device=args.device)
    for out in outputs:
        print(out)
    for number, reason in bad:
        print(f"warning: input line {number}: {reason}; its output line is empty",
              file=sys.stderr)


def cmd_eval(args, argv) -> None:
    log = lambda msg: print(msg, file=sys.stderr, flush=True)
    state = s2s.load_checkpoint(args.checkpoint)
    model, src_vocab, tgt_vocab = s2s.model_from_checkpoint(state)
    model.to(args.device)
    s = state["train_config"]
    task = s["task"]
    if args.data:
        pairs = s2s.read_pairs(args.data, task, max_words=s.get("max_words"),
                               encoding=args.encoding)
        data = {"task": task, "valid_pairs": pairs, "src_vocab": src_vocab,
                "tgt_vocab": tgt_vocab,
                "valid": s2s.encode_pairs(pairs, task, src_vocab, tgt_vocab)}
        src_oov = src_vocab.oov_rate([t for p, _ in pairs for t in s2s.tokenize(p, task)])
        tgt_oov = tgt_vocab.oov_rate([t for _, p in pairs for t in s2s.tokenize(p, task)])
        log(f"{args.data}: {src_oov:.1%} of the source and {tgt_oov:.1%} of the target tokens "
            f"are outside the model's vocabularies")
    else:
        data = s2s.load_task(s["data"], task, max_words=s.get("max_words"),
                             valid_fraction=s["valid_fraction"], seed=s["seed"],
                             limit=s.get("limit"), vocabs=(src_vocab, tgt_vocab),
                             encoding=s.get("encoding", "utf-8"))
    ev = s2s.evaluate(model, data["valid_pairs"], data["valid"], task, tgt_vocab,
                      beam_size=args.beam_size, alpha=args.alpha, device=args.device)
    print(f"pairs {len(data['valid'])}  loss {ev['loss']:.4f}  exact match {ev['exact']:.2f}%"
          + (f"  BLEU {ev['bleu']:.2f}" if "bleu" in ev else ""))
    if args.heatmap:
        _heatmap(model, data, args.heatmap, args.heatmap_index, args.device, log, args.force)


def _heatmap(model, data, path, index, device, log, force):
    import os

    check_writable(path, "heatmap")
    if os.path.exists(path) and not force:
        raise ValueError(f"heatmap {path} already exists; choose another --heatmap or pass "
                         f"--force to overwrite it")
    pairs = data["valid_pairs"] or data.get("train_pairs", [])
    if not pairs:
        raise ValueError("no example to draw a heatmap for")
    if not 0 <= index < len(pairs):
        raise ValueError(f"--heatmap-index {index} is outside the {len(pairs)} held-out pairs")
    src, ref = pairs[index]
    out = s2s.save_heatmap(model, src, data["task"], data["src_vocab"], data["tgt_vocab"], path,
                           device=device)
    log(f"heatmap of {src!r} → {out!r} (reference {ref!r}) written to {path}")


# What is read of the pair file, positive integers (None: no limit): (flag, help).
PAIR_LIMITS = (
    ("--max-words", "drop pairs with more words than this on either side (word tasks)"),
    ("--src-vocab-size", "most frequent source tokens kept (None: all)"),
    ("--tgt-vocab-size", "most frequent target tokens kept (None: all)"),
    ("--limit", "use the first N pairs"))


def _train_parser(t: argparse.ArgumentParser) -> None:
    d = s2s.TrainConfig()
    t.add_argument("--data", default=None, help="pair file (source TAB target, or "
                                                 "source_target); on resume: the checkpoint's")
    t.add_argument("--task", default=d.task, choices=s2s.TASKS,
                   help="pairs: words, TAB-separated; chars: characters, source_target")
    t.add_argument("--attention", default=d.attention,
                   choices=["dot", "general", "concat", "none"], help="Luong score")
    t.add_argument("--attention-mode", default=d.attention_mode, choices=s2s.ATTENTION_MODES,
                   help="soft: weighted mean of the source states; hard: one source state, "
                        "drawn in training (REINFORCE), argmax at inference")
    t.add_argument("--baseline", default=d.baseline, choices=s2s.BASELINES,
                   help="reward baseline, hard attention only; unset means value")
    t.add_argument("--entropy-bonus", type=float, default=d.entropy_bonus,
                   help="weight of the attention entropy bonus, hard attention only; unset "
                        "means 0.01")
    t.add_argument("--alignment", default=d.alignment, choices=s2s.ALIGNMENTS,
                   help="global: every source position; local-m: a window around p_t = t; "
                        "local-p: around a predicted p_t, Gaussian-weighted (Luong et al.)")
    t.add_argument("--window", type=positive_int, default=d.window,
                   help="half-width D of the local window, local alignment only; unset "
                        "means 10")
    t.add_argument("--output", default=d.output, choices=tuple(HEADS), help="output layer")
    t.add_argument("--num-sampled", type=positive_int, default=d.num_sampled,
                   help="samples per step of the sampled heads")
    t.add_argument("--embed-dim", type=positive_int, default=d.embed_dim,
                   help="token embedding size")
    t.add_argument("--hidden-size", type=positive_int, default=d.hidden_size, help="LSTM units")
    t.add_argument("--num-layers", type=positive_int, default=d.num_layers, help="LSTM layers")
    t.add_argument("--bidirectional", action="store_true", help="encoder reads both ways")
    t.add_argument("--reverse-source", action="store_true",
                   help="encoder reads the source back to front")
    t.add_argument("--peeky", action="store_true",
                   help="encoder summary fed to every decoder step")
    t.add_argument("--dropout", type=float, default=d.dropout, help="dropout rate")
    t.add_argument("--epochs", type=positive_int, default=d.epochs, help="total epochs of the run")
    t.add_argument("--batch-size", type=positive_int, default=d.batch_size, help="pairs per step")
    t.add_argument("--lr", type=float, default=d.lr, help="Adam learning rate")
    t.add_argument("--clip", type=float, default=d.clip, help="max gradient norm")
    for flag, text in PAIR_LIMITS:
        t.add_argument(flag, type=positive_int, help=text,
                       default=getattr(d, flag[2:].replace("-", "_")))
    t.add_argument("--valid-fraction", type=float, default=d.valid_fraction,
                   help="seeded share of the pairs held out")
    t.add_argument("--seed", type=int, default=d.seed, help="seed of the split and training")
    t.add_argument("--beam-size", type=positive_int, default=d.beam_size,
                   help="decoding for held-out scores")
    t.add_argument("--heatmap", help="write the attention heatmap of one held-out example here")
    t.add_argument("--heatmap-index", type=int, default=0, help="held-out pair drawn")
    add_run_options(t, d, "seq2seq", s2s.MAY_CHANGE_ON_RESUME, "--heatmap")


def build_parser() -> argparse.ArgumentParser:
    p, command = new_parser("fastsoftmax-seq2seq", heads_in(__doc__))
    t = command("train", "train (or resume) a model on a pair file")
    _train_parser(t)
    r = command("translate", "translate lines read from stdin")
    r.add_argument("--checkpoint", required=True, help="checkpoint written by train")
    r.add_argument("--beam-size", type=positive_int, default=1, help="1: greedy")
    r.add_argument("--alpha", type=float, default=1.0, help="length normalisation exponent")
    r.add_argument("--max-len", type=positive_int, default=100, help="longest output")
    r.add_argument("--device", default="cpu", help="cpu or cuda")
    e = command("eval", "score a checkpoint on its held-out split (or on --data)")
    e.add_argument("--checkpoint", required=True, help="checkpoint written by train")
    e.add_argument("--data", help="score all of this file instead of the held-out split")
    e.add_argument("--encoding", default="utf-8", help="text encoding of --data")
    e.add_argument("--beam-size", type=positive_int, default=1, help="1: greedy")
    e.add_argument("--alpha", type=float, default=1.0, help="length normalisation exponent")
    e.add_argument("--heatmap", help="PNG of one pair's attention")
    e.add_argument("--heatmap-index", type=int, default=0, help="pair drawn")
    e.add_argument("--force", action="store_true", help="overwrite an existing --heatmap")
    e.add_argument("--device", default="cpu", help="cpu or cuda")
    bind_commands(((t, cmd_train), (r, cmd_translate), (e, cmd_eval)))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return main_of(build_parser, argv, log_to="stderr")  # stdout carries translations


if __name__ == "__main__":
    sys.exit(main())
