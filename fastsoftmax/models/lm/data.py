"""Language-model data: corpus files, the vocabulary, batching into streams.

Shapes: L tokens in a split, B streams (batch), T = BPTT length.

    ids [L]:  a b c d e f g h i j k l m n o p q r s t u v w x     (L = 24)
    batchify(ids, B=4) -> [B, L // B], each row a contiguous stream:
        a b c d e f
        g h i j k l
        m n o p q r
        s t u v w x
    bptt_batches(data, T=2): input data[:, i:i+2], target data[:, i+1:i+3]; the hidden state
    is carried from one column block to the next, so a stream reads as one long text.
"""

import math
import os
from typing import Dict, Iterator, List, Optional, Tuple

import torch
from torch import Tensor

from ..textfiles import read_lines
from ..vocabulary import UNK, Vocabulary

EOS = "<eos>"


def build_vocabulary(tokens: List[str]) -> Vocabulary:
    """Words of the training split by falling count (ties by first appearance); <unk> and
    <eos> always exist."""
    return Vocabulary.build([tokens], required=(UNK, EOS))


def read_tokens(path: str, encoding: str = "utf-8") -> List[str]:
    """Whitespace tokens of a file, `<eos>` after every line (blank lines included, as the
    usual PTB / WikiText perplexities count them). A file with no words is an error."""
    tokens: List[str] = []
    words = 0
    for line in read_lines(path, encoding):
        line_tokens = line.split()
        words += len(line_tokens)
        tokens.extend(line_tokens)
        tokens.append(EOS)
    if words == 0:
        raise ValueError(f"{path} is empty: it holds no words")
    return tokens


_SPLIT_NAMES = {
    "train": ("ptb.train.txt", "wiki.train.tokens", "train.txt", "train"),
    "valid": ("ptb.valid.txt", "wiki.valid.tokens", "valid.txt", "valid", "dev.txt"),
    "test": ("ptb.test.txt", "wiki.test.tokens", "test.txt", "test"),
}


def find_split(data_dir: str, split: str) -> str:
    """The file holding `split` in `data_dir` (PTB, WikiText or plain train/valid/test)."""
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"data directory not found: {data_dir}")
    for name in _SPLIT_NAMES[split]:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"no {split} split in {data_dir}: expected one of {', '.join(_SPLIT_NAMES[split])}"
    )


class Corpus:
    """Train/valid/test id streams (int64 [L]) over a vocabulary built from train (or the one
    given, e.g. a checkpoint's). `oov[split]` is the fraction of the split's words (not
    counting <eos>) outside the vocabulary, which became <unk>."""

    def __init__(self, data_dir: str, vocab: Optional[Vocabulary] = None,
                 splits=("train", "valid", "test"), encoding: str = "utf-8"):
        self.paths = {s: find_split(data_dir, s) for s in splits}
        tokens = {s: read_tokens(p, encoding) for s, p in self.paths.items()}
        if vocab is None:
            if "train" not in tokens:
                raise ValueError("building a vocabulary needs the train split")
            vocab = build_vocabulary(tokens["train"])
        self.vocab = vocab
        self.oov = {s: vocab.oov_rate(t, ignore=(EOS,)) for s, t in tokens.items()}
        self.splits: Dict[str, Tensor] = {
            s: torch.tensor(vocab.encode(t), dtype=torch.int64) for s, t in tokens.items()
        }

    def __getitem__(self, split: str) -> Tensor:
        return self.splits[split]


def batchify(ids: Tensor, batch_size: int) -> Tensor:
    """[L] → [B, L // B]: B contiguous streams, the tail that does not fill a column dropped."""
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    length = ids.numel() // batch_size
    if length < 2:
        raise ValueError(
            f"{ids.numel()} tokens are too few for {batch_size} streams (need at least 2 each)"
        )
    return ids[: length * batch_size].view(batch_size, length)


def shard_rows(data: Tensor, rank: int, world_size: int, dim: int = 0) -> Tensor:
    """The rank's share of the streams of a [B, L] batch (or of a hidden state, streams on
    `dim` 1): each rank takes B / world_size consecutive streams, so the per-rank mean losses
    average to the global-batch mean."""
    if data.size(dim) % world_size:
        raise ValueError(
            f"batch size {data.size(dim)} is not divisible by the {world_size} processes"
        )
    per = data.size(dim) // world_size
    return data.narrow(dim, rank * per, per)


def bptt_batches(data: Tensor, bptt: int) -> Iterator[Tuple[Tensor, Tensor]]:
    """(input, target) pairs of [B, t ≤ bptt], target shifted one step ahead."""
    if bptt <= 0:
        raise ValueError(f"bptt must be positive, got {bptt}")
    for i in range(0, data.size(1) - 1, bptt):
        t = min(bptt, data.size(1) - 1 - i)
        yield data[:, i : i + t], data[:, i + 1 : i + 1 + t]


def num_bptt_batches(data: Tensor, bptt: int) -> int:
    """How many BPTT windows of `bptt` steps bptt_batches cuts `data` [B, L] into."""
    return math.ceil((data.size(1) - 1) / bptt)
