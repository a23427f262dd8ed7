"""Train and evaluate dynamic memory networks on the real bAbI tasks.

    fastsoftmax-dmn train --data BABI --task 1 [--size 10k] [--supporting-facts]
        [--init-embeddings vectors.txt] [--checkpoint CKPT]
    fastsoftmax-dmn train --resume CKPT [--epochs N]
    fastsoftmax-dmn eval --checkpoint CKPT [--data BABI]

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
from ..nn import HEADS
from . import add_run_options, bind_commands, given_options, main_of, new_parser, positive_int


def cmd_train(args, argv) -> None:
    given = given_options(build_parser, "train", argv)
    fields = {k: v for k, v in vars(args).items() if k in dmn.TrainConfig.__dataclass_fields__}
    dmn.fit(dmn.TrainConfig(**fields), given=given & set(fields))


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
    t.add_argument("--data", default=d.data,
                   help="folder holding bAbI's en/ and en-10k/ (None: $FASTSOFTMAX_BABI)")
    t.add_argument("--task", type=task_number, default=d.task, help="bAbI task, 1 to 20")
    t.add_argument("--size", choices=("1k", "10k"), default=d.size,
                   help="training questions per task")
    t.add_argument("--limit", type=positive_int, default=d.limit,
                   help="read at most this many training questions (None: all)")
    t.add_argument("--valid-fraction", type=float, default=d.valid_fraction,
                   help="share of the training questions held out for validation")
    t.add_argument("--output", choices=tuple(HEADS), default=d.output, help="answer layer")
    t.add_argument("--num-sampled", type=positive_int, default=d.num_sampled,
                   help="samples per step of the sampled heads")
    t.add_argument("--hidden", type=positive_int, default=d.hidden, help="GRU state size")
    t.add_argument("--embed-dim", type=positive_int, default=d.embed_dim,
                   help="word embedding size (None: --hidden)")
    t.add_argument("--gate-hidden", type=positive_int, default=d.gate_hidden,
                   help="units of the attention gate's hidden layer (None: --hidden)")
    t.add_argument("--passes", type=positive_int, default=d.passes, help="episodic passes")
    t.add_argument("--memory-size", type=positive_int, default=d.memory_size,
                   help="latest sentences kept as facts")
    t.add_argument("--dropout", type=float, default=d.dropout,
                   help="dropout on the word embeddings")
    t.add_argument("--gate", choices=dmn.GATES, default=d.gate,
                   help="gates: softmax over the facts, or the paper's independent sigmoids")
    t.add_argument("--no-temporal", dest="temporal", action="store_false",
                   help="no learned vector per fact age added to the facts (the paper has none)")
    t.add_argument("--init-embeddings", default=d.init_embeddings,
                   help="word2vec vector file that starts the word embeddings")
    t.add_argument("--init-embeddings-binary", dest="init_embeddings_binary",
                   action="store_true", default=d.init_embeddings_binary,
                   help="--init-embeddings is word2vec's binary format (None: if it ends in "
                        ".bin)")
    t.add_argument("--supporting-facts", action="store_true",
                   help="also train the gates toward the supporting facts")
    t.add_argument("--support-weight", type=float, default=d.support_weight,
                   help="weight of the gates' supporting-fact loss")
    t.add_argument("--lr", type=float, default=d.lr, help="Adam learning rate")
    t.add_argument("--weight-decay", type=float, default=d.weight_decay, help="L2 penalty")
    t.add_argument("--clip", type=float, default=d.clip, help="max gradient norm (0: off)")
    t.add_argument("--epochs", type=positive_int, default=d.epochs, help="total epochs")
    t.add_argument("--batch-size", type=positive_int, default=d.batch_size,
                   help="questions per step")
    t.add_argument("--seed", type=int, default=d.seed, help="seed of the training")
    add_run_options(t, d, "dmn", dmn.MAY_CHANGE_ON_RESUME, "--checkpoint")
    for action in t._actions:  # the checkpoint is the one file train writes
        if action.dest == "force":
            action.help = "overwrite an existing --checkpoint"


def build_parser() -> argparse.ArgumentParser:
    p, command = new_parser("fastsoftmax-dmn", __doc__)
    t = command("train", "train (or resume) a dynamic memory network")
    _train_parser(t)
    e = command("eval", "test accuracy of a checkpoint")
    e.add_argument("--checkpoint", required=True, help="checkpoint written by train")
    e.add_argument("--data", default=None,
                   help="folder holding en/ and en-10k/ (None: the run's, then "
                        "$FASTSOFTMAX_BABI)")
    e.add_argument("--device", default="cpu", help="cpu or cuda")
    bind_commands(((t, cmd_train), (e, cmd_eval)))
    return p


def main(argv: Optional[List[str]] = None) -> int:
    return main_of(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
