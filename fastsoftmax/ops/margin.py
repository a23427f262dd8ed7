"""The margin (hinge) loss ops (csrc/cpu/margin_losses.cpp, csrc/cuda/margin_losses.cu): the
per-row hinge sum and WARP's first-violator loss over a block of scores, forward and backward
as separate ops joined by register_autograd. The scores are made by torch (matmul) outside
the op, so autograd carries the gradient on to input, linear_weight and bias."""

from typing import Tuple

import torch
from torch import Tensor

from ._checks import checked_ids
from ._registry import OpParts, _op

MODE_HINGE, MODE_WARP = 0, 1

PARTS = OpParts()


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def margin_rank_forward(scores: Tensor, target_score: Tensor, target: Tensor,
                        candidates: Tensor, margin: float, p: int, mode: int,
                        num_classes: int, ignore_index: int) -> Tensor:
    """Per-row loss [N] (float32, float64 for float64 scores) of scores [N, C] against
    target_score [N]; candidates [C] or [N, C] name each column's class (a column equal to
    the row's target is left out). mode MODE_HINGE: sum_j max(0, margin - s_y + s_j)^p;
    MODE_WARP: L(floor((num_classes - 1) / trials)) * hinge of the first violating column."""
    target = checked_ids(target, int(num_classes), "target", int(ignore_index), at_once=False)
    candidates = checked_ids(candidates, int(num_classes), "candidates", at_once=False)
    return _op("margin_rank_forward")(scores, target_score, target, candidates, float(margin),
                                      int(p), int(mode), int(num_classes), int(ignore_index))


def margin_rank_backward(grad_loss: Tensor, scores: Tensor, target_score: Tensor,
                         target: Tensor, candidates: Tensor, margin: float, p: int, mode: int,
                         num_classes: int, ignore_index: int) -> Tuple[Tensor, Tensor]:
    """(grad_scores [N, C], grad_target_score [N]): margin_rank_forward's gradient for
    grad_loss [N], for a loss that makes its blocks of scores again in its own backward
    (fastsoftmax.losses._margin_stream). The ids are the ones its forward checked."""
    return _op("margin_rank_backward")(grad_loss, scores, target_score, target, candidates,
                                       float(margin), int(p), int(mode), int(num_classes),
                                       int(ignore_index))


@PARTS.fake("margin_rank_forward")
def _margin_rank_forward_fake(scores, target_score, target, candidates, margin, p, mode,
                              num_classes, ignore_index):
    torch._check(scores.dim() == 2)
    return scores.new_empty(scores.shape[0], dtype=_acc_dtype(scores.dtype))


@PARTS.fake("margin_rank_backward")
def _margin_rank_backward_fake(grad_loss, scores, target_score, target, candidates, margin, p,
                               mode, num_classes, ignore_index):
    return scores.new_empty(scores.shape), target_score.new_empty(target_score.shape)


def _margin_rank_setup(ctx, inputs, output):
    scores, target_score, target, candidates, *options = inputs
    ctx.options = tuple(options)
    ctx.save_for_backward(scores, target_score, target, candidates)


@PARTS.autograd("margin_rank_forward", "margin_rank_backward", _margin_rank_setup)
def _margin_rank_backward(backward_op, ctx, grad_loss):
    scores, target_score, target, candidates = ctx.saved_tensors
    grad_scores, grad_target = backward_op(grad_loss.contiguous(), scores, target_score,
                                           target, candidates, *ctx.options)
    return (grad_scores, grad_target) + (None,) * 7


def row_scores(input: Tensor, weight: Tensor, bias, ids: Tensor) -> Tensor:
    """s[n, k] = input[n].weight[ids[n, k]] + bias[ids[n, k]] [N, K] (float32, float64 for
    float64 input) by fused gather-dots: no [N, K, D] tensor of gathered rows."""
    ids = checked_ids(ids, weight.shape[0], "ids", at_once=False)
    return _op("row_scores_forward")(input, weight, bias, ids)


@PARTS.fake("row_scores_forward")
def _row_scores_forward_fake(input, weight, bias, ids):
    torch._check(input.dim() == 2 and weight.dim() == 2 and ids.dim() == 2)
    return input.new_empty(ids.shape[0], ids.shape[1], dtype=_acc_dtype(input.dtype))


@PARTS.fake("row_scores_backward")
def _row_scores_backward_fake(grad_scores, input, weight, ids, has_bias, deterministic=False):
    return (input.new_empty(input.shape), weight.new_empty(weight.shape),
            input.new_empty(weight.shape[0] if has_bias else 0))


def _row_scores_setup(ctx, inputs, output):
    input, weight, bias, ids = inputs
    ctx.has_bias = bias is not None
    ctx.save_for_backward(input, weight, ids)


@PARTS.autograd("row_scores_forward", "row_scores_backward", _row_scores_setup)
def _row_scores_backward(backward_op, ctx, grad_scores):
    input, weight, ids = ctx.saved_tensors
    grad_input, grad_weight, grad_bias = backward_op(
        grad_scores.contiguous(), input, weight, ids, ctx.has_bias,
        torch.are_deterministic_algorithms_enabled())
    return grad_input, grad_weight, grad_bias if ctx.has_bias else None, None
