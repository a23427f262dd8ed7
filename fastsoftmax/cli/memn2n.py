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
import sys
from typing import List, Optional

from ..models import memn2n as mn
from ..models.checkpoints import refuse_overwrite
from . import add_run_options, main_of, positive_int
from ._babi_args import (add_answer_layer, add_optimizer, add_sizes, add_steps, add_switches,
                         command_parser, run_train)


def cmd_train(args, argv) -> None:
    run_train(mn, build_parser, args, argv, paths=("babi_dir",))


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
    add_sizes(t, d, ("--entities", "people"), ("--locations", "places"),
              ("--objects", "things to carry (tasks two and counting)"))
    t.add_argument("--distractors", type=int, default=d.distractors,
                   help="sentences per story that support nothing")
    add_sizes(t, d, ("--train-size", "training stories (validation included)"),
              ("--test-size", "test stories"))
    t.add_argument("--valid-fraction", type=float, default=d.valid_fraction,
                   help="share of the training stories held out for validation")
    t.add_argument("--answers", choices=("task", "vocabulary"), default=d.answers,
                   help="the head's classes: the task's answers, or every word")
    add_answer_layer(t, d)
    add_sizes(t, d, ("--embed-dim", "embedding size"), ("--hops", "memory hops"),
              ("--memory-size", "latest sentences kept in memory"))
    t.add_argument("--tying", choices=mn.TYINGS, default=d.tying, help="weight tying")
    add_switches(t, ("--tie-answers", "answer layer = the last hop's output embedding (the "
                                      "paper's adjacent tying; needs --answers vocabulary)"),
                 ("--no-position-encoding", "bag of words instead of position encoding"),
                 ("--no-temporal-encoding", "no temporal encoding"),
                 ("--supporting-facts", "also train the attention toward the supporting facts"))
    t.add_argument("--support-weight", type=float, default=d.support_weight,
                   help="weight of the supporting-fact loss")
    add_optimizer(t, d)
    add_steps(t, d, per_step="stories")
    t.add_argument("--linear-start", type=int, default=d.linear_start,
                   help="at most N first epochs without softmax, until valid loss stalls "
                        "(0: off)")
    add_switches(t, ("--linear-fixed", "linear start lasts exactly --linear-start epochs, the "
                                       "learning-rate schedule starting after it"))
    t.add_argument("--noise", type=float, default=d.noise,
                   help="share of empty memories added to training stories")
    _departures(t, d)
    t.add_argument("--seed", type=int, default=d.seed, help="seed of the stories and training")
    t.add_argument("--plot", default=d.plot,
                   help="PNG of the attention per hop on the first test story (none unless "
                        "given)")
    add_run_options(t, d, "memn2n", mn.MAY_CHANGE_ON_RESUME, "--plot")


def _departures(t: argparse.ArgumentParser, d) -> None:
    """Where the paper's text and the authors' Matlab code differ (the defaults are theirs
    where they measured better: docs/models/memn2n.md)."""
    t.add_argument("--noise-style", choices=mn.NOISE_STYLES, default=d.noise_style,
                   help="'memories': empty memories inserted; 'time': gaps in the time "
                        "indices only, as the authors' code")
    t.add_argument("--position-weights", choices=mn.POSITION_WEIGHTS,
                   default=d.position_weights,
                   help="position encoding: each sentence's length, the longest one's, or "
                        "the authors' centred weights")
    t.add_argument("--empty-slots", action=argparse.BooleanOptionalAction,
                   default=d.empty_slots,
                   help="empty memory slots take part in the softmax with score 0")
    t.add_argument("--clip-style", choices=mn.CLIP_STYLES, default=d.clip_style,
                   help="gradient clipping: all together ('global'), or each weight matrix "
                        "by its Frobenius ('tensor') or spectral norm")
    t.add_argument("--punctuation", action=argparse.BooleanOptionalAction,
                   default=d.punctuation,
                   help="keep '.' and '?' as words in the real bAbI files")


def build_parser() -> argparse.ArgumentParser:
    return command_parser("fastsoftmax-memn2n", __doc__,
                       ("train (or resume) a memory network", _train_parser, cmd_train),
                       ("eval", "test accuracy of a checkpoint", _eval_parser, cmd_eval),
                       ("answer", "answer stories read from stdin", _answer_parser, cmd_answer))


def _eval_parser(e: argparse.ArgumentParser) -> None:
    e.add_argument("--test-size", type=positive_int, default=None,
                   help="test stories (None: as in training)")
    e.add_argument("--seed", type=int, default=None,
                   help="draw the stories from this seed instead of the run's")
    e.add_argument("--babi-dir", default=None,
                   help="a real-bAbI run's files, if no longer where it trained")
    e.add_argument("--plot", default=None, help="PNG of one test story's attention per hop")
    e.add_argument("--story", type=int, default=0, help="test story drawn by --plot")
    add_switches(e, ("--force", "overwrite an existing --plot"))


def _answer_parser(a: argparse.ArgumentParser) -> None:
    add_switches(a, ("--explain",
                     "also print the answer's probability and each hop's attended line"))


def main(argv: Optional[List[str]] = None) -> int:
    return main_of(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
