"""bAbI questions for the strongly supervised memory network: the vocabulary, the encoded
questions and their batches.

The questions come from the shared bAbI reader (fastsoftmax.models.babi): each one holds the
statements of its story before it, the question, the one-word answer and its supporting
facts in the file's order, which for tasks 2 and 3 is the reasoning chain (the object's
fact first, then its carrier's move). The network's hop k is trained to pick fact k of that
chain; when a question has fewer facts than hops, the later hops pick its last fact again.

Batches (B questions, M memories, J words per sentence), memories in story order, padded:

    story   [B, M, J] int64, 0 = <pad>      mask [B, M] bool: a real memory
    query   [B, Q] int64                    answer [B] int64: the answer's word id
    targets [B, K] int64: hop k's supporting memory, -1 where it fell out of memory

A memory's index in the story is its write time: memory i was written before memory i + 1.
"""

import random
from dataclasses import dataclass
from typing import List, Sequence

import torch
from torch import Tensor

# PAD and split_valid are re-exported: names of the package since before babi.py had them
from ..babi import PAD, SPECIALS, MemoryBatch, Story, encode_story, split_valid  # noqa: F401
from ..vocabulary import Vocabulary


def build_vocabulary(stories: Sequence[Story]) -> Vocabulary:
    """Every word of the stories, questions and answers (<pad> is id 0, <unk> id 1): the
    response module ranks these words, so each answer must be one of them."""
    def words():
        for s in stories:
            yield from s.sentences
            yield s.question
            yield [s.answer]
    return Vocabulary.build(words(), specials=SPECIALS)


def encode(stories: Sequence[Story], vocab: Vocabulary) -> list:
    """Questions as (sentences, question, answer id, supporting indices) of word ids. An answer
    the vocabulary lacks becomes <unk>, which the response module never answers: such a test
    question counts as wrong."""
    out = []
    for s in stories:
        if not s.support:
            raise ValueError(f"the question {' '.join(s.question)!r} has no supporting facts; "
                             f"the strongly supervised network needs them")
        out.append(encode_story(s, vocab, vocab.encode([s.answer])[0], list(s.support)))
    return out


@dataclass
class Batch(MemoryBatch):
    """Padded questions (see the module's docstring) with targets [B, K]: hop k's supporting
    memory, -1 where it fell out of memory."""

    targets: Tensor


def hop_targets(support: Sequence[int], hops: int) -> List[int]:
    """Hop k's supporting fact (k = 1 .. hops): fact k of the chain, the last one for the hops
    beyond it."""
    return [support[min(k, len(support) - 1)] for k in range(hops)]


def collate(items: Sequence[tuple], memory_size: int, hops: int) -> Batch:
    """Pad encoded questions into a Batch, keeping each story's `memory_size` latest
    statements (a supporting fact older than that is lost with its statement: target -1)."""
    kept = []
    for sentences, question, answer, support in items:
        drop = max(0, len(sentences) - memory_size)
        kept.append((sentences[drop:], question, answer,
                     [i - drop if i >= drop else -1 for i in hop_targets(support, hops)]))
    M = max([1] + [len(k[0]) for k in kept])
    J = max([1] + [len(w) for k in kept for w in k[0]])
    Q = max([1] + [len(k[1]) for k in kept])
    story = torch.zeros(len(kept), M, J, dtype=torch.int64)
    mask = torch.zeros(len(kept), M, dtype=torch.bool)
    query = torch.zeros(len(kept), Q, dtype=torch.int64)
    for b, (sentences, question, _, _) in enumerate(kept):
        for i, words in enumerate(sentences):
            story[b, i, :len(words)] = torch.tensor(words, dtype=torch.int64)
        mask[b, :len(sentences)] = True
        query[b, :len(question)] = torch.tensor(question, dtype=torch.int64)
    answer = torch.tensor([k[2] for k in kept], dtype=torch.int64)
    targets = torch.tensor([k[3] for k in kept], dtype=torch.int64).reshape(len(kept), hops)
    return Batch(story, mask, query, answer, targets)


def batches(items: Sequence[tuple], batch_size: int, *, memory_size: int, hops: int,
            shuffle: bool = False, seed: int = 0):
    """Batches of `batch_size` questions, shuffled from `seed` (one stream per epoch, so a
    resumed run sees the batches an uninterrupted one would)."""
    order = list(range(len(items)))
    if shuffle:
        random.Random(seed).shuffle(order)
    for start in range(0, len(order), batch_size):
        yield collate([items[i] for i in order[start:start + batch_size]], memory_size, hops)

