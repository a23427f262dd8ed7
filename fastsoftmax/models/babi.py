"""Stories and the reader of the real bAbI files (Weston et al. 2015, v1.2), shared by the
question-answering models (MemN2N, the strongly supervised MemNN, the DMN), with what their
data have in common: one validation split, one encoding of a question, the answers' counts
and the batch type each model's batch extends.

A bAbI file numbers the lines of each story from 1; a question line carries its answer and
the ids of its supporting facts, separated by tabs:

    1 Mary moved to the bathroom.
    2 John went to the hallway.
    3 Where is Mary? <TAB>bathroom<TAB>1

Questions are interleaved with the story. Each question becomes one Story: every statement
of its story before it (questions are not memories), the question, the answer (kept whole:
"apple,football" and "s,e" are single answers, as the papers score them) and the supporting
facts as indices into those statements, in the file's order. In tasks 2 and 3 that order is
the reasoning chain (the object's fact, then its carrier's move), so `chain` is set there.

The data are CC BY 3.0 (Facebook AI Research); cite Weston et al., arXiv:1502.05698.
"""

import dataclasses
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..nn import HEADS
from .vocabulary import UNK, Vocabulary

TASK_NAMES = {
    1: "single-supporting-fact", 2: "two-supporting-facts", 3: "three-supporting-facts",
    4: "two-arg-relations", 5: "three-arg-relations", 6: "yes-no-questions", 7: "counting",
    8: "lists-sets", 9: "simple-negation", 10: "indefinite-knowledge",
    11: "basic-coreference", 12: "conjunction", 13: "compound-coreference",
    14: "time-reasoning", 15: "basic-deduction", 16: "basic-induction",
    17: "positional-reasoning", 18: "size-reasoning", 19: "path-finding",
    20: "agents-motivations",
}
CHAIN_TASKS = frozenset({2, 3})  # supporting facts listed in reading order
SIZES = {"1k": "en", "10k": "en-10k"}
ROOT_VARIABLE = "FASTSOFTMAX_BABI"
PAD = "<pad>"
SPECIALS = (PAD, UNK)  # the question-answering vocabularies' first ids: <pad> 0, <unk> 1


@dataclass
class Story:
    """One bAbI question with its story: `sentences` (the statements before it, tokenized),
    `question` (tokens), `answer` (kept whole), `support` (its supporting facts, indices into
    `sentences`; a reasoning chain in that order when `chain`) and `lines` (the file's line
    numbers of the statements and of the question, for stories read from a file)."""

    sentences: List[List[str]]
    question: List[str]
    answer: str
    support: List[int] = field(default_factory=list)  # indices into sentences
    # True: `support` is a chain read in that order (task two: the object's fact, then its
    # carrier's move); False: a set (counting) or a single fact.
    chain: bool = False
    lines: List[int] = field(default_factory=list)  # input line numbers (parsed stories)


def tokenize(line: str) -> List[str]:
    """Lower-case words, with '.' and '?' as words of their own; a leading bAbI line number
    is dropped."""
    words = line.lower().replace(".", " . ").replace("?", " ? ").replace(",", " ").split()
    if words and words[0].isdigit():
        words = words[1:]
    return words


def read_stories(path, *, chain: bool = False, limit: Optional[int] = None) -> List[Story]:
    """The questions of one bAbI file as Stories (at most `limit`). ValueError naming the
    file and the line for a line that is not bAbI's format."""
    path = Path(path)
    out: List[Story] = []
    statements: List[Tuple[int, List[str]]] = []  # (line id, words) of the current story
    where = {}  # line id → index into statements
    last = 0  # the previous line's id
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip():
                continue
            bad = functools.partial(_format_error, path, number)

            head, _, rest = line.partition(" ")
            if not head.isdigit():
                raise bad("the line does not start with a line id")
            ident = int(head)
            if ident == 1:
                statements, where = [], {}
            elif ident != last + 1:
                raise bad(f"line id {ident} does not follow {last} (a story's ids run 1, 2, "
                          f"3, ...)")
            last = ident
            if "\t" in rest:
                parts = rest.split("\t")
                if len(parts) != 3 or not parts[1].strip():
                    raise bad("a question line needs a question, an answer and its "
                              "supporting ids")
                try:
                    ids = [int(s) for s in parts[2].split()]
                except ValueError:
                    raise bad(f"supporting ids {parts[2]!r} are not numbers") from None
                missing = [i for i in ids if i not in where]
                if missing:
                    raise bad(f"supporting id {missing[0]} is not an earlier statement of "
                              f"this story")
                out.append(Story([list(w) for _, w in statements], tokenize(parts[0]),
                                 parts[1].strip().lower(), [where[i] for i in ids],
                                 chain=chain and len(ids) > 1,
                                 lines=[n for n, _ in statements] + [number]))
                if limit is not None and len(out) >= limit:
                    break
            else:
                words = tokenize(rest)
                if not words:
                    raise bad("the statement is empty")
                where[ident] = len(statements)
                statements.append((number, words))
    if not out:
        raise ValueError(f"{path}: no question found; is this a bAbI file?")
    return out


def _format_error(path, number: int, why: str) -> ValueError:
    return ValueError(f"{path}:{number}: {why}; expected 'ID text' or "
                      f"'ID question<TAB>answer<TAB>supporting ids'")


def default_root() -> Optional[Path]:
    """The folder named by $FASTSOFTMAX_BABI, or None."""
    given = os.environ.get(ROOT_VARIABLE)
    return Path(given) if given else None


def task_file(root, task: int, split: str, size: str = "1k") -> Path:
    """The path of task `task`'s `split` ('train' or 'test') file of the `size` set ('1k' or
    '10k') under `root` (the folder holding en/ and en-10k/). FileNotFoundError saying which
    file is missing (the 10k set lacks qa3's training file in some copies)."""
    if task not in TASK_NAMES:
        raise ValueError(f"bAbI task must be 1 to 20, got {task!r}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if size not in SIZES:
        raise ValueError(f"size must be one of {tuple(SIZES)}, got {size!r}")
    if root is None:
        raise FileNotFoundError(f"no bAbI folder given: pass one or set ${ROOT_VARIABLE} to "
                                f"the folder holding en/ and en-10k/")
    path = Path(root) / SIZES[size] / f"qa{task}_{TASK_NAMES[task]}_{split}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"bAbI file {path} does not exist")
    return path


def load_task(root, task: int, size: str = "1k", *, limit: Optional[int] = None
              ) -> Tuple[List[Story], List[Story]]:
    """(train, test) Stories of one task; `limit` caps the training questions."""
    chain = task in CHAIN_TASKS
    train = read_stories(task_file(root, task, "train", size), chain=chain, limit=limit)
    test = read_stories(task_file(root, task, "test", size), chain=chain)
    return train, test


def check_task(config) -> None:
    """Refuse, naming the option, a config.task that is no bAbI task and a config.size that is
    no bAbI set, before anything is read."""
    if config.task not in TASK_NAMES or isinstance(config.task, bool):
        raise ValueError(f"task must be a bAbI task, 1 to 20, got {config.task!r}")
    if config.size not in SIZES:
        raise ValueError(f"size must be '1k' or '10k', got {config.size!r}")


# ---------------------------------------------------------------------------------------
# The one validation split
# ---------------------------------------------------------------------------------------
def check_fraction(valid_fraction: float) -> None:
    if not 0.0 <= valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in [0, 1), got {valid_fraction}")


def split_valid(stories: Sequence[Story], valid_fraction: float
                ) -> Tuple[List[Story], List[Story]]:
    """(train, valid): valid is the last `valid_fraction` of the training file's questions (the
    last ones, so at most one story is cut between the two and the split needs no seed).
    ValueError for a fraction outside [0, 1), and for one that leaves no question to train
    on."""
    check_fraction(valid_fraction)
    n_valid = int(round(valid_fraction * len(stories)))
    if n_valid >= len(stories):
        raise ValueError(f"{len(stories)} training questions leave none to train on after "
                         f"holding out {valid_fraction:.0%} for validation: lower "
                         f"valid_fraction (--valid-fraction) or train on more questions")
    return list(stories[:len(stories) - n_valid]), list(stories[len(stories) - n_valid:])


def read_split(root, task: int, size: str = "1k", *, valid_fraction: float = 0.1,
               limit: Optional[int] = None) -> Dict[str, List[Story]]:
    """dict(train, valid, test): one task's Stories (load_task), the last `valid_fraction` of
    its training questions held out for validation (split_valid); `limit` caps the training
    questions, validation included. The fraction is checked before a file is read."""
    check_fraction(valid_fraction)
    train, test = load_task(root, task, size, limit=limit)
    train, valid = split_valid(train, valid_fraction)
    return dict(train=train, valid=valid, test=test)


# ---------------------------------------------------------------------------------------
# Encoded questions and their batches
# ---------------------------------------------------------------------------------------
def support_ranks(story: Story) -> List[Tuple[int, int]]:
    """The supporting facts as (sentence index, rank) pairs: the rank in the reading order
    along a chain, 1 for each fact of a set or for a single fact."""
    return [(i, r + 1 if story.chain else 1) for r, i in enumerate(story.support)]


def encode_story(story: Story, vocab: Vocabulary, answer: int, support) -> tuple:
    """One question as the models encode it: (its sentences, its question) as word ids, then
    the answer's id and the supporting facts as the model takes them."""
    return ([vocab.encode(w) for w in story.sentences], vocab.encode(story.question), answer,
            support)


def answer_counts(items: Sequence[tuple], num_answers: int) -> Tensor:
    """How often each answer id answers the encoded (training) questions, plus one, so that
    every answer can be drawn: the unigram counts of a sampled answer layer."""
    counts = torch.ones(num_answers, dtype=torch.float64)
    for item in items:
        counts[item[2]] += 1
    return counts


def check_answer_layer(output: str, counts: Optional[Tensor]) -> None:
    """Refuse, before a model is built, an answer layer that is no head of fastsoftmax.nn, and
    a sampled one without the answers' training counts (answer_counts) it draws from."""
    if output not in HEADS:
        raise ValueError(f"output must be one of {tuple(HEADS)}, got {output!r}")
    if output != "full" and counts is None:
        raise ValueError(f"output {output!r} needs the answers' training counts (counts=...)")


@dataclass
class Batch:
    """What every question-answering batch is: a dataclass of tensors, `answer` [B] among
    them, moved to a device whole (`to`); len() is its number of questions. Each model's
    batch declares its tensors (MemN2N's and MemNN's through MemoryBatch)."""

    def to(self, device) -> "Batch":
        return type(self)(*(getattr(self, f.name).to(device) for f in dataclasses.fields(self)))

    def __len__(self) -> int:
        return self.answer.numel()


@dataclass
class MemoryBatch(Batch):
    """B questions whose story is a stack of M memories of J words, padded: story [B, M, J]
    int64 (0 = <pad>), mask [B, M] bool (a real memory), query [B, Q] int64, answer [B]
    int64; the model's supervision follows."""

    story: Tensor
    mask: Tensor
    query: Tensor
    answer: Tensor
