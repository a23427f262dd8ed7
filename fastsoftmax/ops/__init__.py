"""Thin wrappers over torch.ops.fastsoftmax, each beside its fake (meta) kernel and autograd.

Every native op is declared once in csrc/ops.cpp. This package is the only Python code that
calls torch.ops directly or defines an op; one module per op family (sampling, losses,
word2vec, hierarchical, margin) holds each op's wrapper, fake kernel and autograd formula
together, as pytorch/extension-cpp does. fused_softmax defines the two Python ops of the
fused exact softmax (torch.library.custom_op, Triton kernels in _triton_softmax.py, imported
when they first run); the exact losses decide when to take them (fastsoftmax.losses.fused).
`register(namespace)` gives a namespace holding the same schemas (the tests' emulated CUDA
build, "fastsoftmax_emu") the Python parts, and `namespace(name)` routes the wrappers to it
for the length of a `with` block.
"""

from typing import Optional

import torch

from .. import _loader
from . import hierarchical, losses, margin, sampling, word2vec
from . import fused_softmax  # noqa: F401  its ops are registered on import
from ._registry import DEFAULT_NAMESPACE, current_namespace, namespace
# The raw op (ops._op) and its OpOverload (ops._overload, what opcheck takes), for the
# tests and the error-path checks.
from ._registry import _op as _op, _overload as _overload
from .hierarchical import hierarchical_softmax_forward, huffman_tree
from .margin import MODE_HINGE, MODE_WARP, margin_rank_backward, margin_rank_forward, row_scores
from .losses import (MODE_NCE, MODE_SOFTMAX, needs_grad, negative_sampling_forward,
                     sampled_logits_forward)
from ._checks import defer_native_checks, deferred_checks
from .sampling import (KIND_ALIAS, KIND_LOG_UNIFORM, KIND_UNIFORM, alias_build, device_reads,
                       draw_seed, sample, sample_unique)
from .word2vec import (corpus_count, corpus_encode, huffman_paths, word2vec_train,
                       word2vec_train_batched)

_C = _loader.load()

FAMILIES = (sampling, losses, word2vec, hierarchical, margin)


def register(namespace: str, lib: Optional[torch.library.Library] = None) -> None:
    """Fake kernels, autograd and autocast rules of every op family for the ops of
    `namespace`; with `lib`, tied to that torch.library.Library's lifetime."""
    for family in FAMILIES:
        family.PARTS.register(namespace, lib)


register(DEFAULT_NAMESPACE)

__all__ = [
    "DEFAULT_NAMESPACE", "KIND_ALIAS", "KIND_LOG_UNIFORM", "KIND_UNIFORM", "MODE_HINGE",
    "MODE_NCE", "MODE_SOFTMAX", "MODE_WARP", "margin_rank_backward", "margin_rank_forward",
    "alias_build",
    "corpus_count", "corpus_encode", "current_namespace", "defer_native_checks", "deferred_checks",
    "device_reads",
    "draw_seed", "hierarchical_softmax_forward", "huffman_paths", "huffman_tree", "namespace",
    "needs_grad", "negative_sampling_forward", "register", "row_scores", "sample", "sample_unique",
    "sampled_logits_forward", "word2vec_train", "word2vec_train_batched",
]
