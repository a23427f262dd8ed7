"""Train, evaluate and question end-to-end memory networks on generated bAbI-style stories.

    fastsoftmax-memn2n train --task {single,two,yes-no,counting} [--hops 3] [--output full]
        [--supporting-facts] [--checkpoint CKPT] [--plot attention.png]
    fastsoftmax-memn2n train --babi-dir DIR --babi-task {1..20,all} [--optimizer sgd ...]
    fastsoftmax-memn2n train --resume CKPT [--epochs N]
    fastsoftmax-memn2n eval --checkpoint CKPT [--seed S] [--babi-dir DIR] [--plot attention.png]
    fastsoftmax-memn2n answer --checkpoint CKPT < story.txt

(or python -m fastsoftmax.cli.memn2n). Stories come from a seeded simulation (--seed, with
--entities, --locations, --objects, --distractors); the test stories are drawn apart from the
training ones. With --babi-dir (the folder holding en/ of bAbI v1.2) and --babi-task, the
real tasks' 1k files are read instead: one task, or all 20 trained jointly, 10% of the
training questions held out for validation, the vocabulary and answers from the training
files; the checkpoint records the folder and task, so resume and eval reread them (eval
--babi-dir: the files moved). Training always checkpoints, after every epoch, to --checkpoint or to a new
memn2n-<output>-<time>.pt here, and prints the path.

`answer` reads stories on stdin: one sentence per line, the question last (ending in '?'),
stories separated by a blank line, e.g.

    mary went to the kitchen .
    john moved to the garden .
    where is mary ?

and prints one answer per story (with --explain, the sentence each hop attended most).
"""

import argparse
import os
import sys
from typing import List, Optional


from ..models import memn2n as mn
from ..models.checkpoints import refuse_overwrite
from ..nn import HEADS
from . import (add_run_options, bind_commands, given_options, main_of, new_parser,
               positive_int)


def cmd_train(args, argv) -> None:
    given = given_options(build_parser, "train", argv)
    fields = {k: v for k, v in vars(args).items() if k in mn.TrainConfig.__dataclass_fields__}
    if fields["babi_dir"] is not None:  # the checkpoint must find the files from anywhere
        fields["babi_dir"] = os.path.abspath(fields["babi_dir"])
    mn.fit(mn.TrainConfig(**fields), given=given & set(fields))


def cmd_eval(args, argv) -> None:
    refuse_overwrite(args.plot, "plot", "--plot", args.force)
    res = mn.evaluate_checkpoint(args.checkpoint, test_size=args.test_size, seed=args.seed,
                                 device=args.device, babi_dir=args.babi_dir)
    print(f"{res['stories']} test stories: accuracy {res['accuracy']:.2f}%, loss "
          f"{res['loss']:.4f}, support hits {res['support_hits']:.1f}%")
    for task, r in res["by_task"].items():
        print(f"bAbI task {task}: test error {100 - r['accuracy']:.1f}%")
    if args.plot:
        stories = res["data"]["test"]
        if not 0 <= args.story < len(stories):
            raise ValueError(f"--story {args.story} is outside the {len(stories)} test stories")
        mn.plot_attention(res["model"], res["data"]["vocab"], res["data"]["answers"],
                          stories[args.story], args.plot, overwrite=True, device=args.device)
        print(f"wrote {args.plot}")


def cmd_answer(args, argv) -> None:
    model, vocab, answers = mn.model_from_checkpoint(mn.load_checkpoint(args.checkpoint))
    model.to(args.device)
    text = sys.stdin.read()
    if not text.strip():
        raise ValueError("stdin is empty: give a story (one sentence per line) and a question "
                         "ending with '?'")
    stories = mn.parse_stories(text)
    for story, res in zip(stories, mn.answer_stories(model, vocab, answers, stories,
                                                      device=args.device)):
        print(res["answer"])
        if args.explain:
            print(f"  p={res['probability']:.3f}")
            for hop, weights in enumerate(res["attention"], 1):
                i = max(range(len(weights)), key=weights.__getitem__)
                words = " ".join(story.sentences[res["first"] + i])
                print(f"  hop {hop}: {weights[i]:.2f} on line {story.lines[res['first'] + i]} "
                      f"({words})")


def _train_parser(t: argparse.ArgumentParser) -> None:
    d = mn.TrainConfig()
    t.add_argument("--task", choices=mn.TASKS, default=d.task, help="story task")
    t.add_argument("--babi-dir", default=d.babi_dir,
                   help="train on the real bAbI v1.2 files under this folder (holding en/)")
    t.add_argument("--babi-task", default=d.babi_task,
                   help="with --babi-dir: the task, 1 to 20, or 'all' (joint training)")
    t.add_argument("--entities", type=positive_int, default=d.entities, help="people")
    t.add_argument("--locations", type=positive_int, default=d.locations, help="places")
    t.add_argument("--objects", type=positive_int, default=d.objects,
                   help="things to carry (tasks two and counting)")
    t.add_argument("--distractors", type=int, default=d.distractors,
                   help="sentences per story that support nothing")
    t.add_argument("--train-size", type=positive_int, default=d.train_size,
                   help="training stories (validation included)")
    t.add_argument("--test-size", type=positive_int, default=d.test_size, help="test stories")
    t.add_argument("--valid-fraction", type=float, default=d.valid_fraction,
                   help="share of the training stories held out for validation")
    t.add_argument("--answers", choices=("task", "vocabulary"), default=d.answers,
                   help="the head's classes: the task's answers, or every word")
    t.add_argument("--output", choices=tuple(HEADS), default=d.output, help="answer layer")
    t.add_argument("--num-sampled", type=positive_int, default=d.num_sampled,
                   help="samples per step of the sampled heads")
    t.add_argument("--embed-dim", type=positive_int, default=d.embed_dim, help="embedding size")
    t.add_argument("--hops", type=positive_int, default=d.hops, help="memory hops")
    t.add_argument("--memory-size", type=positive_int, default=d.memory_size,
                   help="latest sentences kept in memory")
    t.add_argument("--tying", choices=mn.TYINGS, default=d.tying, help="weight tying")
    t.add_argument("--tie-answers", action="store_true",
                   help="answer layer = the last hop's output embedding (the paper's adjacent "
                        "tying; needs --answers vocabulary)")
    t.add_argument("--no-position-encoding", dest="position_encoding", action="store_false",
                   help="bag of words instead of position encoding")
    t.add_argument("--no-temporal-encoding", dest="temporal_encoding", action="store_false",
                   help="no temporal encoding")
    t.add_argument("--supporting-facts", action="store_true",
                   help="also train the attention toward the supporting facts")
    t.add_argument("--support-weight", type=float, default=d.support_weight,
                   help="weight of the supporting-fact loss")
    t.add_argument("--optimizer", choices=("sgd", "adam"), default=d.optimizer, help="optimiser")
    t.add_argument("--lr", type=float, default=d.lr, help="learning rate")
    t.add_argument("--anneal-every", type=int, default=d.anneal_every,
                   help="halve the learning rate every N epochs (0: never)")
    t.add_argument("--clip", type=float, default=d.clip, help="max gradient norm (0: off)")
    t.add_argument("--epochs", type=positive_int, default=d.epochs, help="total epochs")
    t.add_argument("--batch-size", type=positive_int, default=d.batch_size, help="stories per step")
    t.add_argument("--linear-start", type=int, default=d.linear_start,
                   help="at most N first epochs without softmax, until valid loss stalls "
                        "(0: off)")
    t.add_argument("--linear-fixed", action="store_true",
                   help="linear start lasts exactly --linear-start epochs, the learning-rate "
                        "schedule starting after it")
    t.add_argument("--noise", type=float, default=d.noise,
                   help="share of empty memories added to training stories")
    t.add_argument("--seed", type=int, default=d.seed, help="seed of the stories and training")
    t.add_argument("--plot", default=d.plot,
                   help="PNG of the attention per hop on the first test story (none unless "
                        "given)")
    add_run_options(t, d, "memn2n", mn.MAY_CHANGE_ON_RESUME, "--plot")


def build_parser() -> argparse.ArgumentParser:
    p, command = new_parser("fastsoftmax-memn2n", __doc__)
    t = command("train", "train (or resume) a memory network")
    _train_parser(t)
    e = command("eval", "test accuracy of a checkpoint")
    e.add_argument("--checkpoint", required=True, help="checkpoint written by train")
    e.add_argument("--test-size", type=positive_int, default=None,
                   help="test stories (None: as in training)")
    e.add_argument("--seed", type=int, default=None,
                   help="draw the stories from this seed instead of the run's")
    e.add_argument("--babi-dir", default=None,
                   help="a real-bAbI run's files, if no longer where it trained")
    e.add_argument("--plot", default=None, help="PNG of one test story's attention per hop")
    e.add_argument("--story", type=int, default=0, help="test story drawn by --plot")
    e.add_argument("--force", action="store_true", help="overwrite an existing --plot")
    e.add_argument("--device", default="cpu", help="cpu or cuda")
    a = command("answer", "answer stories read from stdin")
    a.add_argument("--checkpoint", required=True, help="checkpoint written by train")
    a.add_argument("--explain", action="store_true",
                   help="also print the answer's probability and each hop's attended line")
    a.add_argument("--device", default="cpu", help="cpu or cuda")
    bind_commands(((t, cmd_train), (e, cmd_eval), (a, cmd_answer)))
    return p


def main(argv: Optional[List[str]] = None) -> int:
    return main_of(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
