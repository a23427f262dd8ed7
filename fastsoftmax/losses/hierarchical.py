"""Hierarchical softmax (word2vec.c's `-hs 1`, fastText's `-loss hs`): the functional loss and
its output-layer module.

A class c is a leaf of a binary tree (fastsoftmax.ClassTree) with V - 1 inner nodes, each
owning a weight row w_i (`linear_weight`, [V - 1, D] in all). With the inner nodes i_1..i_L
on c's path and the branch bits b_1..b_L taken there,

    log p(c | h) = sum_j log sigmoid((1 - 2 b_j) w_{i_j}.h)

(bit 0 is the sigmoid's side, as in word2vec.c). Every inner node splits its probability
between its two children, so p(. | h) sums to 1 over the V classes: the model is exactly
normalised and its loss -log p(c | h) is the same in training and evaluation, at O(log V)
cost per row with a Huffman tree.
"""

import math
from typing import Optional

import torch
from torch import Tensor, nn

from .. import ops
from ._layer_parts import OutputLayer, migrate_state_dict, refuse_label_smoothing
from ._reduction import finish
from ..samplers._inputs import _weights_tensor
from ._shapes import REDUCTIONS, check_class_weight
from ._streaming import acc_dtype
from ..tree import ClassTree


def _check_args(input, linear_weight, target, tree, reduction):
    for name, t in (("input", input), ("linear_weight", linear_weight), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if not isinstance(tree, ClassTree):
        raise TypeError("tree must be a fastsoftmax.ClassTree (ClassTree.huffman(counts) or "
                        f"ClassTree.from_paths(codes, points)), got {type(tree).__name__}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    if input.dim() < 1:
        raise ValueError("input must have at least one dimension [*, D]")
    if linear_weight.dim() != 2:
        raise ValueError(f"linear_weight must be 2-D [V - 1, D], got shape "
                         f"{tuple(linear_weight.shape)}")
    if linear_weight.shape[0] != tree.num_inner:
        raise ValueError(f"linear_weight must have one row per inner node of the tree, "
                         f"{tree.num_inner} for {tree.num_classes} classes; got "
                         f"{linear_weight.shape[0]}")
    if linear_weight.shape[1] != input.shape[-1]:
        raise ValueError(
            f"linear_weight has {linear_weight.shape[1]} features per node but input has "
            f"{input.shape[-1]}")
    if target.dtype != torch.int64:
        raise TypeError(f"target must be an int64 tensor of class ids, got {target.dtype}")
    if tuple(target.shape) != tuple(input.shape[:-1]):
        raise ValueError(f"target must have shape {tuple(input.shape[:-1])} for input of shape "
                         f"{tuple(input.shape)}, got {tuple(target.shape)}")
    if target.device != input.device:
        raise ValueError(f"target is on {target.device} but input is on {input.device}")
    if tree.device != input.device:
        raise ValueError(f"tree is on {tree.device} but input is on {input.device} "
                         "(use tree.to(device))")


def _hierarchical_softmax(input, linear_weight, target, tree, reduction, ignore_index, sparse,
                          weight=None):
    _check_args(input, linear_weight, target, tree, reduction)
    weight = check_class_weight(weight, tree.num_classes, input.device)
    h = input.reshape(math.prod(input.shape[:-1]), input.shape[-1])  # not -1: D may be 0
    t = target.reshape(-1)
    loss, _, _ = ops.hierarchical_softmax_forward(h, linear_weight, t, tree.links,
                                                  tree.max_depth, int(ignore_index),
                                                  bool(sparse))
    row_weight = None
    if weight is not None:  # -weight[c] log p(c | h); 'mean' over the weights' sum
        row_weight = weight.to(loss.dtype)[torch.where(t == ignore_index, 0, t)]
        row_weight = torch.where(t == ignore_index, torch.zeros_like(row_weight), row_weight)
        loss = loss * row_weight
    # As the other fastsoftmax losses: per-row float32 (float64) losses, the mean over rows
    # not ignored (NaN if every row is), returned in the input's dtype (float32 in autocast).
    return finish(loss, t[:, None], tuple(target.shape), reduction, ignore_index, input.dtype,
                  row_weight, None)


def hierarchical_softmax_loss(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    tree: ClassTree,
    *,
    weight: Optional[Tensor] = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    sparse: bool = False,
) -> Tensor:
    """-log p(target | input) of the hierarchical softmax over `tree`: input [*, D],
    linear_weight [V - 1, D] (one row per inner node), target int64 [*]. A fused native kernel
    walks each row's path (dot, log-sigmoid, gradient) without any [N, L, D] tensor. Exact:
    the same loss serves training and evaluation. `weight` [V]: per-class rescaling as in
    F.cross_entropy ('mean' divides by the sum of the rows' target weights). `sparse`: a
    sparse COO gradient of linear_weight (the touched inner nodes only)."""
    return _hierarchical_softmax(input, linear_weight, target, tree, reduction, ignore_index,
                                 sparse, weight)


def _level_log_probs(tree: ClassTree, linear_weight: Tensor, h: Tensor, dtype) -> Tensor:
    """log p(node | h) of every node, transposed [2V - 1, R]: root 0, then depth by depth,
    child = parent + log sigmoid(+-w_parent.h)."""
    V = tree.num_classes
    scores = (linear_weight.to(dtype) @ h.to(dtype).T)  # [V - 1, R]
    left, right = nn.functional.logsigmoid(scores), nn.functional.logsigmoid(-scores)
    node = torch.empty(2 * V - 1, h.shape[0], dtype=dtype, device=h.device)
    levels = tree.levels()
    node[V + levels[0][0]] = 0.0
    for inner, left_child, right_child in levels:
        base = node[V + inner]
        node[left_child] = base + left[inner]
        node[right_child] = base + right[inner]
    return node


class HierarchicalSoftmaxLoss(OutputLayer):
    """Hierarchical-softmax output layer over `num_classes` classes (the 'hs' head).

    Args:
        in_features: D, the size of each input row.
        num_classes: V (at least 2).
        counts: class frequencies [V], from which word2vec.c's Huffman tree is built
            (`ClassTree.huffman(counts)`); frequent classes get short paths. A tensor,
            sequence or numpy array in id order, or a dict / collections.Counter with
            `vocab`. Give either `counts` or `tree`.
        tree: an explicit `fastsoftmax.ClassTree` over the V classes.
        vocab: the vocabulary in id order (or a mapping entry -> id) when `counts` is a dict
            or Counter keyed by entry.
        weight: per-class rescaling [V], as in nn.CrossEntropyLoss: row i's loss is
            multiplied by weight[target_i] and 'mean' divides by the sum of those weights.
        label_smoothing: only 0.0. A smoothed target needs every class's probability, which a
            hierarchical softmax does not compute in training; any other value is refused.
        reduction: 'mean' (over rows not ignored), 'sum' or 'none'.
        ignore_index: target value whose rows contribute nothing (default None: -100).
        sparse: sparse COO gradient of `linear_weight` (touched inner nodes only).
        bias: only False: the tree has no bias (torch.nn.LinearCrossEntropyLoss's default).
        out_features: only (), torch.nn.LinearCrossEntropyLoss's default.
        options: only None, torch.nn.LinearCrossEntropyLoss's default.
        device, dtype: of the parameters and buffers, as for torch.nn layers.

    Not a drop-in for torch.nn.LinearCrossEntropyLoss: its parameters are one weight row per
    inner node of the tree, `linear_weight` [V - 1, D] (no nn.Linear, no bias), so a state
    dict of a [V, D] softmax layer is refused with a sentence, not loaded. It starts at zero,
    as word2vec.c's syn1 (every class then has probability 2^-code length, the tree's own
    prior). The tree is kept as the buffer `tree_links`, so it travels with `.to()` and is
    saved in the state dict (and checked again when loaded). The loss is exact in training
    and evaluation alike; `log_prob` and `predict` evaluate all classes, in chunks of rows."""

    chunk_bytes, has_bias = 256 * 2**20, False

    def __init__(self, in_features: int, num_classes: int, counts=None, *, out_features=(),
                 bias: bool = False, device=None, dtype=None, reduction: str = "mean",
                 weight: Optional[Tensor] = None, ignore_index: Optional[int] = None,
                 label_smoothing: float = 0.0, options=None, tree: Optional[ClassTree] = None,
                 vocab=None, sparse: bool = False):
        refuse_label_smoothing(
            "HierarchicalSoftmaxLoss", label_smoothing,
            "a smoothed target needs the probability of every class, which the tree does "
            "not compute per row (use FullSoftmaxLoss or SampledSoftmaxLoss)")
        if bias:
            raise ValueError("HierarchicalSoftmaxLoss has no bias: each inner node of the tree "
                             "owns one weight row and nothing else (bias must be False)")
        super().__init__(in_features, num_classes, out_features=out_features, options=options,
                         reduction=reduction, ignore_index=ignore_index, label_smoothing=0.0)
        num_classes = self.num_classes
        if num_classes < 2:
            raise ValueError(f"a hierarchical softmax needs num_classes >= 2, got {num_classes}")
        if (counts is None) == (tree is None):
            raise ValueError("give exactly one of counts (to build a Huffman tree) or tree")
        if tree is None:
            counts = _weights_tensor(counts, "counts", vocab)
            if counts.dim() != 1 or counts.numel() != num_classes:
                raise ValueError(f"counts must be 1-D with one entry per class ({num_classes}), "
                                 f"got shape {tuple(counts.shape)}")
            tree = ClassTree.huffman(counts)
        elif not isinstance(tree, ClassTree):
            raise TypeError(f"tree must be a fastsoftmax.ClassTree, got {type(tree).__name__}")
        elif tree.num_classes != num_classes:
            raise ValueError(f"tree has {tree.num_classes} classes, the layer {num_classes}")
        self.sparse = bool(sparse)
        self.linear_weight = nn.Parameter(torch.zeros(num_classes - 1, self.in_features,
                                                      device=device, dtype=dtype))
        self._register_class_weight(weight, self.linear_weight)
        self.register_parameter("linear_bias", None)  # as every head of the family: no bias
        tree = tree.to(self.linear_weight.device)
        self.register_buffer("tree_links", tree.links)
        self._tree = tree

    @property
    def tree(self) -> ClassTree:
        """The ClassTree, on the device of the `tree_links` buffer."""
        if self._tree.links is not self.tree_links:  # moved by .to() / .cuda()
            self._tree = ClassTree._trusted(self.tree_links,
                                            self._tree.lengths.to(self.tree_links.device))
        return self._tree

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if prefix + "linear.weight" in state_dict:
            raise ValueError(
                "this state dict holds a softmax layer's linear.weight [V, D] (e.g. "
                "torch.nn.LinearCrossEntropyLoss's); a hierarchical softmax has one weight row "
                "per inner node of its tree, linear_weight [V - 1, D], so it cannot be loaded "
                "here (train the tree's weights, or use FullSoftmaxLoss)")
        migrate_state_dict(state_dict, prefix, "linear_weight", "linear_bias")  # before 0.1
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._tree = ClassTree(self.tree_links)  # a loaded tree is checked like a new one

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        """The exact loss with this layer's reduction (or the one given): for a hierarchical
        softmax it is the training loss itself."""
        return _hierarchical_softmax(input, self.linear_weight, target, self.tree,
                                     self.reduction if reduction is None else reduction,
                                     self.ignore_index, self.sparse, self.weight)

    def training_loss(self, input: Tensor, target: Tensor,
                      generator: Optional[torch.Generator] = None) -> Tensor:
        """The exact loss: a hierarchical softmax draws nothing (`generator` is unused)."""
        return self.full_loss(input, target)

    def _rows_per_chunk(self) -> int:
        # Per row: V - 1 scores and two log-sigmoids, 2V - 1 node log-probabilities, V out.
        per_row = 8 * (3 * (self.num_classes - 1) + 3 * self.num_classes)
        return max(1, self.chunk_bytes // per_row)

    def _rows(self, input: Tensor) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"input must be a tensor, got {type(input).__name__}")
        if input.dim() < 1 or input.shape[-1] != self.in_features:
            raise ValueError(f"input must have {self.in_features} features in its last "
                             f"dimension, got shape {tuple(input.shape)}")
        return input.reshape(-1, self.in_features)

    def _chunks(self, h: Tensor):
        dtype, step, tree = acc_dtype(h), self._rows_per_chunk(), self.tree
        for start in range(0, h.shape[0], step):
            yield start, _level_log_probs(tree, self.linear_weight, h[start:start + step],
                                          dtype)

    def log_prob(self, input: Tensor) -> Tensor:
        """log p(c | input) of every class, [*, V] (float32; float64 for float64 input),
        computed top-down over the tree in chunks of rows. exp() of a row sums to 1."""
        h = self._rows(input)
        out = torch.empty(h.shape[0], self.num_classes, dtype=acc_dtype(h), device=h.device)
        for start, node in self._chunks(h):
            out[start:start + node.shape[1]] = node[:self.num_classes].T
        return out.reshape(*input.shape[:-1], self.num_classes)

    def predict(self, input: Tensor) -> Tensor:
        """The most probable class [*] (argmax of `log_prob`), in chunks of rows."""
        h = self._rows(input)
        out = torch.empty(h.shape[0], dtype=torch.int64, device=h.device)
        for start, node in self._chunks(h):
            out[start:start + node.shape[1]] = node[:self.num_classes].argmax(0)
        return out.reshape(input.shape[:-1])

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, max_depth={self.tree.max_depth}, sparse={self.sparse}"


# help(HierarchicalSoftmaxLoss.__init__) shows the parameters, not nn.Module's constructor text.
HierarchicalSoftmaxLoss.__init__.__doc__ = HierarchicalSoftmaxLoss.__doc__

__all__ = ["HierarchicalSoftmaxLoss", "hierarchical_softmax_loss"]
