"""Command lines: thin argparse layers over the public APIs of fastsoftmax.models.

    python -m fastsoftmax.cli.lm       (console script fastsoftmax-lm)
    python -m fastsoftmax.cli.seq2seq  (console script fastsoftmax-seq2seq)
    python -m fastsoftmax.cli.memn2n   (console script fastsoftmax-memn2n)
    python -m fastsoftmax.cli.memnn    (console script fastsoftmax-memnn)
    python -m fastsoftmax.cli.dmn      (console script fastsoftmax-dmn)
    python -m fastsoftmax.cli.word2vec (console script fastsoftmax-word2vec; word2vec.c's
                                        single-dash flags, -force to overwrite)

Every command prints its defaults in --help, answers bad input with one "error: ..." line
on stderr and exit status 2 (never a traceback), and never overwrites a file it did not
write in the same run unless told to (--force).
"""

import argparse
import contextlib
import logging
import sys
from typing import Callable, Sequence

_UNSET = object()


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown after every optional option; descriptions keep their line breaks."""

    def _get_help_string(self, action):
        if action.required:
            return action.help
        return super()._get_help_string(action)


def given_options(build: Callable[[], argparse.ArgumentParser], command: str,
                  argv: Sequence[str]) -> set:
    """The destinations the user set on the command line for `command` (as opposed to
    defaults): argv parsed again by a fresh parser (build(), whose `subcommands` maps names to
    subparsers) with every default of `command` replaced by a sentinel."""
    fresh = build()
    sub = fresh.subcommands[command]
    sub.set_defaults(**{a.dest: _UNSET for a in sub._actions if a.dest != "help"})
    parsed = vars(fresh.parse_args(argv))
    return {k for k, v in parsed.items() if v is not _UNSET and k != "command"}


def run(func: Callable, args) -> int:
    """func(args) with the errors a user can cause reported as one line: exit status 2. File
    system errors (a full disk, permissions) are the user's to fix too."""
    try:
        check_device(getattr(args, "device", None))
        func(args)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def check_device(name) -> None:
    """ValueError for a --device torch does not know, or cuda on a machine without it."""
    if name is None:
        return
    import torch

    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"--device {name!r} is not a device; use cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: CUDA is not available on this machine (no GPU or a "
                         f"CPU-only torch); use --device cpu")


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def heads_in(doc: str) -> str:
    """`doc` with each "{HEADS}" written as the names of fastsoftmax.nn.HEADS when the parser
    is built ({full,sampled,...}): usage lines list what --output takes, registered heads
    included, and cannot drift from it."""
    from ..nn import HEADS

    return doc.replace("{HEADS}", "{" + ",".join(HEADS) + "}")


class _Renamed(argparse.Action):
    """A flag that was renamed: using it is a usage error naming the new flag, where argparse
    alone would say 'unrecognized arguments' and leave the user to guess the new spelling."""

    def __init__(self, option_strings, dest, *, new: str, **kwargs):
        super().__init__(option_strings, argparse.SUPPRESS, nargs="?",
                         default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} was renamed: use {self.new}")


def refuse_renamed(parser: argparse.ArgumentParser, *renamed: tuple) -> None:
    """Refuse each old flag of the (old, new) pairs `renamed`, naming the new one; the old
    flags are hidden from --help."""
    for old, new in renamed:
        parser.add_argument(old, action=_Renamed, new=new)


def add_threads(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="torch intra-op threads (None: torch's choice); 1 is often fastest "
                             "for small models on a busy machine")


def bind_commands(commands) -> None:
    """Each (subparser, function) pair: the --threads option, and the function its command
    runs."""
    for parser, func in commands:
        add_threads(parser)
        parser.set_defaults(func=func)


@contextlib.contextmanager
def logging_to(stream):
    """The library's progress (the `fastsoftmax` loggers, INFO and above) as plain lines on
    `stream` while a command runs. Scoped, not logging.basicConfig: main(argv) is also called
    from Python (scripts, tests), whose own logging configuration it must leave as it was."""
    logger = logging.getLogger("fastsoftmax")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def main_of(build_parser: Callable[[], argparse.ArgumentParser], argv,
            log_to: str = "stdout") -> int:
    """The body of every subcommand-style command line's main(argv): parse, set the thread
    count, run the command with its errors as one line (run) and the library's progress
    logged to sys.<log_to>."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.threads:
        import torch  # here: --help and usage errors stay fast
        torch.set_num_threads(args.threads)
    with logging_to(getattr(sys, log_to)):
        return run(lambda a: a.func(a, argv), args)


def new_parser(prog: str, description: str):
    """(parser, add_command): add_command(name, help) makes a subcommand parser with defaults
    in its --help; the parser's `subcommands` maps names to them (see given_options)."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    parser.subcommands = {}

    def add_command(name: str, help: str) -> argparse.ArgumentParser:
        parser.subcommands[name] = sub.add_parser(name, help=help, formatter_class=HelpFormatter)
        return parser.subcommands[name]

    return parser, add_command


def add_run_options(parser: argparse.ArgumentParser, defaults, kind: str, may_change,
                    overwrites: str) -> None:
    """The options every `train` shares: data encoding, device, where the checkpoint goes,
    resuming, overwriting, restarts, the progress bar. `defaults` is the command's TrainConfig()."""
    if hasattr(defaults, "encoding"):  # commands that read data files
        parser.add_argument("--encoding", default=defaults.encoding,
                            help="text encoding of the data files")
    parser.add_argument("--device", default=defaults.device,
                        help="cpu, cuda or cuda:N (None: cuda when available, else cpu)")
    parser.add_argument("--checkpoint", default=defaults.checkpoint,
                        help=f"written after every epoch; None: a new {kind}-<output>-<time>.pt "
                             f"here (on resume: the resumed file)")
    parser.add_argument("--resume", default=defaults.resume,
                        help="checkpoint to continue from; may change: "
                             + ", ".join("--" + k.replace("_", "-") for k in may_change))
    parser.add_argument("--force", action="store_true",
                        help=f"overwrite an existing --checkpoint or {overwrites}")
    if hasattr(defaults, "restarts"):  # every TrainOptions (models/skeleton.py)
        parser.add_argument("--restarts", type=positive_int, default=defaults.restarts,
                            help="train this many seeds (--seed, --seed + 1, ...) and keep the "
                                 "run with the best validation score (the lowest error, or "
                                 "for the language model the lowest perplexity)")
    parser.add_argument("--progress", dest="progress", action="store_true",
                        default=defaults.progress,
                        help="progress bar even when stderr is not a terminal (None: terminal "
                             "only)")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress bar")
