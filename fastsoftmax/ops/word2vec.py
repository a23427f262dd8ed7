"""word2vec's training op (csrc/cpu/word2vec.cpp, csrc/cuda/word2vec.cu): one SGD pass over a
batch of sentences, with negative sampling and/or hierarchical softmax, in word2vec.c's
sequential order or in lockstep rounds (csrc/common/word2vec_math.h)."""

import inspect
from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Optional, Tuple

import numpy as np
import torch
from torch import Tensor
from torch._prims_common import alert_not_deterministic as _alert_not_deterministic

from ._registry import OpParts, _op

PARTS = OpParts()


@dataclass(eq=False)
class Word2VecTrainArgs:
    """The arguments of the op word2vec_train, written once: the fields are its schema
    (csrc/ops.cpp), in its order. `word2vec_train` takes them positionally up to num_workers
    and the rest by keyword; `hs` (whether syn1 is given) and `deterministic` (torch's
    deterministic mode) are the op's own, which `run` sets before it calls the op."""

    syn0: Tensor
    syn1neg: Tensor
    tokens: Tensor
    sentence_ends: Tensor
    words_before: Tensor
    keep_prob: Tensor
    ns_prob: Tensor
    ns_alias: Tensor
    seed: int
    first_token: int
    sg: bool
    cbow_mean: bool
    window: int
    negative: int
    shrink_windows: bool
    alpha: float
    min_alpha: float
    total_words: float
    num_workers: int
    _: KW_ONLY
    syn1: Optional[Tensor] = None
    hs_paths: Optional[Tensor] = None
    hs_offsets: Optional[Tensor] = None
    lockf: Optional[Tensor] = None
    hs: bool = field(default=False, init=False)
    round_size: int = 0
    deterministic: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.syn1 is not None and (self.hs_paths is None or self.hs_offsets is None):
            raise ValueError("word2vec_train: syn1 (hierarchical softmax) needs hs_paths and "
                             "hs_offsets (see huffman_paths)")

    def run(self) -> Tensor:
        """Calls the op (see word2vec_train)."""
        if int(self.num_workers) > 1 and int(self.round_size) == 0:
            # Hogwild updates race by design. A stable kernel cannot raise torch's alert
            # itself: this is ATen's alertNotDeterministic in Python (same message, same
            # warn_only rule).
            _alert_not_deterministic(
                "word2vec_train with num_workers > 1 (Hogwild updates race by design; use one "
                "worker)")
        self.hs = self.syn1 is not None
        self.deterministic = torch.are_deterministic_algorithms_enabled()
        return _op("word2vec_train")(*self._op_args())

    def _op_args(self) -> tuple:
        """The fields in order, numbers as the schema's types; without hs the op's empty
        tables of hierarchical softmax, and without lockf its empty lockf."""
        args = {f.name: getattr(self, f.name) for f in fields(self)}
        device = self.syn0.device
        if not self.hs:
            args.update(syn1=self.syn0.new_empty(0, self.syn0.shape[-1]),
                        hs_paths=torch.empty(0, dtype=torch.int32, device=device),
                        hs_offsets=torch.empty(0, dtype=torch.int64, device=device))
        if self.lockf is None:
            args["lockf"] = torch.empty(0, dtype=torch.float32, device=device)
        return tuple(f.type(args[f.name]) if f.type in (int, bool, float) else args[f.name]
                     for f in fields(self))


def word2vec_train(*args, **kwargs) -> Tensor:
    """One SGD pass of word2vec over a batch of sentences, updating syn0 and syn1neg (and,
    with hierarchical softmax, syn1 [V - 1, D]) in place; returns float64 [3] = (summed loss,
    positive predictions, tokens kept). Hierarchical softmax runs when syn1 is given, with the
    Huffman paths (hs_paths, hs_offsets) of `huffman_paths`. `lockf` (gensim's vectors_lockf,
    float32 [L]) scales word w's input-vector updates by lockf[w % L]. round_size 0 trains in
    word2vec.c's sequential order (num_workers CPU threads Hogwild; on CUDA one warp);
    round_size R > 0 in lockstep rounds of R centres, the same model for any num_workers (on
    CUDA bit-identical from run to run under torch.use_deterministic_algorithms). The
    arguments are those of `Word2VecTrainArgs` (see csrc/ops.cpp)."""
    return Word2VecTrainArgs(*args, **kwargs).run()


word2vec_train.__signature__ = inspect.signature(Word2VecTrainArgs).replace(
    return_annotation=Tensor)


def word2vec_train_batched(*args, lockf: Optional[Tensor] = None, group: int = 1,
                           **kwargs) -> Tensor:
    """word2vec_train's negative sampling in minibatches of shared negatives (CPU): the kept
    centres of each sentence in groups of `group`, one set of K negatives per group, each
    group one SGD step of small matrix products (csrc/cpu/word2vec_batched.cpp). Takes
    word2vec_train's arguments up to num_workers, and `lockf`; no hierarchical softmax, no
    rounds. Returns float64 [3] = (summed loss, positive predictions, tokens kept)."""
    unsupported = sorted(set(kwargs) - set(_SHARED))
    if unsupported:
        raise TypeError(f"word2vec_train_batched: unsupported keyword(s) {unsupported}: the "
                        "batched order has no hierarchical softmax and no rounds")
    if type(group) is not int or group < 1:
        raise ValueError(f"word2vec_train_batched: group must be an int >= 1, got {group!r}")
    call = Word2VecTrainArgs(*args, lockf=lockf, **kwargs)
    if int(call.num_workers) > 1:
        _alert_not_deterministic(
            "word2vec_train_batched with num_workers > 1 (Hogwild updates race by design; use "
            "one worker)")
    ops_args = call._op_args()
    return _op("word2vec_train_batched")(*ops_args[:len(_SHARED)], ops_args[_LOCKF], int(group))


# The batched op's schema: word2vec_train's arguments up to num_workers, then lockf and group.
_FIELDS = [f.name for f in fields(Word2VecTrainArgs)]
_SHARED = _FIELDS[:_FIELDS.index("num_workers") + 1]
_LOCKF = _FIELDS.index("lockf")
word2vec_train_batched.__signature__ = inspect.Signature(
    list(inspect.signature(Word2VecTrainArgs).parameters.values())[:len(_SHARED)] + [
        inspect.Parameter("lockf", inspect.Parameter.KEYWORD_ONLY, default=None,
                          annotation=Optional[Tensor]),
        inspect.Parameter("group", inspect.Parameter.KEYWORD_ONLY, default=1, annotation=int)],
    return_annotation=Tensor)


def huffman_paths(links: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor]:
    """word2vec_train's flat Huffman paths from a tree's links and code lengths (ClassTree):
    (steps int32 [P], offsets int64 [V + 1]); word w's path is steps[offsets[w]:offsets[w+1]],
    root first, each step 2 * inner node + code, i.e. word2vec.c's point and code."""
    links = links.to("cpu", torch.int64)
    lengths = lengths.to("cpu", torch.int64)
    V = lengths.numel()
    offsets = torch.zeros(V + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    steps = torch.empty(int(offsets[-1]), dtype=torch.int64)
    # Walk all leaves up at once: the k-th step up from word w lands at offsets[w+1] - 1 - k.
    node = torch.arange(V)
    for k in range(int(lengths.max()) if V else 0):
        alive = (k < lengths).nonzero().squeeze(1)
        link = links[node[alive]]
        steps[offsets[alive + 1] - 1 - k] = link
        node[alive] = V + (link >> 1)
    return steps.to(torch.int32), offsets


def corpus_encode(text: Tensor, vocab_bytes: Tensor, vocab_ends: Tensor,
                  max_sentence_words: int) -> Tuple[Tensor, Tensor, Tensor, int]:
    """word2vec's corpus_file reader on whole lines of UTF-8 text (uint8 [B]): (tokens int32
    in-vocabulary ids, sentence_ends int64 [S], raw words per sentence int64 [S], offset of the
    first byte that is not UTF-8 or -1). The vocabulary is its words' UTF-8 bytes, word i
    ending at vocab_ends[i]. A host op with data-dependent sizes (no fake kernel: it reads a
    file's bytes, nothing to trace). See csrc/cpu/corpus_encode.cpp."""
    return _op("corpus_encode")(text, vocab_bytes, vocab_ends, int(max_sentence_words))


def corpus_count(text: Tensor, max_sentence_words: int):
    """corpus_encode's vocabulary scan: (word_bytes uint8, word_ends int64 [U], counts int64
    [U], sentences, raw words, offset of the first byte that is not UTF-8 or -1), the distinct
    words in first-seen order. A host op without a fake kernel, as corpus_encode."""
    return _op("corpus_count")(text, int(max_sentence_words))


@PARTS.fake("word2vec_train")
def _word2vec_train_fake(syn0, *args, **kwargs):  # the arguments: Word2VecTrainArgs
    return syn0.new_empty(3, dtype=torch.float64)


@PARTS.fake("word2vec_train_batched")
def _word2vec_train_batched_fake(syn0, *args, **kwargs):
    return syn0.new_empty(3, dtype=torch.float64)


def lookup_words(table: dict, pieces: list) -> np.ndarray:
    """table.get(word, -1) for every word of `pieces` (a list of lists of words), in order, as
    int64: word2vec's reader of in-memory corpora, in C (csrc/python_module.cpp), where
    map(table.get, ...) in Python cost 54 ns a word on the cores that train. Raises dict.get's
    errors (an unhashable word), and TypeError for a piece that is not a list."""
    from .. import _C  # the compiled extension, loaded by fastsoftmax.ops

    return np.frombuffer(_C.lookup_words(table, pieces), dtype=np.int64)
