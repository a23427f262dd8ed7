"""Thin wrappers over torch.ops.fastsoftmax with their fake (meta) kernels.

Every native op is declared once in csrc/ops.cpp; this module makes each usable under
torch.compile (fake kernels) and is the only Python code that calls torch.ops directly.

The wrappers call the ops of the namespace named by `_LIB`: "fastsoftmax", or, in the tests,
"fastsoftmax_emu", the same schemas implemented by the CUDA sources running on the CPU
through an emulator (tests/cuda_emulator.py). `register_python_parts` gives a namespace its
fake kernels, autograd and autocast rules.
"""

import functools
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch._prims_common import alert_not_deterministic as _alert_not_deterministic

from . import _loader
from ._errors import raising_promised_types as _raising_promised_types

_C = _loader.load()

KIND_ALIAS, KIND_UNIFORM, KIND_LOG_UNIFORM = 0, 1, 2

_LIB = "fastsoftmax"


def _overload(name: str):
    """The OpOverload of `name` in the namespace `_LIB` (what torch.library.opcheck takes)."""
    return getattr(getattr(torch.ops, _LIB), name).default


@functools.lru_cache(maxsize=None)
def _translating(lib: str, name: str):  # made once per op: _op runs on every call
    return _raising_promised_types(getattr(getattr(torch.ops, lib), name).default)


def _op(name: str):
    # Dynamo cannot trace the wrapper: a compiled graph calls the op (errors stay RuntimeError).
    return _overload(name) if torch.compiler.is_compiling() else _translating(_LIB, name)


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
    return _op("alias_build")(weights)


def sample(
    prob: Tensor, alias: Tensor, seed: Tensor, num_classes: int, kind: int, size: Sequence[int]
) -> Tensor:
    return _op("sample")(prob, alias, seed, num_classes, kind, list(size))


def sample_unique(
    prob: Tensor, alias: Tensor, seed: Tensor, num_classes: int, kind: int, num_sampled: int
) -> Tuple[Tensor, Tensor]:
    return _op("sample_unique")(prob, alias, seed, num_classes, kind, num_sampled)


def _alias_build_fake(weights):
    torch._check(weights.dim() == 1, lambda: "weights must be 1-D")
    n = weights.shape[0]
    return weights.new_empty(n, dtype=torch.float32), weights.new_empty(n, dtype=torch.int32)


def _sample_fake(prob, alias, seed, num_classes, kind, size):
    return seed.new_empty(size, dtype=torch.int64)


def _sample_unique_fake(prob, alias, seed, num_classes, kind, num_sampled):
    return seed.new_empty(num_sampled, dtype=torch.int64), seed.new_empty((), dtype=torch.int64)


# ---------------------------------------------------------------------------------------
# Losses: forward and backward ops joined by register_autograd. The forward returns per-row
# losses in the accumulation dtype plus the pieces the backward needs; the samples are
# inputs, saved for the backward and never redrawn.
# ---------------------------------------------------------------------------------------

MODE_SOFTMAX, MODE_NCE = 0, 1


def negative_sampling_forward(
    input: Tensor, weight: Tensor, target: Tensor, negatives: Tensor, ignore_index: int,
    sparse: bool,
) -> Tuple[Tensor, Tensor]:
    return _op("negative_sampling_forward")(
        input, weight, target, negatives, ignore_index, sparse
    )


def sampled_logits_forward(
    input: Tensor, weight: Tensor, bias: Optional[Tensor], target: Tensor, sampled: Tensor,
    true_expected_count: Tensor, sampled_expected_count: Tensor, log_z: Tensor, mode: int,
    remove_accidental_hits: bool, ignore_index: int, sparse: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    return _op("sampled_logits_forward")(
        input, weight, bias, target, sampled, true_expected_count, sampled_expected_count,
        log_z, mode, remove_accidental_hits, ignore_index, sparse,
    )


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _sparse_rows_fake(weight: Tensor, sparse: bool) -> Tuple[Tensor, Tensor]:
    if not sparse:
        return torch.empty_like(weight), weight.new_empty(0, dtype=torch.int64)
    rows = torch.library.get_ctx().new_dynamic_size()
    return (
        weight.new_empty(rows, weight.shape[1]),
        weight.new_empty(rows, dtype=torch.int64),
    )


def _negative_sampling_forward_fake(input, weight, target, negatives, ignore_index, sparse):
    torch._check(input.dim() == 2 and weight.dim() == 2 and target.dim() == 2)
    n, acc = input.shape[0], _acc_dtype(input.dtype)
    j = target.shape[1] + negatives.shape[-1]
    return input.new_empty(n, dtype=acc), input.new_empty(n, j, dtype=acc)


def _negative_sampling_backward_fake(
    grad_loss, input, weight, target, negatives, coef, ignore_index, sparse, deterministic=False
):
    grad_weight, ids = _sparse_rows_fake(weight, sparse)
    return torch.empty_like(input), grad_weight, ids


def _sampled_logits_forward_fake(
    input, weight, bias, target, sampled, true_expected_count, sampled_expected_count, log_z,
    mode, remove_accidental_hits, ignore_index, sparse,
):
    torch._check(input.dim() == 2 and weight.dim() == 2 and target.dim() == 2)
    n, acc = input.shape[0], _acc_dtype(input.dtype)
    return (
        input.new_empty(n, dtype=acc),
        input.new_empty(n, sampled.shape[0]),
        input.new_empty(n, target.shape[1], dtype=acc),
    )


def _sampled_logits_backward_fake(
    grad_loss, input, weight, target, sampled, grad_logits, grad_true, has_bias, ignore_index,
    sparse, deterministic=False,
):
    grad_weight, ids = _sparse_rows_fake(weight, sparse)
    grad_bias = input.new_empty(weight.shape[0] if has_bias else 0)
    return torch.empty_like(input), grad_weight, grad_bias, ids


def _weight_grad(grad_weight: Tensor, ids: Tensor, weight: Tensor, sparse: bool) -> Tensor:
    if not sparse:
        return grad_weight
    # As nn.Embedding(sparse=True): a sparse COO gradient of weight's shape, here already
    # coalesced (ids unique and ascending).
    return torch.sparse_coo_tensor(
        ids.unsqueeze(0), grad_weight, weight.shape, is_coalesced=True, check_invariants=False
    )


def _negative_sampling_setup(ctx, inputs, output):
    input, weight, target, negatives, ignore_index, sparse = inputs
    ctx.ignore_index, ctx.sparse = ignore_index, sparse
    ctx.save_for_backward(input, weight, target, negatives, output[1])


def _negative_sampling_backward(backward_op, ctx, grad_loss, grad_coef):
    input, weight, target, negatives, coef = ctx.saved_tensors
    grad_input, grad_weight, ids = backward_op(
        grad_loss.contiguous(), input, weight, target, negatives, coef, ctx.ignore_index,
        ctx.sparse, torch.are_deterministic_algorithms_enabled(),
    )
    return grad_input, _weight_grad(grad_weight, ids, weight, ctx.sparse), None, None, None, None


def _sampled_logits_setup(ctx, inputs, output):
    (input, weight, bias, target, sampled, _, _, log_z, _, _, ignore_index, sparse) = inputs
    ctx.ignore_index, ctx.sparse, ctx.has_bias = ignore_index, sparse, bias is not None
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.log_z_meta = (log_z.shape, log_z.dtype)
    ctx.save_for_backward(input, weight, target, sampled, output[1], output[2])


def _sampled_logits_backward(backward_op, ctx, grad_loss, grad_grad_logits, grad_grad_true):
    input, weight, target, sampled, grad_logits, grad_true = ctx.saved_tensors
    grad_loss = grad_loss.contiguous()
    grad_input, grad_weight, grad_bias, ids = backward_op(
        grad_loss, input, weight, target, sampled, grad_logits, grad_true, ctx.has_bias,
        ctx.ignore_index, ctx.sparse, torch.are_deterministic_algorithms_enabled(),
    )
    grad_log_z = None
    if ctx.needs_input_grad[7]:
        # Every logit is shifted by -log_z, so dL/dlog_z = -sum of all logit gradients.
        # In the accumulation dtype (grad_true's: float64 for float64 input). The terms nearly
        # cancel (NCE: sigmoid(x) - 1 + sigmoid(x_s)), so float32 here lost 1e-5 relative.
        acc = grad_true.dtype
        per_row = grad_logits.to(acc).sum(1) + grad_true.sum(1)
        shape, dtype = ctx.log_z_meta
        grad_log_z = (-(per_row * grad_loss.to(acc)).sum()).to(dtype).reshape(shape)
    return (
        grad_input,
        _weight_grad(grad_weight, ids, weight, ctx.sparse),
        grad_bias if ctx.has_bias else None,
        None, None, None, None,
        grad_log_z,
        None, None, None, None,
    )




# ---------------------------------------------------------------------------------------
# word2vec
# ---------------------------------------------------------------------------------------


def word2vec_train(
    syn0: Tensor, syn1neg: Tensor, tokens: Tensor, sentence_ends: Tensor, words_before: Tensor,
    keep_prob: Tensor, ns_prob: Tensor, ns_alias: Tensor, seed: int, first_token: int,
    sg: bool, cbow_mean: bool, window: int, negative: int, shrink_windows: bool, alpha: float,
    min_alpha: float, total_words: float, num_workers: int, *, syn1: Optional[Tensor] = None,
    hs_paths: Optional[Tensor] = None, hs_offsets: Optional[Tensor] = None,
) -> Tensor:
    """One Hogwild SGD pass of word2vec over a batch of sentences, updating syn0 and syn1neg
    (and, with hierarchical softmax, syn1 [V - 1, D]) in place; returns float64 [3] =
    (summed loss, positive predictions, tokens kept). Hierarchical softmax runs when syn1 is
    given, with the Huffman paths (hs_paths, hs_offsets) of `huffman_paths`. See csrc/ops.cpp
    for the arguments."""
    hs = syn1 is not None
    if hs and (hs_paths is None or hs_offsets is None):
        raise ValueError("word2vec_train: syn1 (hierarchical softmax) needs hs_paths and "
                         "hs_offsets (see huffman_paths)")
    if int(num_workers) > 1:
        # Hogwild updates race by design. A stable kernel cannot raise torch's alert itself;
        # this is ATen's alertNotDeterministic in Python (same message, same warn_only rule).
        _alert_not_deterministic(
            "word2vec_train with num_workers > 1 (Hogwild updates race by design; use one "
            "worker)")
    if not hs:
        syn1 = syn0.new_empty(0, syn0.shape[-1])
        hs_paths = torch.empty(0, dtype=torch.int32, device=syn0.device)
        hs_offsets = torch.empty(0, dtype=torch.int64, device=syn0.device)
    return _op("word2vec_train")(
        syn0, syn1neg, tokens, sentence_ends, words_before, keep_prob, ns_prob, ns_alias,
        int(seed), int(first_token), bool(sg), bool(cbow_mean), int(window), int(negative),
        bool(shrink_windows), float(alpha), float(min_alpha), float(total_words),
        int(num_workers), syn1, hs_paths, hs_offsets, hs,
    )


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


def _word2vec_train_fake(syn0, syn1neg, tokens, sentence_ends, words_before, keep_prob,
                         ns_prob, ns_alias, seed, first_token, sg, cbow_mean, window, negative,
                         shrink_windows, alpha, min_alpha, total_words, num_workers, syn1,
                         hs_paths, hs_offsets, hs):
    return syn0.new_empty(3, dtype=torch.float64)


# ---------------------------------------------------------------------------------------
# Hierarchical softmax: the tree is `links` int32 [2V - 1] (see csrc/ops.cpp and
# fastsoftmax.tree.ClassTree); the forward keeps the path ids and dloss/dscore of every row.
# ---------------------------------------------------------------------------------------


def huffman_tree(counts: Tensor, sort: bool) -> Tuple[Tensor, Tensor]:
    """word2vec.c's Huffman tree of int64 or float64 counts [V]: (links, code lengths), on the
    counts' device. A host algorithm: the CUDA kernel builds the tree from a host copy."""
    return _op("huffman_tree")(counts, bool(sort))


def hierarchical_softmax_forward(
    input: Tensor, weight: Tensor, target: Tensor, links: Tensor, max_depth: int,
    ignore_index: int, sparse: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    return _op("hierarchical_softmax_forward")(
        input, weight, target, links, int(max_depth), int(ignore_index), bool(sparse)
    )


def _huffman_tree_fake(counts, sort):
    torch._check(counts.dim() == 1, lambda: "counts must be 1-D")
    v = counts.shape[0]
    return counts.new_empty(2 * v - 1, dtype=torch.int32), counts.new_empty(v, dtype=torch.int64)


def _hierarchical_softmax_forward_fake(input, weight, target, links, max_depth, ignore_index,
                                       sparse):
    torch._check(input.dim() == 2 and weight.dim() == 2 and target.dim() == 1)
    n, acc = input.shape[0], _acc_dtype(input.dtype)
    return (
        input.new_empty(n, dtype=acc),
        input.new_empty(n, max_depth, dtype=acc),
        input.new_empty(n, max_depth, dtype=torch.int64),
    )


def _hierarchical_softmax_backward_fake(grad_loss, input, weight, nodes, coef, sparse,
                                        deterministic=False):
    grad_weight, ids = _sparse_rows_fake(weight, sparse)
    return torch.empty_like(input), grad_weight, ids


def _hierarchical_softmax_setup(ctx, inputs, output):
    input, weight, _, _, _, _, sparse = inputs
    ctx.sparse = sparse
    ctx.save_for_backward(input, weight, output[2], output[1])


def _hierarchical_softmax_backward(backward_op, ctx, grad_loss, grad_coef, grad_nodes):
    input, weight, nodes, coef = ctx.saved_tensors
    grad_input, grad_weight, ids = backward_op(
        grad_loss.contiguous(), input, weight, nodes, coef, ctx.sparse,
        torch.are_deterministic_algorithms_enabled(),
    )
    return (grad_input, _weight_grad(grad_weight, ids, weight, ctx.sparse),
            None, None, None, None, None)


_FAKES = {
    "alias_build": _alias_build_fake,
    "sample": _sample_fake,
    "sample_unique": _sample_unique_fake,
    "negative_sampling_forward": _negative_sampling_forward_fake,
    "negative_sampling_backward": _negative_sampling_backward_fake,
    "sampled_logits_forward": _sampled_logits_forward_fake,
    "sampled_logits_backward": _sampled_logits_backward_fake,
    "word2vec_train": _word2vec_train_fake,
    "huffman_tree": _huffman_tree_fake,
    "hierarchical_softmax_forward": _hierarchical_softmax_forward_fake,
    "hierarchical_softmax_backward": _hierarchical_softmax_backward_fake,
}
_AUTOGRAD = {  # forward op: (backward op, backward, setup_context)
    "negative_sampling_forward": (
        "negative_sampling_backward", _negative_sampling_backward, _negative_sampling_setup,
    ),
    "sampled_logits_forward": (
        "sampled_logits_backward", _sampled_logits_backward, _sampled_logits_setup,
    ),
    "hierarchical_softmax_forward": (
        "hierarchical_softmax_backward", _hierarchical_softmax_backward,
        _hierarchical_softmax_setup,
    ),
}


def register_python_parts(lib: str) -> None:
    """Fake kernels, autograd and autocast rules for the ops of namespace `lib`."""
    for name, fake in _FAKES.items():
        torch.library.register_fake(f"{lib}::{name}", fake)
    for name, (backward_name, backward, setup) in _AUTOGRAD.items():
        backward_op = getattr(getattr(torch.ops, lib), backward_name).default
        torch.library.register_autograd(
            f"{lib}::{name}", functools.partial(backward, _raising_promised_types(backward_op)),
            setup_context=setup,
        )
        # Under autocast the losses run in float32, as F.cross_entropy does: low-precision
        # activations are upcast to meet the float32 weight (the backward casts them back).
        for device in ("cpu", "cuda"):
            torch.library.register_autocast(f"{lib}::{name}", device, torch.float32)


register_python_parts("fastsoftmax")
