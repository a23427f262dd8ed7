"""Hierarchical softmax ops (csrc/cpu/hierarchical_softmax.cpp, csrc/cuda/hierarchical_softmax.cu)
and word2vec.c's Huffman tree. The tree is `links` int32 [2V - 1] (see csrc/ops.cpp and
fastsoftmax.tree.ClassTree); the forward keeps the path ids and dloss/dscore of every row."""

from typing import Tuple

import torch
from torch import Tensor

from ._checks import checked_ids, on_device
from ._registry import OpParts, _op
from .losses import _acc_dtype, _sparse_rows_fake, _weight_grad

PARTS = OpParts()


def huffman_tree(counts: Tensor, sort: bool) -> Tuple[Tensor, Tensor]:
    """word2vec.c's Huffman tree of int64 or float64 counts [V]: (links, code lengths), on the
    counts' device. A host algorithm: the CUDA kernel builds the tree from a host copy."""
    return _op("huffman_tree")(counts, bool(sort))


@PARTS.fake("huffman_tree")
def _huffman_tree_fake(counts, sort):
    torch._check(counts.dim() == 1, lambda: "counts must be 1-D")
    v = counts.shape[0]
    return counts.new_empty(2 * v - 1, dtype=torch.int32), counts.new_empty(v, dtype=torch.int64)


def hierarchical_softmax_forward(
    input: Tensor, weight: Tensor, target: Tensor, links: Tensor, max_depth: int,
    ignore_index: int, sparse: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    """The hierarchical softmax's forward over the tree `links` (int32 [2V - 1]): input
    [N, D], weight [V - 1, D] (one row per inner node), target [N] (ignore_index allowed).
    Returns (loss [N], coef [N, max_depth], nodes [N, max_depth]): each row's loss, minus the
    sum of log sigmoid((1 - 2b) w_i.h) over the inner nodes i of its class's path, and the
    coefficients dloss/d(w_i.h) and node ids along that path kept for the backward (`sparse`
    is read there). max_depth is the longest code length."""
    target = checked_ids(target, weight.shape[0] + 1, "target", int(ignore_index), at_once=False)
    return _op("hierarchical_softmax_forward")(
        input, weight, target, links, int(max_depth), int(ignore_index), bool(sparse)
    )


@PARTS.fake("hierarchical_softmax_forward")
def _hierarchical_softmax_forward_fake(input, weight, target, links, max_depth, ignore_index,
                                       sparse):
    torch._check(input.dim() == 2 and weight.dim() == 2 and target.dim() == 1)
    n, acc = input.shape[0], _acc_dtype(input.dtype)
    return (
        input.new_empty(n, dtype=acc),
        input.new_empty(n, max_depth, dtype=acc),
        input.new_empty(n, max_depth, dtype=torch.int64),
    )


@PARTS.fake("hierarchical_softmax_backward")
def _hierarchical_softmax_backward_fake(grad_loss, input, weight, nodes, coef, sparse,
                                        deterministic=False):
    # One row per (row, step) pair on a device, none when there is no inner node.
    pairs = nodes.numel() if weight.shape[0] else 0
    grad_weight, ids = _sparse_rows_fake(weight, sparse, pairs)
    return torch.empty_like(input), grad_weight, ids


def _hierarchical_softmax_setup(ctx, inputs, output):
    input, weight, _, _, _, _, sparse = inputs
    ctx.sparse, ctx.coalesced = sparse, not on_device(weight)
    ctx.save_for_backward(input, weight, output[2], output[1])


@PARTS.autograd("hierarchical_softmax_forward", "hierarchical_softmax_backward",
                _hierarchical_softmax_setup)
def _hierarchical_softmax_backward(backward_op, ctx, grad_loss, grad_coef, grad_nodes):
    input, weight, nodes, coef = ctx.saved_tensors
    grad_input, grad_weight, ids = backward_op(
        grad_loss.contiguous(), input, weight, nodes, coef, ctx.sparse,
        torch.are_deterministic_algorithms_enabled(),
    )
    return (grad_input, _weight_grad(grad_weight, ids, weight, ctx.sparse, ctx.coalesced),
            None, None, None, None, None)
