"""Train, evaluate and query a Tree-RNN (or its sequential LSTM baseline) on generated
arithmetic expressions: digits 0-9 with + - * mod 10, the value mod 10 predicted at the root.

    fastsoftmax-treernn train [--model {tree,lstm}] [--max-depth 4] [--output full]
        [--checkpoint CKPT]
    fastsoftmax-treernn train --resume CKPT [--epochs N]
    fastsoftmax-treernn eval --checkpoint CKPT
    fastsoftmax-treernn value --checkpoint CKPT < expressions.txt

(or python -m fastsoftmax.cli.treernn). Expressions come from a seeded generator (--seed,
--min-depth, --max-depth, --leaf-p); train, validation and test expressions are distinct.
Training always checkpoints, after every epoch, to --checkpoint or to a new
treernn-<output>-<time>.pt here, and prints the path.

`value` reads one expression per line, every operation in brackets, e.g.

    ( ( 3 + 4 ) * ( 9 - 2 ) )

and prints the model's value and the true one; a line it cannot parse is named on stderr
and gets an empty output line.
"""

import argparse
import sys
from typing import List, Optional

import torch

from ..models import treernn as tr
from ..nn import HEADS
from . import (add_run_options, bind_commands, given_options, main_of, new_parser,
               positive_int)


def cmd_train(args, argv) -> None:
    given = given_options(build_parser, "train", argv)
    fields = {k: v for k, v in vars(args).items() if k in tr.TrainConfig.__dataclass_fields__}
    tr.fit(tr.TrainConfig(**fields), given=given & set(fields))


def cmd_eval(args, argv) -> None:
    res = tr.evaluate_checkpoint(args.checkpoint, device=args.device)
    print(f"{res['expressions']} test expressions: accuracy {res['accuracy']:.2f}%, loss "
          f"{res['loss']:.4f}")


def cmd_value(args, argv) -> None:
    model = tr.from_state(tr.load_checkpoint(args.checkpoint)["model"]).to(args.device).eval()
    lines = sys.stdin.read().splitlines()
    if not any(line.strip() for line in lines):
        raise ValueError("stdin is empty: give one expression per line, e.g. ( 3 + 4 )")
    trees = []
    for number, line in enumerate(lines, 1):
        try:
            trees.append(tr.parse(line))
        except ValueError as exc:
            trees.append(None)
            print(f"warning: input line {number}: {exc}; its output line is empty",
                  file=sys.stderr)
    good = [t for t in trees if t is not None]
    predicted = iter([])
    if good:
        with torch.no_grad():
            predicted = iter(model.log_prob(tr.collate(good).to(args.device)).argmax(1).tolist())
    for t in trees:
        print("" if t is None else f"{next(predicted)} (true {t.value})")


# The model's sizes, positive integers: (flag, help).
MODEL_SIZES = (("--hidden-size", "H"),
               ("--embed-dim", "token embedding size (lstm only; the tree's is H)"),
               ("--layers", "composition layers (tree: 1 or 2) or LSTM layers"))


def _train_parser(t: argparse.ArgumentParser) -> None:
    d = tr.TrainConfig()
    t.add_argument("--model", choices=tr.MODELS, default=d.model,
                   help="tree: recursive network over the parse tree; lstm: sequential "
                        "baseline over the bracketed tokens")
    t.add_argument("--train-size", type=positive_int, default=d.train_size,
                   help="training expressions (validation included)")
    t.add_argument("--test-size", type=positive_int, default=d.test_size,
                   help="test expressions")
    t.add_argument("--valid-fraction", type=float, default=d.valid_fraction,
                   help="share of the training expressions held out for validation")
    t.add_argument("--min-depth", type=int, default=d.min_depth, help="shallowest tree")
    t.add_argument("--max-depth", type=int, default=d.max_depth, help="deepest tree")
    t.add_argument("--leaf-p", type=float, default=d.leaf_p,
                   help="chance that a child above the deepest level is a digit")
    for flag, text in MODEL_SIZES:
        t.add_argument(flag, type=positive_int, help=text,
                       default=getattr(d, flag[2:].replace("-", "_")))
    t.add_argument("--output", choices=tuple(HEADS), default=d.output, help="output layer")
    t.add_argument("--num-sampled", type=positive_int, default=d.num_sampled,
                   help="samples per step of the sampled heads")
    t.add_argument("--supervise", choices=tr.SUPERVISION, default=d.supervise,
                   help="root: loss on the root's value only; nodes: on every "
                        "subexpression's value too")
    t.add_argument("--lr", type=float, default=d.lr, help="Adam learning rate")
    t.add_argument("--clip", type=float, default=d.clip, help="max gradient norm (0: off)")
    t.add_argument("--epochs", type=positive_int, default=d.epochs, help="total epochs")
    t.add_argument("--batch-size", type=positive_int, default=d.batch_size,
                   help="expressions per step")
    t.add_argument("--seed", type=int, default=d.seed,
                   help="seed of the expressions and the training")
    add_run_options(t, d, "treernn", tr.MAY_CHANGE_ON_RESUME, "nothing else")


def build_parser() -> argparse.ArgumentParser:
    p, command = new_parser("fastsoftmax-treernn", __doc__)
    t = command("train", "train (or resume) a Tree-RNN or the LSTM baseline")
    _train_parser(t)
    e = command("eval", "test accuracy of a checkpoint")
    e.add_argument("--checkpoint", required=True, help="checkpoint written by train")
    e.add_argument("--device", default="cpu", help="cpu or cuda")
    v = command("value", "the value of each expression read from stdin")
    v.add_argument("--checkpoint", required=True, help="checkpoint written by train")
    v.add_argument("--device", default="cpu", help="cpu or cuda")
    bind_commands(((t, cmd_train), (e, cmd_eval), (v, cmd_value)))
    return p


def main(argv: Optional[List[str]] = None) -> int:
    return main_of(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
