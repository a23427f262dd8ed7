"""The sampled loss ops: negative sampling, and sampled softmax / NCE (csrc/cpu/*.cpp,
csrc/cuda/*.cu). Forward and backward are separate ops joined by register_autograd. The
forward returns per-row losses in the accumulation dtype plus the pieces the backward needs
(dloss/dlogit); the samples are inputs, saved for the backward and never redrawn.

The forward is told whether a backward will follow (`need_grad`): in eval, or when nothing
requires grad, it neither computes nor keeps the gradient pieces, which come back with 0
rows.
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from ._checks import checked_ids, on_device
from ._registry import OpParts, _op

MODE_SOFTMAX, MODE_NCE = 0, 1

PARTS = OpParts()


def needs_grad(*tensors: Optional[Tensor]) -> bool:
    """Whether autograd will record an op on `tensors`: grad mode on and one requires grad."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _sparse_rows_fake(weight: Tensor, sparse: bool, pairs: int) -> Tuple[Tensor, Tensor]:
    if not sparse:
        return torch.empty_like(weight), weight.new_empty(0, dtype=torch.int64)
    # A device's sparse gradient has one row per pair (static); the CPU's, one per touched row.
    rows = pairs if on_device(weight) else torch.library.get_ctx().new_dynamic_size()
    return (
        weight.new_empty(rows, weight.shape[1]),
        weight.new_empty(rows, dtype=torch.int64),
    )


def _weight_grad(grad_weight: Tensor, ids: Tensor, weight: Tensor, sparse: bool,
                 coalesced: bool) -> Tensor:
    """As nn.Embedding(sparse=True): a sparse COO gradient of weight's shape. The CPU's is
    coalesced (ids unique and ascending); a device's (`coalesced` False) has one row per pair,
    duplicate ids included, so that its size is known without reading anything back."""
    if not sparse:
        return grad_weight
    return torch.sparse_coo_tensor(
        ids.unsqueeze(0), grad_weight, weight.shape, is_coalesced=coalesced,
        check_invariants=False,
    )


def _check_saved(ctx) -> None:
    if not ctx.need_grad:
        raise RuntimeError(
            "this fastsoftmax loss forward ran with need_grad=False, so it kept no gradient "
            "pieces; call it with need_grad=True when a backward will follow")


# --- negative sampling --------------------------------------------------------------------


def negative_sampling_forward(
    input: Tensor, weight: Tensor, target: Tensor, negatives: Tensor, ignore_index: int,
    sparse: bool, need_grad: Optional[bool] = None,
) -> Tuple[Tensor, Tensor]:
    """(loss [N], coef [N, T + K]); coef has 0 rows when need_grad is False (by default:
    whether autograd records input or weight)."""
    if need_grad is None:
        need_grad = needs_grad(input, weight)
    target = checked_ids(target, weight.shape[0], "target", ignore_index, at_once=False)
    negatives = checked_ids(negatives, weight.shape[0], "negatives", at_once=False)
    return _op("negative_sampling_forward")(
        input, weight, target, negatives, ignore_index, sparse, bool(need_grad)
    )


@PARTS.fake("negative_sampling_forward")
def _negative_sampling_forward_fake(input, weight, target, negatives, ignore_index, sparse,
                                    need_grad):
    torch._check(input.dim() == 2 and weight.dim() == 2 and target.dim() == 2)
    n, acc = input.shape[0], _acc_dtype(input.dtype)
    j = target.shape[1] + negatives.shape[-1]
    return input.new_empty(n, dtype=acc), input.new_empty(n if need_grad else 0, j, dtype=acc)


@PARTS.fake("negative_sampling_backward")
def _negative_sampling_backward_fake(
    grad_loss, input, weight, target, negatives, coef, ignore_index, sparse, deterministic=False
):
    grad_weight, ids = _sparse_rows_fake(weight, sparse, target.numel() + negatives.numel())
    return torch.empty_like(input), grad_weight, ids


def _negative_sampling_setup(ctx, inputs, output):
    input, weight, target, negatives, ignore_index, sparse, need_grad = inputs
    ctx.ignore_index, ctx.sparse, ctx.need_grad = ignore_index, sparse, need_grad
    ctx.coalesced = not on_device(weight)
    ctx.save_for_backward(input, weight, target, negatives, output[1])


@PARTS.autograd("negative_sampling_forward", "negative_sampling_backward",
                _negative_sampling_setup)
def _negative_sampling_backward(backward_op, ctx, grad_loss, grad_coef):
    _check_saved(ctx)
    input, weight, target, negatives, coef = ctx.saved_tensors
    grad_input, grad_weight, ids = backward_op(
        grad_loss.contiguous(), input, weight, target, negatives, coef, ctx.ignore_index,
        ctx.sparse, torch.are_deterministic_algorithms_enabled(),
    )
    return (grad_input, _weight_grad(grad_weight, ids, weight, ctx.sparse, ctx.coalesced),
            None, None, None, None, None)


# --- sampled softmax and NCE ------------------------------------------------------------------


def sampled_logits_forward(
    input: Tensor, weight: Tensor, bias: Optional[Tensor], target: Tensor, sampled: Tensor,
    true_expected_count: Tensor, sampled_expected_count: Tensor, log_z: Tensor, mode: int,
    remove_accidental_hits: bool, ignore_index: int, sparse: bool,
    need_grad: Optional[bool] = None,
) -> Tuple[Tensor, Tensor, Tensor]:
    """(loss [N], grad_logits [N, S], grad_true [N, T]); the gradients have 0 rows when
    need_grad is False (by default: whether autograd records input, weight, bias or
    log_z)."""
    if need_grad is None:
        need_grad = needs_grad(input, weight, bias, log_z)
    target = checked_ids(target, weight.shape[0], "target", ignore_index, at_once=False)
    sampled = checked_ids(sampled, weight.shape[0], "sampled", at_once=False)
    return _op("sampled_logits_forward")(
        input, weight, bias, target, sampled, true_expected_count, sampled_expected_count,
        log_z, mode, remove_accidental_hits, ignore_index, sparse, bool(need_grad),
    )


@PARTS.fake("sampled_logits_forward")
def _sampled_logits_forward_fake(
    input, weight, bias, target, sampled, true_expected_count, sampled_expected_count, log_z,
    mode, remove_accidental_hits, ignore_index, sparse, need_grad,
):
    torch._check(input.dim() == 2 and weight.dim() == 2 and target.dim() == 2)
    n, acc = input.shape[0], _acc_dtype(input.dtype)
    rows = n if need_grad else 0
    return (
        input.new_empty(n, dtype=acc),
        input.new_empty(rows, sampled.shape[0]),
        input.new_empty(rows, target.shape[1], dtype=acc),
    )


@PARTS.fake("sampled_logits_backward")
def _sampled_logits_backward_fake(
    grad_loss, input, weight, target, sampled, grad_logits, grad_true, has_bias, ignore_index,
    sparse, deterministic=False,
):
    grad_weight, ids = _sparse_rows_fake(weight, sparse, sampled.numel() + target.numel())
    grad_bias = input.new_empty(weight.shape[0] if has_bias else 0)
    return torch.empty_like(input), grad_weight, grad_bias, ids


def _sampled_logits_setup(ctx, inputs, output):
    (input, weight, bias, target, sampled, _, _, log_z, _, _, ignore_index, sparse,
     need_grad) = inputs
    ctx.ignore_index, ctx.sparse, ctx.has_bias = ignore_index, sparse, bias is not None
    ctx.need_grad, ctx.coalesced = need_grad, not on_device(weight)
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.log_z_meta = (log_z.shape, log_z.dtype)
    ctx.save_for_backward(input, weight, target, sampled, output[1], output[2])


@PARTS.autograd("sampled_logits_forward", "sampled_logits_backward", _sampled_logits_setup)
def _sampled_logits_backward(backward_op, ctx, grad_loss, grad_grad_logits, grad_grad_true):
    _check_saved(ctx)
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
        _weight_grad(grad_weight, ids, weight, ctx.sparse, ctx.coalesced),
        grad_bias if ctx.has_bias else None,
        None, None, None, None,
        grad_log_z,
        None, None, None, None, None,
    )
