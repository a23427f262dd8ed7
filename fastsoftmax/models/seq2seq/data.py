"""seq2seq data: pair files, tokens, the vocabularies, batches.

Layout of one example: source ids x_1..x_S; decoder input <bos> y_1..y_T; decoder output
y_1..y_T <eos>. Padding id 0 everywhere.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator, Sequence

import torch

from ..textfiles import read_lines
from ..vocabulary import Vocabulary

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")
TASKS = ("pairs", "chars")


def read_pairs(path: str, task: str, max_words: int | None = None,
               encoding: str = "utf-8") -> list[tuple[str, str]]:
    """Reads (source, target) string pairs.

    task 'pairs': `source<TAB>target[<TAB>anything]` per line (the Tatoeba/manythings layout;
    newer files carry a third attribution column, which is ignored).
    task 'chars': `source_target`, split on the first '_' (the date and addition sets); the
    fixed-width space padding of those files is stripped.
    max_words drops pairs whose either side has more words than that ('pairs' only).
    Errors name the file and line (a byte `encoding` cannot decode included).
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    return parse_pairs(list(read_lines(path, encoding)), task, max_words=max_words, where=path)


def parse_pairs(
    lines: Iterable[str], task: str, max_words: int | None = None, where: str = "<input>"
) -> list[tuple[str, str]]:
    """As read_pairs, from lines already in memory; errors name `where` and the line number."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    sep = "\t" if task == "pairs" else "_"
    shown = "TAB" if task == "pairs" else "'_'"
    pairs = []
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\r")
        if not line.strip():
            raise ValueError(f"{where}:{n}: empty line; every line must be source{shown}target")
        if sep not in line:
            raise ValueError(f"{where}:{n}: no {shown} separating source from target: {line!r}")
        src, rest = line.split(sep, 1)
        tgt = rest.split("\t", 1)[0] if task == "pairs" else rest
        if task == "chars":
            src, tgt = src.strip(), tgt.strip()
        if not src.strip() or not tgt.strip():
            side = "source" if not src.strip() else "target"
            raise ValueError(f"{where}:{n}: empty {side}: {line!r}")
        if (
            max_words is not None
            and task == "pairs"
            and (len(tokenize(src, "pairs")) > max_words or len(tokenize(tgt, "pairs")) > max_words)
        ):
            continue
        pairs.append((src, tgt))
    if not pairs:
        raise ValueError(f"{where}: no usable pairs")
    return pairs


_WORD = re.compile(r"\w+(?:'\w+)?|[^\w\s]", re.UNICODE)


def tokenize(text: str, task: str) -> list[str]:
    """'chars': one token per character. 'pairs': lower-cased words and punctuation marks, with
    the French narrow/no-break spaces before punctuation treated as spaces."""
    if task == "chars":
        return list(text)
    text = text.replace("\u202f", " ").replace("\u00a0", " ").replace("\u2019", "'").lower()
    return _WORD.findall(text)


def detokenize(tokens: Sequence[str], task: str) -> str:
    """The text of `tokens`: joined without spaces for a character task, with spaces else."""
    return "".join(tokens) if task == "chars" else " ".join(tokens)


def build_vocabulary(sequences: Iterable[Sequence[str]], max_size: int | None = None
                     ) -> Vocabulary:
    """Ids 0..3 are <pad>, <unk>, <bos>, <eos>; the rest by falling frequency (ties
    alphabetical, so a vocabulary is a function of the data alone)."""
    return Vocabulary.build(sequences, specials=SPECIALS, max_size=max_size, ties="alphabetical")


def decode_output(vocab: Vocabulary, ids: Iterable[int]) -> list[str]:
    """Tokens of a decoded row up to (not including) the first <eos>; padding dropped."""
    out = []
    for i in ids:
        i = int(i)
        if i == EOS:
            break
        if i not in (PAD, BOS):
            out.append(vocab.itos[i])
    return out


def split_indices(n: int, valid_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """A seeded shuffle, the first valid_fraction held out."""
    if not 0.0 <= valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in [0, 1), got {valid_fraction}")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    k = round(n * valid_fraction)
    return order[k:], order[:k]


class Batch:
    """Padded tensors for a list of (source ids, target ids) examples.

    src [B, S], src_len [B]; tgt_in [B, T+1] = <bos> y; tgt_out [B, T+1] = y <eos>."""

    def __init__(self, examples: Sequence[tuple[Sequence[int], Sequence[int]]]):
        if not examples:
            raise ValueError("an empty batch")
        B = len(examples)
        S = max(len(s) for s, _ in examples)
        T = max(len(t) for _, t in examples) + 1
        self.src = torch.full((B, S), PAD, dtype=torch.long)
        self.src_len = torch.tensor([len(s) for s, _ in examples], dtype=torch.long)
        self.tgt_in = torch.full((B, T), PAD, dtype=torch.long)
        self.tgt_out = torch.full((B, T), PAD, dtype=torch.long)
        for b, (s, t) in enumerate(examples):
            if len(s) == 0:
                raise ValueError(f"example {b} has an empty source")
            self.src[b, : len(s)] = torch.as_tensor(s, dtype=torch.long)
            self.tgt_in[b, 0] = BOS
            self.tgt_in[b, 1 : len(t) + 1] = torch.as_tensor(t, dtype=torch.long)
            self.tgt_out[b, : len(t)] = torch.as_tensor(t, dtype=torch.long)
            self.tgt_out[b, len(t)] = EOS

    def to(self, device) -> Batch:
        for k in ("src", "src_len", "tgt_in", "tgt_out"):
            setattr(self, k, getattr(self, k).to(device))
        return self


def batches(
    examples: Sequence[tuple[Sequence[int], Sequence[int]]],
    batch_size: int,
    shuffle: bool = False,
    seed: int = 0,
) -> Iterator[Batch]:
    """Batches of examples of similar source length (less padding, so less wasted work); with
    shuffle the batches come in a seeded random order and their membership varies by epoch."""
    order = list(range(len(examples)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
    # Sort within windows of 50 batches only, so shuffled epochs still mix lengths across batches.
    window = batch_size * 50
    chunks = []
    for w in range(0, len(order), window):
        part = sorted(order[w : w + window], key=lambda i: len(examples[i][0]))
        chunks += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    if shuffle:
        rng.shuffle(chunks)
    for c in chunks:
        yield Batch([examples[i] for i in c])


def encode_pairs(pairs: Sequence[tuple[str, str]], task: str, src_vocab: Vocabulary,
                 tgt_vocab: Vocabulary) -> list[tuple[list[int], list[int]]]:
    """The (source ids, target ids) of each text pair, tokenized for `task`."""
    return [(src_vocab.encode(tokenize(s, task)), tgt_vocab.encode(tokenize(t, task)))
            for s, t in pairs]


def split_task(pairs: Sequence[tuple[str, str]], task: str, *, valid_fraction: float = 0.1,
               seed: int = 0, src_vocab_size: int | None = None,
               tgt_vocab_size: int | None = None,
               vocabs: tuple[Vocabulary, Vocabulary] | None = None) -> dict:
    """A seeded train/held-out split of `pairs`, vocabularies built from the training part
    (or `vocabs`), and both parts encoded."""
    tr, va = split_indices(len(pairs), valid_fraction, seed)
    train_pairs = [pairs[i] for i in tr]
    valid_pairs = [pairs[i] for i in va]
    if vocabs is None:
        src_vocab = build_vocabulary((tokenize(s, task) for s, _ in train_pairs), src_vocab_size)
        tgt_vocab = build_vocabulary((tokenize(t, task) for _, t in train_pairs), tgt_vocab_size)
    else:
        src_vocab, tgt_vocab = vocabs
    return {
        "task": task,
        "train_pairs": train_pairs,
        "valid_pairs": valid_pairs,
        "src_vocab": src_vocab,
        "tgt_vocab": tgt_vocab,
        "train": encode_pairs(train_pairs, task, src_vocab, tgt_vocab),
        "valid": encode_pairs(valid_pairs, task, src_vocab, tgt_vocab),
    }


def load_task(data: str, task: str, *, max_words: int | None = None,
              valid_fraction: float = 0.1, seed: int = 0, limit: int | None = None,
              src_vocab_size: int | None = None, tgt_vocab_size: int | None = None,
              vocabs: tuple[Vocabulary, Vocabulary] | None = None,
              encoding: str = "utf-8") -> dict:
    """Reads a pair file and splits it as split_task. limit keeps the first `limit` usable
    pairs."""
    pairs = read_pairs(data, task, max_words=max_words, encoding=encoding)
    if limit is not None:
        pairs = pairs[:limit]
    return split_task(pairs, task, valid_fraction=valid_fraction, seed=seed,
                      src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                      vocabs=vocabs)


def target_counts(examples, vocab_size: int) -> torch.Tensor:
    """Frequency of each target id (with one <eos> per example) for the sampled heads."""
    counts = torch.zeros(vocab_size, dtype=torch.float64)
    for _, t in examples:
        counts += torch.bincount(torch.tensor(list(t) + [EOS], dtype=torch.long),
                                 minlength=vocab_size)
    return counts
