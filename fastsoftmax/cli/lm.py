"""Train, evaluate, sample and compare recurrent language models.

    fastsoftmax-lm train --data DIR --output {HEADS} [...]
    fastsoftmax-lm train --resume CKPT [--epochs N] [...]
    fastsoftmax-lm eval --checkpoint CKPT --data DIR
    fastsoftmax-lm generate --checkpoint CKPT --prompt "..."
    fastsoftmax-lm compare RUN.pt [RUN.pt ...] [--plot FILE.png]

(or python -m fastsoftmax.cli.lm). Training always checkpoints, after every epoch, to
--checkpoint or to a new lm-<output>-<time>.pt in the working directory, and prints the path.
--resume continues a run exactly where it stopped; only the options listed under --resume
may differ from the checkpoint's, others are refused naming the flag.

Data-parallel under torchrun (torchrun --nproc_per_node N -m fastsoftmax.cli.lm train ...):
gloo on CPU, nccl on GPU; --batch-size is the global batch, split evenly over the ranks.
With --vocab-parallel N, each group of N ranks splits the output layer by rows and reads the
same streams (torchrun --nproc_per_node 4 ... --vocab-parallel 2: 2 data x 2 vocabulary).
"""

import argparse
import json
import math
import os
import sys
from typing import List, Optional

import torch

from ..atomic import atomic_open, check_writable
from ..models import lm
from ..nn import HEADS
from . import (add_run_options, bind_commands, given_options, heads_in, main_of, new_parser,
               non_negative_int, positive_int)

OOV_WARNING = 0.05


def cmd_train(args, argv) -> None:
    given = given_options(build_parser, "train", argv)
    fields = {k: v for k, v in vars(args).items() if k in lm.TrainConfig.__dataclass_fields__}
    lm.fit(lm.TrainConfig(**fields), given=given & set(fields))


def cmd_eval(args, argv) -> None:
    res = lm.evaluate_checkpoint(args.checkpoint, args.data, split=args.split,
                                 batch_size=args.batch_size, bptt=args.bptt, device=args.device,
                                 encoding=args.encoding,
                                 allow_vocab_mismatch=args.allow_vocab_mismatch)
    print(f"{res['split']} ppl {res['ppl']:.2f}  ({res['tokens']} tokens, "
          f"{res['oov']:.1%} of the words outside the vocabulary)")
    if res["oov"] > OOV_WARNING:
        print(f"warning: {res['oov']:.1%} of the words of {res['path']} are not in the model's "
              f"vocabulary and count as <unk>: this perplexity is not comparable to one on "
              f"the model's own data", file=sys.stderr)


def cmd_generate(args, argv) -> None:
    model, vocab = lm.model_from_checkpoint(lm.load_checkpoint(args.checkpoint))
    model.to(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    words = lm.generate(model, vocab, args.prompt, max_tokens=args.max_tokens,
                        temperature=args.temperature, top_k=args.top_k, seed=args.seed)
    text = " ".join(w if w != lm.EOS else "\n" for w in words)
    print((args.prompt + " " + text).strip())


def cmd_compare(args, argv) -> None:
    labels = args.labels or []
    if labels and len(labels) != len(args.runs):
        raise ValueError(f"--labels has {len(labels)} names for {len(args.runs)} runs")
    if args.plot and os.path.exists(args.plot) and not args.force:
        raise ValueError(f"plot {args.plot} already exists; choose another --plot or pass "
                         f"--force to overwrite it")
    if args.json and os.path.exists(args.json) and not args.force:
        raise ValueError(f"{args.json} already exists; choose another --json or pass --force")
    for path, what in ((args.plot, "plot"), (args.json, "--json file")):
        if path:  # both before either is written
            check_writable(path, what)
    runs = []
    for i, path in enumerate(args.runs):
        state = lm.load_checkpoint(path)
        output = state["model_config"]["output"]
        label = labels[i] if labels else f"{output} ({os.path.basename(path)})"
        runs.append((label, state["history"]))
        best = min((h["val_ppl"] for h in state["history"]), default=math.nan)
        seconds = sum(h.get("seconds", 0.0) for h in state["history"])
        print(f"{label}: {len(state['history'])} epochs, best valid ppl {best:.2f}, "
              f"{seconds / 60:.1f} min of training")
    if args.plot:
        title = args.title or "validation perplexity: " + " vs ".join(label for label, _ in runs)
        lm.plot_runs(runs, args.plot, title, overwrite=True)
        print(f"wrote {args.plot}")
    if args.json:
        with atomic_open(args.json, "w") as f:
            json.dump({label: h for label, h in runs}, f, indent=1)


# How the streams are batched, positive integers: (flag, help).
BATCHING = (("--batch-size", "global batch (streams)"),
            ("--eval-batch-size", "streams when evaluating"),
            ("--bptt", "truncated BPTT length"),
            ("--eval-bptt", "BPTT length of validation and test (None: --bptt)"))


def _train_parser(t: argparse.ArgumentParser) -> None:
    d = lm.TrainConfig()
    t.add_argument("--data", default=None,
                   help="folder with train/valid/test token files (on resume: the checkpoint's)")
    t.add_argument("--output", choices=tuple(HEADS), default=d.output, help="output layer")
    t.add_argument("--rnn", choices=("lstm", "gru"), default=d.rnn, help="recurrent cell")
    t.add_argument("--embed-dim", type=positive_int, default=d.embed_dim,
                   help="word embedding size")
    t.add_argument("--hidden-size", type=positive_int, default=d.hidden_size,
                   help="units per recurrent layer")
    t.add_argument("--layers", type=positive_int, default=d.layers, help="recurrent layers")
    t.add_argument("--dropout", type=float, default=d.dropout,
                   help="dropout on non-recurrent connections")
    t.add_argument("--tie-weights", action="store_true",
                   help="share the embedding with the output layer")
    t.add_argument("--projection", action="store_true",
                   help="hidden→embedding projection before the output")
    t.add_argument("--num-sampled", type=positive_int, default=d.num_sampled,
                   help="samples per step of the sampled heads")
    t.add_argument("--sampler", choices=("unigram", "log_uniform"), default=d.sampler,
                   help="noise distribution of the sampled heads")
    t.add_argument("--power", type=float, default=d.power, help="unigram exponent")
    t.add_argument("--hs-tree", choices=("huffman", "context", "features"), default=d.hs_tree,
                   help="tree of --output hs: Huffman over the counts, words split by their "
                        "left contexts in the training text, or by the mean features a "
                        "trained model (--hs-tree-model) computes before them")
    t.add_argument("--hs-tree-model", default=d.hs_tree_model, metavar="CHECKPOINT",
                   help="the trained language model of --hs-tree features")
    t.add_argument("--init-range", type=float, default=d.init_range,
                   help="weights start uniform in ±this")
    t.add_argument("--sparse", action=argparse.BooleanOptionalAction, default=d.sparse,
                   help="row-sparse embedding/output gradients: the optimiser touches only the "
                        "rows a step used. Default: on with sgd and a head that has them "
                        "(sampled, nce, neg, hs), where they train exactly as dense; off with "
                        "adam (--sparse gives those rows to SparseAdam, whose moments differ)")
    t.add_argument("--compile", nargs="?", const="default", default=d.compile,
                   choices=lm.COMPILE_MODES, metavar="MODE",
                   help="run the training step under torch.compile (fullgraph) with this mode: "
                        "default, reduce-overhead (CUDA graphs), max-autotune, "
                        "max-autotune-no-cudagraphs (bare --compile: default)")
    t.add_argument("--vocab-parallel", type=positive_int, default=d.vocab_parallel,
                   metavar="N", help="under torchrun: split the output layer's rows over N "
                   "processes (world = data x N)")
    t.add_argument("--optimizer", choices=("sgd", "adam"), default=d.optimizer, help="optimiser")
    t.add_argument("--lr", type=float, default=d.lr,
                   help="None: 20 (sgd) or 1e-3 (adam). The loss is the per-token mean, so lr 20 "
                        "and clip 0.25 are Zaremba et al.'s lr 1 and clip 5 on the loss summed "
                        "over 20 BPTT steps")
    t.add_argument("--lr-decay", type=float, default=d.lr_decay,
                   help="divisor applied when valid ppl stalls")
    t.add_argument("--decay-after", type=positive_int, default=d.decay_after,
                   help="also divide after every epoch from this one on (Zaremba small: 4)")
    t.add_argument("--clip", type=float, default=d.clip, help="max gradient norm (0: off)")
    t.add_argument("--epochs", type=positive_int, default=d.epochs, help="total epochs of the run")
    t.add_argument("--max-steps", type=positive_int, default=d.max_steps,
                   help="total optimiser steps of the whole run (resumed ones included): "
                        "training stops there, mid-epoch if need be")
    t.add_argument("--save-every", type=non_negative_int, default=d.save_every, metavar="STEPS",
                   help="also checkpoint every STEPS steps within an epoch (0: epoch ends only)")
    for flag, text in BATCHING:
        t.add_argument(flag, type=positive_int, help=text,
                       default=getattr(d, flag[2:].replace("-", "_")))
    t.add_argument("--seed", type=int, default=d.seed, help="seed of every random stream")
    t.add_argument("--plot", default=d.plot, help="PNG of validation perplexity (not written "
                                                   "unless given)")
    add_run_options(t, d, "lm", lm.MAY_CHANGE_ON_RESUME, "--plot")


def build_parser() -> argparse.ArgumentParser:
    p, command = new_parser("fastsoftmax-lm", heads_in(__doc__))
    t = command("train", "train (or resume) a language model")
    _train_parser(t)
    e = command("eval", "exact perplexity of a checkpoint")
    e.add_argument("--checkpoint", required=True, help="checkpoint written by train")
    e.add_argument("--data", required=True, help="folder with the split to score")
    e.add_argument("--split", choices=("train", "valid", "test"), default="test",
                   help="split to score")
    e.add_argument("--batch-size", type=positive_int, default=None, help="None: as in training")
    e.add_argument("--bptt", type=positive_int, default=None, help="None: as in training")
    e.add_argument("--encoding", default="utf-8", help="text encoding of the corpus files")
    e.add_argument("--allow-vocab-mismatch", action="store_true",
                   help="score data whose own vocabulary differs from the checkpoint's")
    e.add_argument("--device", default=None, help="None: cuda when available, else cpu")
    g = command("generate", "continue a prompt")
    g.add_argument("--checkpoint", required=True, help="checkpoint written by train")
    g.add_argument("--prompt", default="", help="words to continue")
    g.add_argument("--max-tokens", type=positive_int, default=50, help="words to generate")
    g.add_argument("--temperature", type=float, default=1.0, help="0: greedy")
    g.add_argument("--top-k", type=int, default=0,
                   help="sample among the k likeliest words only (0: off)")
    g.add_argument("--seed", type=int, default=None, help="seed for a reproducible text")
    g.add_argument("--device", default=None, help="None: cuda when available, else cpu")
    c = command("compare", "summarise and plot several runs")
    c.add_argument("runs", nargs="+", help="checkpoints written by train")
    c.add_argument("--labels", nargs="*", default=None,
                   help="one name per run (None: head and file name)")
    c.add_argument("--plot", default=None, help="PNG to write (none unless given)")
    c.add_argument("--title", default=None, help="None: the labels compared")
    c.add_argument("--json", default=None, help="also write the histories as JSON")
    c.add_argument("--force", action="store_true", help="overwrite an existing --plot/--json")
    bind_commands(((t, cmd_train), (e, cmd_eval), (g, cmd_generate), (c, cmd_compare)))
    return p


def main(argv: Optional[List[str]] = None) -> int:
    return main_of(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
