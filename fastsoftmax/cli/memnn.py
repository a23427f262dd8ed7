"""Train and evaluate the strongly supervised memory network on the real bAbI tasks.

    fastsoftmax-memnn train --babi-task {1..20} [--babi-dir BABI] [--hops 2] [--checkpoint CKPT]
    fastsoftmax-memnn train --resume CKPT [--epochs N]
    fastsoftmax-memnn eval --checkpoint CKPT [--babi-dir BABI] [--explain N]

(or python -m fastsoftmax.cli.memnn). --babi-dir names the folder holding bAbI's en/ (1k) and
en-10k/ (default: $FASTSOFTMAX_BABI); the last tenth of the training questions is held out
for validation. Training always checkpoints, after every epoch, to --checkpoint or to a new
memnn-task<N>-<time>.pt here, and prints the path.
"""

import argparse
import sys
from typing import List, Optional

from ..models import memnn as mm
from ..models.babi import TASK_NAMES
from . import add_run_options, main_of, non_negative_int
from ._babi_args import (add_babi_files, add_data, add_optimizer, add_sizes, add_steps,
                         add_switches, command_parser, run_train)


def cmd_train(args, argv) -> None:
    run_train(mm, build_parser, args, argv)


def cmd_eval(args, argv) -> None:
    res = mm.evaluate_checkpoint(args.checkpoint, data=args.data, device=args.device)
    hits = ", ".join(f"{h:.1f}%" for h in res["support_hits"])
    print(f"task {res['task']}: {res['questions']} test questions, accuracy "
          f"{res['accuracy']:.2f}%, answer ranking loss {res['loss']:.4f}, supporting facts "
          f"found per hop {hits}")
    model, vocab, data = res["model"], res["data"]["vocab"], res["data"]
    for story in data["test"][:args.explain]:
        batch = mm.collate(mm.encode([story], vocab), model.config["memory_size"],
                           model.hops).to(args.device)
        answer, chosen = model.predict(batch.story, batch.mask, batch.query)
        first = len(story.sentences) - batch.story.shape[1]  # statements kept in memory
        print(f"{' '.join(story.question)} -> {vocab.itos[int(answer[0])]} "
              f"(true: {story.answer})")
        for hop, index in enumerate(chosen[0].tolist(), 1):
            print(f"  o{hop}: line {story.lines[first + index]} "
                  f"({' '.join(story.sentences[first + index])})")


def _train_parser(t: argparse.ArgumentParser) -> None:
    d = mm.TrainConfig()
    add_babi_files(t, d, task=dict(type=int, choices=sorted(TASK_NAMES), metavar="{1..20}",
                                   help="bAbI task"), size_help="training set size")
    add_sizes(t, d, ("--embed-dim", "rows of U_O and U_R"),
              ("--hops", "supporting memories O picks (the paper's κ)"),
              ("--memory-size", "latest statements kept in memory"))
    add_switches(t, ("--no-time-features",
                     "plain argmax of s_O, without the write-time comparisons"))
    t.add_argument("--margin", type=float, default=d.margin, help="γ of every ranking term")
    add_sizes(t, d, ("--num-sampled", "words per step the answer is ranked against"))
    add_optimizer(t, d)
    add_steps(t, d)
    t.add_argument("--seed", type=int, default=d.seed, help="seed of the model and the batches")
    add_run_options(t, d, "memnn", mm.MAY_CHANGE_ON_RESUME, "file")


def build_parser() -> argparse.ArgumentParser:
    return command_parser(
        "fastsoftmax-memnn", __doc__,
        ("train (or resume) a memory network on one bAbI task", _train_parser, cmd_train),
        ("eval", "test accuracy of a checkpoint", _eval_parser, cmd_eval))


def _eval_parser(e: argparse.ArgumentParser) -> None:
    add_data(e, "else")
    e.add_argument("--explain", type=non_negative_int, default=0,
                   help="print the first N test questions with the answer and the memories "
                        "each hop chose")


def main(argv: Optional[List[str]] = None) -> int:
    return main_of(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
