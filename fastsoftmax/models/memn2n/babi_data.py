"""The memory network's data from the real bAbI v1.2 files (read by models/babi.py), for one
task (1..20) or all 20 trained jointly, as Sukhbaatar et al. (2015, §4) use them:

    train / valid  the task's training file, the last `valid_fraction` (10 %) of its
                   questions held out for validation (the paper's split; the last ones, so at
                   most one story is cut between the two and the split needs no seed)
    test           the task's test file
    vocabulary     every word and answer of the training files (valid included), <pad> = 0,
                   <unk> for the test words training never saw
    answers        every answer of the training files, in order of first appearance

Jointly ('all'), every task's train / valid / test stories are concatenated and share one
vocabulary and one answer set; `by_task` keeps each task's encoded test (and valid) stories
so the error is reported per task.

A test question whose answer no training question has cannot be named by the answer layer:
it is encoded with answer id -1 (UNKNOWN_ANSWER), counts as an error in the accuracy and is
left out of the loss, and `unknown_answers` says how many there are (0 in bAbI v1.2 1k).
With config.punctuation False the '.' and '?' words are dropped, as the authors' code does.
"""

import dataclasses
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from .. import babi
from ..vocabulary import Vocabulary

UNKNOWN_ANSWER = -1
PUNCTUATION = (".", "?")
SIZE = "1k"


def parse_tasks(value) -> List[int]:
    """The task numbers that --babi-task names: '1'..'20' (or an int) or 'all'."""
    if isinstance(value, str) and value.strip().lower() == "all":
        return sorted(babi.TASK_NAMES)
    try:
        task = int(value)
    except (TypeError, ValueError):
        task = None
    if task not in babi.TASK_NAMES or isinstance(value, bool):
        raise ValueError(f"babi_task must be 1 to 20 or 'all', got {value!r}")
    return [task]


def check_source(babi_dir: Optional[str], babi_task) -> None:
    """Refuse, before anything is trained or written, a real-data run that cannot read its
    files: a task without a folder (or the reverse), a bad task, a missing file."""
    if babi_dir is None and babi_task is None:
        return
    if babi_dir is None:
        raise ValueError("babi_task needs babi_dir (the folder holding en/ with the bAbI "
                         "v1.2 files)")
    if babi_task is None:
        raise ValueError("babi_dir needs babi_task (1 to 20, or 'all')")
    tasks = parse_tasks(babi_task)
    if not (Path(babi_dir) / babi.SIZES[SIZE]).is_dir():
        raise FileNotFoundError(f"babi_dir {babi_dir} has no {babi.SIZES[SIZE]}/ folder: give "
                                f"the folder holding en/ (bAbI v1.2, 1k questions per task)")
    for task in tasks:
        for split in ("train", "test"):
            babi.task_file(babi_dir, task, split, SIZE)


def _answer_ids(stories: Sequence[babi.Story], answers: Sequence[str]) -> List[int]:
    index = {w: i for i, w in enumerate(answers)}
    return [index.get(s.answer, UNKNOWN_ANSWER) for s in stories]


def encode_stories(stories: Sequence[babi.Story], vocab: Vocabulary, answers: Sequence[str]
                   ) -> list:
    """data.encode's items, with UNKNOWN_ANSWER for an answer outside `answers`."""
    return [babi.encode_story(s, vocab, a, babi.support_ranks(s))
            for s, a in zip(stories, _answer_ids(stories, answers))]


def read_splits(babi_dir: str, tasks: Sequence[int], valid_fraction: float
                ) -> Dict[int, Dict[str, list]]:
    """{task: dict(train, valid, test)} Stories of each task (babi.read_split: a fraction
    that leaves a task nothing to train on is refused)."""
    babi.check_fraction(valid_fraction)
    return {task: babi.read_split(babi_dir, task, SIZE, valid_fraction=valid_fraction)
            for task in tasks}


def without_punctuation(story: babi.Story) -> babi.Story:
    """The story without its '.' and '?' words (the authors' parseBabiTask.m strips them)."""
    return dataclasses.replace(
        story, sentences=[[w for w in s if w not in PUNCTUATION] for s in story.sentences],
        question=[w for w in story.question if w not in PUNCTUATION])


def load_babi(config, vocab: Optional[Vocabulary] = None, answers: Optional[list] = None
              ) -> dict:
    """load_data's dict for the real files named by config.babi_dir / config.babi_task, with
    `tasks`, `by_task` ({task: {'valid': items, 'test': items}}), `unknown_answers` and
    `unknown_words` (test tokens training never saw) added. A resumed or evaluated run
    passes its checkpoint's vocabulary and answers."""
    check_source(config.babi_dir, config.babi_task)
    tasks = parse_tasks(config.babi_task)
    splits = read_splits(config.babi_dir, tasks, config.valid_fraction)
    if not getattr(config, "punctuation", True):
        splits = {t: {k: [without_punctuation(s) for s in v] for k, v in split.items()}
                  for t, split in splits.items()}
    train_file = [s for t in tasks for k in ("train", "valid") for s in splits[t][k]]
    if vocab is None:
        # The answers are words too ("apple,football" one of them), so that the answer layer
        # can be the vocabulary (answers='vocabulary', tie_answers).
        vocab = Vocabulary.build([w for s in train_file for w in s.sentences + [s.question]]
                                 + [[s.answer] for s in train_file], specials=babi.SPECIALS)
    if answers is None:
        answers = (list(vocab.itos) if config.answers == "vocabulary"
                   else list(dict.fromkeys(s.answer for s in train_file)))
    data = {k: [s for t in tasks for s in splits[t][k]] for k in ("train", "valid", "test")}
    by_task = {t: {k: encode_stories(splits[t][k], vocab, answers) for k in ("valid", "test")}
               for t in tasks}
    encoded = {"train": encode_stories(data["train"], vocab, answers),
               "valid": [x for t in tasks for x in by_task[t]["valid"]],
               "test": [x for t in tasks for x in by_task[t]["test"]]}
    if any(x[2] == UNKNOWN_ANSWER for x in encoded["train"]):
        raise ValueError("a training answer is not among the checkpoint's answers: is this "
                         "the run's bAbI folder?")
    counts = babi.answer_counts(encoded["train"], len(answers))
    known = set(vocab.itos)
    unknown_words = sum(w not in known for s in data["test"]
                        for w in [x for sent in s.sentences for x in sent] + s.question)
    return dict(data, vocab=vocab, answers=answers, encoded=encoded, counts=counts,
                tasks=tasks, by_task=by_task, unknown_words=unknown_words,
                unknown_answers=sum(x[2] == UNKNOWN_ANSWER for x in encoded["test"]))


def describe(data: dict) -> str:
    """One line on what the run read, for the log."""
    tasks = data["tasks"]
    which = f"bAbI task {tasks[0]}" if len(tasks) == 1 else "bAbI tasks 1-20 jointly"
    return (f"{which} ({SIZE}): {data['unknown_words']} test tokens outside the training "
            f"vocabulary (read as <unk>), {data['unknown_answers']} test answers never seen "
            f"in training (counted as errors)")
