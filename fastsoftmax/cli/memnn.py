"""Train and evaluate the strongly supervised memory network on the real bAbI tasks.

    fastsoftmax-memnn train --task {1..20} [--data BABI] [--hops 2] [--checkpoint CKPT]
    fastsoftmax-memnn train --resume CKPT [--epochs N]
    fastsoftmax-memnn eval --checkpoint CKPT [--data BABI] [--explain N]

(or python -m fastsoftmax.cli.memnn). --data names the folder holding bAbI's en/ (1k) and
en-10k/ (default: $FASTSOFTMAX_BABI); the last tenth of the training questions is held out
for validation. Training always checkpoints, after every epoch, to --checkpoint or to a new
memnn-task<N>-<time>.pt here, and prints the path.
"""

import argparse
import sys
from typing import List, Optional

from ..models import memnn as mm
from ..models.babi import SIZES, TASK_NAMES
from . import (add_run_options, bind_commands, given_options, main_of, new_parser,
               non_negative_int, positive_int)


def cmd_train(args, argv) -> None:
    given = given_options(build_parser, "train", argv)
    fields = {k: v for k, v in vars(args).items() if k in mm.TrainConfig.__dataclass_fields__}
    mm.fit(mm.TrainConfig(**fields), given=given & set(fields))


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
    t.add_argument("--data", default=d.data,
                   help="folder holding bAbI's en/ and en-10k/ (None: $FASTSOFTMAX_BABI)")
    t.add_argument("--task", type=int, choices=sorted(TASK_NAMES), default=d.task,
                   metavar="{1..20}", help="bAbI task")
    t.add_argument("--size", choices=tuple(SIZES), default=d.size, help="training set size")
    t.add_argument("--valid-fraction", type=float, default=d.valid_fraction,
                   help="share of the training questions held out for validation")
    t.add_argument("--embed-dim", type=positive_int, default=d.embed_dim,
                   help="rows of U_O and U_R")
    t.add_argument("--hops", type=positive_int, default=d.hops,
                   help="supporting memories O picks (the paper's κ)")
    t.add_argument("--memory-size", type=positive_int, default=d.memory_size,
                   help="latest statements kept in memory")
    t.add_argument("--no-time-features", dest="time_features", action="store_false",
                   help="plain argmax of s_O, without the write-time comparisons")
    t.add_argument("--margin", type=float, default=d.margin, help="γ of every ranking term")
    t.add_argument("--num-sampled", type=positive_int, default=d.num_sampled,
                   help="words per step the answer is ranked against")
    t.add_argument("--optimizer", choices=("sgd", "adam"), default=d.optimizer, help="optimiser")
    t.add_argument("--lr", type=float, default=d.lr, help="learning rate")
    t.add_argument("--anneal-every", type=non_negative_int, default=d.anneal_every,
                   help="halve the learning rate every N epochs (0: never)")
    t.add_argument("--clip", type=float, default=d.clip, help="max gradient norm (0: off)")
    t.add_argument("--epochs", type=positive_int, default=d.epochs, help="total epochs")
    t.add_argument("--batch-size", type=positive_int, default=d.batch_size,
                   help="questions per step")
    t.add_argument("--seed", type=int, default=d.seed, help="seed of the model and the batches")
    add_run_options(t, d, "memnn", mm.MAY_CHANGE_ON_RESUME, "file")


def build_parser() -> argparse.ArgumentParser:
    p, command = new_parser("fastsoftmax-memnn", __doc__)
    t = command("train", "train (or resume) a memory network on one bAbI task")
    _train_parser(t)
    e = command("eval", "test accuracy of a checkpoint")
    e.add_argument("--checkpoint", required=True, help="checkpoint written by train")
    e.add_argument("--data", default=None,
                   help="folder holding bAbI's en/ and en-10k/ (None: the run's, else "
                        "$FASTSOFTMAX_BABI)")
    e.add_argument("--explain", type=non_negative_int, default=0,
                   help="print the first N test questions with the answer and the memories "
                        "each hop chose")
    e.add_argument("--device", default="cpu", help="cpu or cuda")
    bind_commands(((t, cmd_train), (e, cmd_eval)))
    return p


def main(argv: Optional[List[str]] = None) -> int:
    return main_of(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
