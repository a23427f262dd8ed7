"""What the question-answering command lines (fastsoftmax-memn2n, fastsoftmax-memnn,
fastsoftmax-dmn) have in common: `train` itself, the bAbI files read, the answer layer, the
optimisation options, and the options of the commands that read a checkpoint."""

import argparse
import os

from ..models.babi import SIZES
from ..nn import HEADS
from . import (bind_commands, given_options, new_parser, non_negative_int, positive_int,
               refuse_renamed)

DATA_HELP = "folder holding bAbI's en/ and en-10k/ (None: $FASTSOFTMAX_BABI)"


def run_train(model, build_parser, args, argv, *, paths=()) -> None:
    """`train`: model.fit with the parsed options that are its TrainConfig's fields; those
    written on the command line are the `given` ones (those a resumed run may change). The
    options named in `paths` are made absolute, so that a resumed or evaluated run finds
    them from anywhere."""
    given = given_options(build_parser, "train", argv)
    fields = {k: v for k, v in vars(args).items() if k in model.TrainConfig.__dataclass_fields__}
    for name in paths:
        if fields[name] is not None:
            fields[name] = os.path.abspath(fields[name])
    model.fit(model.TrainConfig(**fields), given=given & set(fields))


def add_switches(parser: argparse.ArgumentParser, *switches) -> None:
    """Options without a value, as (flag, help) pairs: --no-X turns the option X (on by
    default) off, any other flag turns its option on."""
    for flag, help in switches:
        if flag.startswith("--no-"):
            parser.add_argument(flag, dest=flag[len("--no-"):].replace("-", "_"),
                                action="store_false", help=help)
        else:
            parser.add_argument(flag, action="store_true", help=help)


def add_sizes(parser: argparse.ArgumentParser, d, *sizes) -> None:
    """Options whose value is a positive integer, as (flag, help) pairs, the defaults those of
    `d` (a TrainConfig)."""
    for flag, help in sizes:
        parser.add_argument(flag, type=positive_int,
                            default=getattr(d, flag[len("--"):].replace("-", "_")), help=help)


def add_babi_files(t: argparse.ArgumentParser, d, *, task: dict, size_help: str,
                   limit: bool = False) -> None:
    """--babi-dir, --babi-task (`task`: its type or choices, and help), --size, --limit (if
    `limit`) and --valid-fraction, the defaults those of `d` (a TrainConfig, whose fields
    `data` and `task` they fill). The spelling is memn2n's, whose --task names its generated
    stories; the old --data and --task are refused naming the new flags."""
    t.add_argument("--babi-dir", dest="data", metavar="BABI_DIR", default=d.data,
                   help=DATA_HELP)
    t.add_argument("--babi-task", dest="task", default=d.task, **dict({"metavar": "N"}, **task))
    refuse_renamed(t, ("--data", "--babi-dir"), ("--task", "--babi-task"))
    t.add_argument("--size", choices=tuple(SIZES), default=d.size, help=size_help)
    if limit:
        t.add_argument("--limit", type=positive_int, default=d.limit,
                       help="read at most this many training questions (None: all)")
    t.add_argument("--valid-fraction", type=float, default=d.valid_fraction,
                   help="share of the training questions held out for validation")


def add_answer_layer(t: argparse.ArgumentParser, d) -> None:
    t.add_argument("--output", choices=tuple(HEADS), default=d.output, help="answer layer")
    t.add_argument("--num-sampled", type=positive_int, default=d.num_sampled,
                   help="samples per step of the sampled heads")


def add_optimizer(t: argparse.ArgumentParser, d) -> None:
    """--optimizer, --lr and --anneal-every (the memory networks' halving schedule)."""
    t.add_argument("--optimizer", choices=("sgd", "adam"), default=d.optimizer, help="optimiser")
    t.add_argument("--lr", type=float, default=d.lr, help="learning rate")
    t.add_argument("--anneal-every", type=non_negative_int, default=d.anneal_every,
                   help="halve the learning rate every N epochs (0: never)")


def add_steps(t: argparse.ArgumentParser, d, *, per_step: str = "questions") -> None:
    """--clip, --epochs and --batch-size (of `per_step` a step)."""
    t.add_argument("--clip", type=float, default=d.clip, help="max gradient norm (0: off)")
    t.add_argument("--epochs", type=positive_int, default=d.epochs, help="total epochs")
    t.add_argument("--batch-size", type=positive_int, default=d.batch_size,
                   help=f"{per_step} per step")


def command_parser(prog: str, description: str, train: tuple, *commands: tuple
                   ) -> argparse.ArgumentParser:
    """The parser of a tool with the command `train` and `commands` that read a checkpoint
    (--checkpoint, --device). `train` is (help, add_options, run): the command's help, a
    function that adds its options to its parser, and the function that runs it; each of
    `commands` is (name, help, add_options, run)."""
    parser, command = new_parser(prog, description)
    train_help, add_train_options, run_train_command = train
    t = command("train", train_help)
    add_train_options(t)
    bound = [(t, run_train_command)]
    for name, help, add_options, run in commands:
        c = command(name, help)
        c.add_argument("--checkpoint", required=True, help="checkpoint written by train")
        add_options(c)
        c.add_argument("--device", default="cpu", help="cpu or cuda")
        bound.append((c, run))
    bind_commands(bound)
    return parser


def add_data(parser: argparse.ArgumentParser, then: str) -> None:
    """--babi-dir of a command that rereads a run's bAbI files: None, the run's folder,
    `then` $FASTSOFTMAX_BABI (the old --data refused naming it)."""
    parser.add_argument("--babi-dir", dest="data", metavar="BABI_DIR", default=None,
                        help=f"folder holding bAbI's en/ and en-10k/ (None: the run's, {then} "
                             f"$FASTSOFTMAX_BABI)")
    refuse_renamed(parser, ("--data", "--babi-dir"))
