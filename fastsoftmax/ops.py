"""Thin wrappers over torch.ops.fastsoftmax with their fake (meta) kernels.

Every native op is declared once in csrc/ops.cpp; this module makes each usable under
torch.compile (fake kernels) and is the only Python code that calls torch.ops directly.
"""

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import _loader

_C = _loader.load()

KIND_ALIAS, KIND_UNIFORM, KIND_LOG_UNIFORM = 0, 1, 2


def draw_seed(generator: Optional[torch.Generator], device: torch.device) -> Tensor:
    """One 64-bit Philox key from a CPU generator (the default one when None).

    Draws on every device are a function of this key, so the same CPU generator state gives
    the same ids on CPU and CUDA; a CUDA generator is refused rather than silently giving a
    different stream.
    """
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(
            "fastsoftmax samplers take a CPU torch.Generator on every device (the draw is a "
            "function of a seed taken from it, so CPU and CUDA give the same ids); got a "
            f"generator on {generator.device}"
        )
    seed = torch.randint(-(2**63), 2**63 - 1, (1,), dtype=torch.int64, generator=generator)
    return seed.to(device, non_blocking=True)


def alias_build(weights: Tensor) -> Tuple[Tensor, Tensor]:
    return torch.ops.fastsoftmax.alias_build.default(weights)


def sample(
    prob: Tensor, alias: Tensor, seed: Tensor, num_classes: int, kind: int, size: Sequence[int]
) -> Tensor:
    return torch.ops.fastsoftmax.sample.default(prob, alias, seed, num_classes, kind, list(size))


def sample_unique(
    prob: Tensor, alias: Tensor, seed: Tensor, num_classes: int, kind: int, num_sampled: int
) -> Tuple[Tensor, Tensor]:
    return torch.ops.fastsoftmax.sample_unique.default(
        prob, alias, seed, num_classes, kind, num_sampled
    )


@torch.library.register_fake("fastsoftmax::alias_build")
def _alias_build_fake(weights):
    torch._check(weights.dim() == 1, lambda: "weights must be 1-D")
    n = weights.shape[0]
    return weights.new_empty(n, dtype=torch.float32), weights.new_empty(n, dtype=torch.int32)


@torch.library.register_fake("fastsoftmax::sample")
def _sample_fake(prob, alias, seed, num_classes, kind, size):
    return seed.new_empty(size, dtype=torch.int64)


@torch.library.register_fake("fastsoftmax::sample_unique")
def _sample_unique_fake(prob, alias, seed, num_classes, kind, num_sampled):
    return seed.new_empty(num_sampled, dtype=torch.int64), seed.new_empty((), dtype=torch.int64)


# ---------------------------------------------------------------------------------------
# word2vec (issue 4)
# ---------------------------------------------------------------------------------------


def word2vec_train(
    syn0: Tensor, syn1neg: Tensor, tokens: Tensor, sentence_ends: Tensor, words_before: Tensor,
    keep_prob: Tensor, ns_prob: Tensor, ns_alias: Tensor, seed: int, first_token: int,
    sg: bool, cbow_mean: bool, window: int, negative: int, shrink_windows: bool, alpha: float,
    min_alpha: float, total_words: float, num_workers: int,
) -> Tensor:
    """One Hogwild SGD pass of word2vec over a batch of sentences, updating syn0 and syn1neg
    in place; returns float64 [3] = (summed loss, positive predictions, tokens kept).
    See csrc/ops.cpp for the arguments."""
    return torch.ops.fastsoftmax.word2vec_train.default(
        syn0, syn1neg, tokens, sentence_ends, words_before, keep_prob, ns_prob, ns_alias,
        int(seed), int(first_token), bool(sg), bool(cbow_mean), int(window), int(negative),
        bool(shrink_windows), float(alpha), float(min_alpha), float(total_words),
        int(num_workers),
    )


@torch.library.register_fake("fastsoftmax::word2vec_train")
def _word2vec_train_fake(syn0, syn1neg, tokens, sentence_ends, words_before, keep_prob,
                         ns_prob, ns_alias, seed, first_token, sg, cbow_mean, window, negative,
                         shrink_windows, alpha, min_alpha, total_words, num_workers):
    return syn0.new_empty(3, dtype=torch.float64)
