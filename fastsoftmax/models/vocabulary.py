"""The one vocabulary module of every model: counting the words of a corpus, ranking them by
count, and the token <-> id map.

`count_words` is the counting scan (gensim's, with its max_vocab_size pruning) and
`rank_by_count` the order by falling count with a tie rule: word2vec's vocabulary steps
(models/word2vec/data.py) and `Vocabulary.build` both stand on them.

`Vocabulary` is the map of the language model, seq2seq and memn2n. Ids follow falling
training count, so that id order is Zipf order (the log-uniform sampler assumes it).
`specials` take the first ids in the order given (seq2seq: <pad> <unk> <bos> <eos>);
`required` words always exist but are ranked by their count like any word (the LM's <unk> and
<eos>). Ties keep first appearance, or go alphabetical with ties="alphabetical".
"""

import logging
from collections import Counter
from typing import Iterable, List, Mapping, Optional, Sequence

import torch
from torch import Tensor

from .textfiles import pieces

UNK = "<unk>"
TIES = ("first", "last", "alphabetical")


def count_words(sentences: Iterable[Sequence[str]], max_vocab_size: Optional[int] = None, *,
                progress_per: int = 10000, log: Optional[logging.Logger] = None):
    """(counts: Counter word -> count in first-seen order, sentences, raw words), sentences
    counted as pieces of at most MAX_SENTENCE_WORDS words. When the dictionary grows past
    max_vocab_size, words with count < r are dropped, r = 1, 2, ... (gensim's pruning).
    `log`, when given, receives gensim's progress lines."""
    if log:
        log.info("collecting all words and their counts")
    counts: Counter = Counter()
    n_sentences = n_words = 0
    min_reduce = 1
    for sentence in sentences:
        if log and progress_per and n_sentences and n_sentences % progress_per == 0:
            log.info("PROGRESS: at sentence #%i, processed %i words, keeping %i word types",
                     n_sentences, n_words, len(counts))
        for piece in pieces(sentence):
            n_sentences += 1
            n_words += len(piece)
            counts.update(piece)  # Counter's C loop; keys stay in first-seen order
            if max_vocab_size and len(counts) > max_vocab_size:
                for word in [w for w, c in counts.items() if c < min_reduce]:
                    del counts[word]
                min_reduce += 1
    if log:
        log.info("collected %i word types from a corpus of %i raw words and %i sentences",
                 len(counts), n_words, n_sentences)
    return counts, n_sentences, n_words


def rank_by_count(counts: Mapping[str, int], ties: str = "first") -> List[str]:
    """The words of `counts` (a mapping in first-seen order) by falling count. Equal counts
    keep first-seen order ("first"), go later-seen first ("last": gensim's sorted_vocab) or
    alphabetical ("alphabetical")."""
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
    words = list(counts)
    if ties == "last":
        words.reverse()  # sorted() is stable: reversed input puts later-seen words first
    if ties == "alphabetical":
        return sorted(words, key=lambda w: (-counts[w], w))
    return sorted(words, key=lambda w: -counts[w])


class Vocabulary:
    """itos (list of tokens), stoi (token -> id) and the training counts (float64 [V])."""

    def __init__(self, itos: Sequence[str], counts: Optional[Tensor] = None, *,
                 unk: str = UNK, specials: Sequence[str] = ()):
        self.itos = list(itos)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("vocabulary has duplicate words")
        if tuple(self.itos[: len(specials)]) != tuple(specials):
            raise ValueError(f"a vocabulary must start with {tuple(specials)}")
        if unk not in self.stoi:
            raise ValueError(f"vocabulary lacks {unk}")
        self.unk, self.specials = unk, tuple(specials)
        if counts is None:
            counts = torch.ones(len(self.itos), dtype=torch.float64)
        self.counts = torch.as_tensor(counts).double()
        if self.counts.numel() != len(self.itos):
            raise ValueError(f"{self.counts.numel()} counts for {len(self.itos)} words")

    @classmethod
    def build(cls, sequences: Iterable[Sequence[str]], *, specials: Sequence[str] = (),
              required: Sequence[str] = (), unk: str = UNK, max_size: Optional[int] = None,
              ties: str = "first") -> "Vocabulary":
        """The vocabulary of `sequences` (at most max_size words, specials included)."""
        if ties not in ("first", "alphabetical"):
            raise ValueError(f"ties must be 'first' or 'alphabetical', got {ties!r}")
        counter = count_words(sequences)[0]
        for word in required:
            counter.setdefault(word, 0)
        words = rank_by_count({w: c for w, c in counter.items() if w not in specials}, ties)
        if max_size is not None:
            words = words[: max(0, max_size - len(specials))]
        itos = list(specials) + words
        counts = torch.tensor([counter.get(w, 0) for w in itos], dtype=torch.float64)
        return cls(itos, counts, unk=unk, specials=specials)

    def __len__(self) -> int:
        return len(self.itos)

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocabulary) and self.itos == other.itos

    def encode(self, tokens: Sequence[str]) -> List[int]:
        unk = self.stoi[self.unk]
        return [self.stoi.get(t, unk) for t in tokens]

    def decode(self, ids) -> List[str]:
        return [self.itos[int(i)] for i in ids]

    def oov_rate(self, tokens: Sequence[str], ignore: Sequence[str] = ()) -> float:
        """The fraction of `tokens` (those not in `ignore`) this vocabulary does not hold."""
        counted = [t for t in tokens if t not in ignore]
        if not counted:
            return 0.0
        return sum(t not in self.stoi for t in counted) / len(counted)

    def state_dict(self) -> dict:
        return dict(itos=self.itos, counts=self.counts, unk=self.unk, specials=self.specials)

    @classmethod
    def from_state_dict(cls, state: dict) -> "Vocabulary":
        return cls(state["itos"], state["counts"], unk=state["unk"], specials=state["specials"])
