"""Train and evaluate dynamic memory networks on the real bAbI tasks.

    fastsoftmax-dmn train --babi-dir BABI --babi-task 1 [--size 10k] [--supporting-facts]
        [--init-embeddings vectors.txt] [--checkpoint CKPT]
    fastsoftmax-dmn train --resume CKPT [--epochs N]
    fastsoftmax-dmn eval --checkpoint CKPT [--babi-dir BABI]

(or python -m fastsoftmax.cli.dmn). BABI is the folder holding bAbI v1.2's en/ and en-10k/
(default: $FASTSOFTMAX_BABI); the last --valid-fraction of the task's training file is held
out for validation, and the task's test file is scored at the end. Training always
checkpoints, after every epoch, to --checkpoint or to a new dmn-<output>-<time>.pt here, and
prints the path; an interrupted run continues with --resume.

--init-embeddings starts the word embeddings (the semantic memory) from a word2vec file,
text or binary (binary when the name ends in .bin, or say so with --init-embeddings-binary),
e.g. one written by `fastsoftmax-word2vec -output vectors.txt -size 32`; its vector size must
be --embed-dim (default: --hidden).
"""

import argparse
import sys
from typing import List, Optional

from ..models import dmn
from . import add_run_options, main_of
from ._babi_args import (add_answer_layer, add_babi_files, add_data, add_sizes, add_steps,
                         add_switches, command_parser, run_train)


def cmd_train(args, argv) -> None:
    run_train(dmn, build_parser, args, argv)


def cmd_eval(args, argv) -> None:
    res = dmn.evaluate_checkpoint(args.checkpoint, data=args.data, device=args.device)
    print(f"{res['questions']} test questions: accuracy {res['accuracy']:.2f}%, loss "
          f"{res['loss']:.4f}, support hits {res['support_hits']:.1f}%")


def task_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 20:
        raise argparse.ArgumentTypeError(f"bAbI tasks are numbered 1 to 20, got {text!r}")
    return value


def _train_parser(t: argparse.ArgumentParser) -> None:
    d = dmn.TrainConfig()
    add_babi_files(t, d, task=dict(type=task_number, help="bAbI task, 1 to 20"),
                   size_help="training questions per task", limit=True)
    add_answer_layer(t, d)
    add_sizes(t, d, ("--hidden", "GRU state size"),
              ("--embed-dim", "word embedding size (None: --hidden)"),
              ("--gate-hidden", "units of the attention gate's hidden layer (None: --hidden)"),
              ("--passes", "episodic passes"), ("--memory-size", "latest sentences kept as facts"))
    t.add_argument("--dropout", type=float, default=d.dropout,
                   help="dropout on the word embeddings")
    t.add_argument("--gate", choices=dmn.GATES, default=d.gate,
                   help="gates: softmax over the facts, or the paper's independent sigmoids")
    add_switches(t, ("--no-temporal",
                     "no learned vector per fact age added to the facts (the paper has none)"))
    t.add_argument("--init-embeddings", default=d.init_embeddings,
                   help="word2vec vector file that starts the word embeddings")
    t.add_argument("--init-embeddings-binary", dest="init_embeddings_binary",
                   action="store_true", default=d.init_embeddings_binary,
                   help="--init-embeddings is word2vec's binary format (None: if it ends in "
                        ".bin)")
    add_switches(t, ("--supporting-facts", "also train the gates toward the supporting facts"))
    t.add_argument("--support-weight", type=float, default=d.support_weight,
                   help="weight of the gates' supporting-fact loss")
    t.add_argument("--lr", type=float, default=d.lr, help="Adam learning rate")
    t.add_argument("--weight-decay", type=float, default=d.weight_decay, help="L2 penalty")
    add_steps(t, d)
    t.add_argument("--seed", type=int, default=d.seed, help="seed of the training")
    add_run_options(t, d, "dmn", dmn.MAY_CHANGE_ON_RESUME, "--checkpoint")
    for action in t._actions:  # the checkpoint is the one file train writes
        if action.dest == "force":
            action.help = "overwrite an existing --checkpoint"


def build_parser() -> argparse.ArgumentParser:
    return command_parser("fastsoftmax-dmn", __doc__,
                       ("train (or resume) a dynamic memory network", _train_parser, cmd_train),
                       ("eval", "test accuracy of a checkpoint", lambda e: add_data(e, "then"),
                        cmd_eval))


def main(argv: Optional[List[str]] = None) -> int:
    return main_of(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
