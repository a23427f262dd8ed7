"""Answering stories written by a user: parse text, check every word, predict, explain."""

from typing import List, Sequence

import torch

from ..vocabulary import Vocabulary
from .data import Story, collate, encode, tokenize
from .model import MemN2N


def parse_stories(text: str) -> List[Story]:
    """Stories separated by blank lines; in each, one sentence per line and the question last
    (ending with '?'). A leading bAbI line number is allowed. ValueError naming the line
    when a story has no question or no sentence."""
    stories, lines, first = [], [], 1
    for number, line in enumerate(text.splitlines() + [""], 1):
        if line.strip():
            if not lines:
                first = number
            lines.append((number, tokenize(line)))
            continue
        if not lines:
            continue
        *facts, (qline, question) = lines
        if question[-1:] != ["?"]:
            raise ValueError(f"the story starting at line {first} does not end with a question "
                             f"(line {qline} has no '?')")
        if not facts:
            raise ValueError(f"the question on line {qline} has no story before it")
        for number, words in facts:
            if "?" in words:
                raise ValueError(f"line {number} is a question inside a story; separate "
                                 f"stories with a blank line")
        stories.append(Story([w for _, w in facts], question, answer="", support=[],
                             lines=[n for n, _ in facts] + [qline]))
        lines = []
    if not stories:
        raise ValueError("no story given: write sentences, one per line, then a question "
                         "ending with '?'")
    return stories


def check_words(stories: Sequence[Story], vocab: Vocabulary) -> None:
    """ValueError naming the line and the words the model has never seen."""
    for story in stories:
        for number, words in zip(story.lines, story.sentences + [story.question]):
            unknown = sorted({w for w in words if w not in vocab.stoi or w in vocab.specials})
            if unknown:
                raise ValueError(f"line {number} has words the model does not know: "
                                 f"{', '.join(unknown)}")


@torch.no_grad()
def answer_stories(model: MemN2N, vocab: Vocabulary, answers: Sequence[str],
                   stories: Sequence[Story], device="cpu") -> List[dict]:
    """Per story: the answer, its probability, and per hop the attention weights over the
    story's sentences (the model's `memory_size` latest only)."""
    check_words(stories, vocab)
    model.eval()
    items = encode([Story(s.sentences, s.question, answers[0], []) for s in stories], vocab,
                   answers)
    b = collate(items, model.config["memory_size"]).to(device)
    log_p = model.log_prob(b.story, b.mask, b.query)
    _, attention = model.features(b.story, b.mask, b.query)
    out = []
    for i, story in enumerate(stories):
        n = int(b.mask[i].sum())
        best = int(log_p[i].argmax())
        out.append(dict(answer=answers[best], probability=float(log_p[i, best].exp()),
                        attention=[p[i, :n].tolist() for p in attention],
                        first=len(story.sentences) - n))
    return out
