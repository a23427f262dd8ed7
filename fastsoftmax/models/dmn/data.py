"""bAbI stories as the dynamic memory network reads them: one word sequence per story, the
positions where its sentences end, the question, the answer and the supporting facts.

The input module runs one GRU over the words of every kept sentence, read in order as a
single sequence; a fact is the GRU's state at the last word of its sentence (Kumar et al.
2016, §2.1). A batch (B stories, L words, M facts, Q question words), padded:

    words    [B, L] int64, 0 = <pad>     the story: sentence 1's words, sentence 2's, ...
    ends     [B, M] int64                 the position in `words` of each sentence's last word
    mask     [B, M] bool                  a real fact (padding facts get no attention)
    question [B, Q] int64                 qlen [B] int64: the question's length
    answer   [B] int64 (an answer id)
    support  [B, M] int64: 0, or the supporting fact's rank in the reading order (1 for a
                           fact whose order does not matter)

    story   "mary moved to the bathroom . john went to the hallway ."
    words    [ 7   12   4   3   9       2  8    6    4  3   10      2 ]
    ends     [ 5, 11 ]                    (0-based: the two '.')

Padding sits after a story's last word: the GRU reads left to right, so it never changes
the states the facts are read from. Only a story's `memory_size` latest sentences are kept
(a supporting fact older than that is lost with its sentence), as in MemN2N.
"""

import random
from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch
from torch import Tensor

from .. import babi
# PAD and split_valid are re-exported: names of the package since before babi.py had them
from ..babi import PAD, SPECIALS, Story, split_valid  # noqa: F401
from ..vocabulary import Vocabulary


def build_vocabulary(stories: Sequence[Story]) -> Vocabulary:
    """Every word of the (training) stories' sentences, questions and answers, <pad> id 0;
    words seen only at test time read as <unk>."""
    words = ([w for s in stories for sent in s.sentences for w in sent]
             + [w for s in stories for w in s.question] + [s.answer for s in stories])
    return Vocabulary.build([words], specials=SPECIALS, ties="alphabetical")


def answer_words(stories: Sequence[Story]) -> List[str]:
    """The answers of the (training) stories, sorted: the classes of the answer layer."""
    return sorted({s.answer for s in stories})


def encode(stories: Sequence[Story], vocab: Vocabulary, answers: Sequence[str]) -> list:
    """Stories as id lists: (sentences, question, answer id, support as (index, rank) pairs).
    An answer outside `answers` is a ValueError (the answer layer cannot name it)."""
    index = {w: i for i, w in enumerate(answers)}
    out = []
    for s in stories:
        if s.answer not in index:
            raise ValueError(f"answer {s.answer!r} is not among the model's {len(answers)} "
                             f"answers (those of the training stories)")
        if not s.sentences:
            raise ValueError(f"the question {' '.join(s.question)!r} has no story before it")
        out.append(babi.encode_story(s, vocab, index[s.answer], babi.support_ranks(s)))
    return out


@dataclass
class Batch(babi.Batch):
    """Padded stories as one word sequence each (see the module's docstring)."""

    words: Tensor
    ends: Tensor
    mask: Tensor
    question: Tensor
    qlen: Tensor
    answer: Tensor
    support: Tensor


def collate(items: Sequence[tuple], memory_size: int) -> Batch:
    """Pad encoded stories into a Batch, keeping each story's `memory_size` latest
    sentences."""
    rows, ends, supports = [], [], []
    for sentences, _, _, support in items:
        drop = max(0, len(sentences) - memory_size)
        flat, last = [], []
        for sentence in sentences[drop:]:
            flat += sentence
            last.append(len(flat) - 1)
        rows.append(flat)
        ends.append(last)
        supports.append([(i - drop, r) for i, r in support if i >= drop])
    B = len(items)
    L = max(1, max(len(r) for r in rows))
    M = max(1, max(len(e) for e in ends))
    Q = max(1, max(len(it[1]) for it in items))
    words = torch.tensor([r + [0] * (L - len(r)) for r in rows], dtype=torch.int64)
    end = torch.tensor([e + [0] * (M - len(e)) for e in ends], dtype=torch.int64)
    mask = torch.tensor([[True] * len(e) + [False] * (M - len(e)) for e in ends])
    question = torch.tensor([it[1] + [0] * (Q - len(it[1])) for it in items], dtype=torch.int64)
    qlen = torch.tensor([max(1, len(it[1])) for it in items], dtype=torch.int64)
    support = torch.zeros(B, M, dtype=torch.int64)
    for b, pairs in enumerate(supports):
        for i, rank in pairs:
            support[b, i] = rank
    answer = torch.tensor([it[2] for it in items], dtype=torch.int64)
    return Batch(words.reshape(B, L), end.reshape(B, M), mask.reshape(B, M), question, qlen,
                 answer, support)


def batches(items: Sequence[tuple], batch_size: int, *, memory_size: int, shuffle: bool = False,
            seed: int = 0, pool: int = 20):
    """Batches of `batch_size` stories. With `shuffle` (drawn from `seed`, one stream per
    epoch, so a resumed run sees the batches an uninterrupted one would), stories of similar
    length share a batch: each run of `pool` batches' worth of shuffled stories is sorted by
    length before it is cut, and the batches are shuffled again, which spares most of the
    padding of bAbI's long stories (tasks 2 and 3) while every batch stays random."""
    order = list(range(len(items)))
    if shuffle:
        rng = random.Random(seed)
        rng.shuffle(order)
        size = batch_size * pool
        order = [i for start in range(0, len(order), size)
                 for i in sorted(order[start:start + size],
                                 key=lambda i: sum(map(len, items[i][0][-memory_size:])))]
    cuts = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    if shuffle:
        rng.shuffle(cuts)
    for cut in cuts:
        yield collate([items[i] for i in cut], memory_size)


def load_babi(root, task: int, size: str = "1k", *, limit: Optional[int] = None,
              valid_fraction: float = 0.1, vocab: Optional[Vocabulary] = None,
              answers: Optional[list] = None) -> dict:
    """One real bAbI task (fastsoftmax.models.babi.load_task) as the run's data: stories
    (train / valid / test), vocabulary and answers (from the training file unless given, as
    on resume), encoded splits and answer counts (for the sampled heads)."""
    split = babi.read_split(root, task, size, valid_fraction=valid_fraction, limit=limit)
    training_file = split["train"] + split["valid"]
    if vocab is None:
        vocab = build_vocabulary(training_file)
    if answers is None:
        answers = answer_words(training_file)
    encoded = {k: encode(v, vocab, answers) for k, v in split.items()}
    return dict(split, vocab=vocab, answers=answers, encoded=encoded,
                counts=babi.answer_counts(encoded["train"], len(answers)))
