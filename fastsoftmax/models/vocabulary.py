"""The one token <-> id map of every model (language model, seq2seq).

Ids follow falling training count, so that id order is Zipf order (the log-uniform sampler
assumes it). `specials` take the first ids in the order given (seq2seq: <pad> <unk> <bos>
<eos>); `required` words always exist but are ranked by their count like any word (the LM's
<unk> and <eos>). Ties keep first appearance, or go alphabetical with ties="alphabetical".
"""

from collections import Counter
from typing import Iterable, List, Optional, Sequence

import torch
from torch import Tensor

UNK = "<unk>"


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
        counter = Counter(t for seq in sequences for t in seq)
        for word in required:
            counter.setdefault(word, 0)
        words = [w for w in counter if w not in specials]
        # Counter keeps insertion order and sorted() is stable: ties stay in first-seen order.
        key = (lambda w: -counter[w]) if ties == "first" else (lambda w: (-counter[w], w))
        words = sorted(words, key=key)
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
