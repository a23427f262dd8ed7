"""Margin (hinge) losses over the output embedding: the multiclass hinge loss of
torch.nn.functional.multi_margin_loss, the margin-ranking loss of the memory networks (exact
over the vocabulary, or over K sampled negatives) and WARP.

Every score is s(x, c) = input.linear_weight[c] + linear_bias[c]. The scores are matrix
products done by torch (BLAS / cuBLAS); the per-row hinge reduction and its gradient are the
native op `margin_rank_forward` / `margin_rank_backward` (fastsoftmax.ops.margin). The exact
losses stream the vocabulary in blocks of at most `chunk_bytes` of scores and make the blocks
again in the backward (fastsoftmax/_margin_stream.py): no [N, V] block larger than that
exists, in training or in eval.

Shapes: input [*, D], linear_weight [V, D], linear_bias [V], target int64 [*] (a row whose
target is ignore_index contributes nothing; 'mean' averages over the other rows).
Samples are drawn as a separate step (or given): the ops take them as input, and backward
never redraws them.
"""

import math
import numbers
from typing import Optional

import torch
from torch import Tensor

from . import ops
from ._reduction import finish, loss_rows
from ._shapes import check_count, check_generator
from ._margin_stream import StreamedHinge
from .full_softmax import CHUNK_BYTES
from .samplers import Sampler, UniformSampler

_NEGATIVES_REDUCTIONS = ("sum", "mean")


def check_margin(margin, *, allow_negative: bool) -> float:
    """`margin` as a float, or a ValueError: a finite number (>= 0 unless allow_negative)."""
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) \
            or not math.isfinite(margin) or (margin < 0 and not allow_negative):
        need = "a finite number" if allow_negative else "a finite number >= 0"
        raise ValueError(f"margin must be {need}, got {margin!r}")
    return float(margin)


def _rows(input, linear_weight, target, reduction, linear_bias, ignore_index):
    """(lead, target [N, 1], input [N, D], target [N], target [N] with ignored rows as
    class 0)."""
    lead, t2, h, _ = loss_rows(input, linear_weight, target, reduction, 1, None, None)
    if linear_bias is not None and (not isinstance(linear_bias, Tensor)
                                    or tuple(linear_bias.shape) != (linear_weight.shape[0],)):
        shape = tuple(linear_bias.shape) if isinstance(linear_bias, Tensor) else linear_bias
        raise ValueError(f"linear_bias must have shape ({linear_weight.shape[0]},), got {shape}")
    t = t2[:, 0]
    return lead, t2, h, t, torch.where(t == ignore_index, torch.zeros_like(t), t)


def _scores(h: Tensor, weight: Tensor, bias: Optional[Tensor], safe: Tensor,
            neg: Optional[Tensor] = None):
    """The target scores s(h_n, safe[n]) [N] and, with per-row negatives neg [N, K] or shared
    ones [K], their scores [N, K], in the accumulation dtype. Per-row ids go through the
    native fused gather-dots (ops.row_scores: no [N, K, D] block of gathered rows, and one
    weight-gradient scatter for the targets and negatives together); shared negatives are
    one matrix product."""
    if neg is not None and neg.dim() == 2:
        s = ops.row_scores(h, weight, bias, torch.cat([safe[:, None], neg], 1))
        return s[:, 0], s[:, 1:]
    s_t = ops.row_scores(h, weight, bias, safe[:, None])[:, 0]
    if neg is None:
        return s_t
    s = h @ weight[neg].T
    if bias is not None:
        s = s + bias[neg]
    return s_t, s.to(s_t.dtype)


def _check_range(safe: Tensor, V: int) -> None:
    # The op checks ids too, but the exact losses gather the target rows before any op runs.
    in_range = ((safe >= 0) & (safe < V)).all()
    message = f"target ids must lie in [0, {V}) or equal ignore_index"
    if torch.compiler.is_compiling():
        torch._assert_async(in_range, message)
    elif not bool(in_range):
        bad = safe[(safe < 0) | (safe >= V)]
        raise ValueError(f"{message}; found {int(bad.min())} (min offending) and "
                         f"{int(bad.max())} (max offending)")


def _stream_hinge(h, weight, bias, t, safe, margin, p, ignore_index, chunk_bytes) -> Tensor:
    """sum over classes c != t_n of max(0, margin - s_t + s_c)^p per row [N] (p = 0: the
    count of violators), over blocks of at most chunk_bytes of scores, in the forward and
    (made again) in the backward: fastsoftmax/_margin_stream.py."""
    _check_range(safe, weight.shape[0])
    return StreamedHinge.apply(h, weight, bias, t, safe, margin, p, ignore_index, chunk_bytes)


def _check_p(p) -> int:
    if isinstance(p, bool) or not isinstance(p, numbers.Integral) or int(p) not in (1, 2):
        raise ValueError(f"p must be 1 or 2 (as torch.nn.functional.multi_margin_loss), "
                         f"got {p!r}")
    return int(p)


def multi_margin_loss(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Optional[Tensor] = None,
    margin: float = 1.0,
    p: int = 1,
    weight: Optional[Tensor] = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    chunk_bytes: int = CHUNK_BYTES,
) -> Tensor:
    """torch.nn.functional.multi_margin_loss of the scores x = input.linear_weightᵀ +
    linear_bias over all V classes, exact, streamed in blocks of `chunk_bytes`:

        loss_n = sum_{i != y} weight[y] * max(0, margin - x[y] + x[i])^p / V

    (`weight` [V] multiplies each row by its target's weight after the power, as torch's
    kernel does; 'mean' divides by the number of rows, not by the weights). p is 1 or 2.
    Rows whose target is `ignore_index` contribute 0 and are not counted by 'mean' (torch's
    function has no ignore_index; with none ignored the two agree)."""
    lead, t2, h, t, safe = _rows(input, linear_weight, target, reduction, linear_bias,
                                 ignore_index)
    p, margin = _check_p(p), check_margin(margin, allow_negative=True)
    V = linear_weight.shape[0]
    if weight is not None:
        if not isinstance(weight, Tensor) or weight.dim() != 1 or weight.shape[0] != V \
                or not weight.is_floating_point():
            raise ValueError(f"weight must be a floating 1-D tensor with one entry per class "
                             f"({V}), got {getattr(weight, 'shape', weight)!r}")
    loss = _stream_hinge(h, linear_weight, linear_bias, t, safe, margin, p, int(ignore_index),
                         chunk_bytes) / V
    if weight is not None:
        loss = loss * weight.to(loss.dtype)[safe]
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, None, None)


def full_margin_ranking_loss(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    margin: float = 1.0,
    linear_bias: Optional[Tensor] = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    chunk_bytes: int = CHUNK_BYTES,
) -> Tensor:
    """The exact margin-ranking loss of the memory networks over the whole vocabulary,
    per row sum_{y' != y} max(0, margin - s(x, y) + s(x, y')), streamed in blocks of
    `chunk_bytes` (multi_margin_loss with p = 1, times V)."""
    lead, t2, h, t, safe = _rows(input, linear_weight, target, reduction, linear_bias,
                                 ignore_index)
    margin = check_margin(margin, allow_negative=False)
    loss = _stream_hinge(h, linear_weight, linear_bias, t, safe, margin, 1, int(ignore_index),
                         chunk_bytes)
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, None, None)


def full_warp_loss(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    margin: float = 1.0,
    linear_bias: Optional[Tensor] = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    chunk_bytes: int = CHUNK_BYTES,
) -> Tensor:
    """The loss WARP estimates (Weston et al., 2011), exact: with r the number of violating
    classes (y' != y with margin - s_y + s_y' > 0) and S the sum of their hinges, per row
    L(r) * S / r (0 when r = 0), L(r) = 1 + 1/2 + ... + 1/r held constant in the gradient.
    Streamed in blocks of `chunk_bytes`."""
    lead, t2, h, t, safe = _rows(input, linear_weight, target, reduction, linear_bias,
                                 ignore_index)
    margin = check_margin(margin, allow_negative=False)
    args = (h, linear_weight, linear_bias, t, safe, margin)
    with torch.no_grad():
        r = _stream_hinge(*args, 0, int(ignore_index), chunk_bytes)
    total = _stream_hinge(*args, 1, int(ignore_index), chunk_bytes)
    # L(r) = digamma(r + 1) + Euler's gamma, exactly the harmonic number for integer r.
    rank_weight = torch.where(r > 0, (torch.special.digamma(r + 1) + 0.5772156649015329)
                              / r.clamp_min(1), torch.zeros_like(r))
    return finish(total * rank_weight, t2, lead, reduction, ignore_index, input.dtype, None,
                  None)


def _negatives(h, V, safe, lead, num_sampled, sampler, sampled, generator, default_sampler):
    """The candidates [N, K] (per row) or [K] (shared): `sampled` as given, else drawn per
    row from `sampler` (default: uniform) with replacement."""
    check_generator(generator)
    if sampled is None:
        if num_sampled is None:
            raise ValueError("give either num_sampled (and optionally sampler) or sampled")
        num_sampled = check_count(num_sampled, "num_sampled")
        if sampler is None:
            sampler = default_sampler(V, device=h.device)
        if not isinstance(sampler, Sampler):
            raise TypeError(f"sampler must be a fastsoftmax Sampler, got "
                            f"{type(sampler).__name__}")
        if sampler.num_classes != V:
            raise ValueError(f"sampler draws from {sampler.num_classes} classes but "
                             f"linear_weight has {V}")
        return sampler.sample(h.shape[0], num_sampled, generator=generator)
    if isinstance(sampled, tuple) and len(sampled) == 3:  # a SampledValues triple: shared
        sampled = sampled[0]
    if not isinstance(sampled, Tensor) or sampled.dtype != torch.int64:
        raise TypeError("sampled must be an int64 tensor of class ids, [*, K] (per row) or "
                        "[K] (shared)")
    if num_sampled is not None and num_sampled != sampled.shape[-1]:
        raise ValueError(f"num_sampled={num_sampled} but sampled holds {sampled.shape[-1]} "
                         f"per row")
    if sampled.device != h.device:
        raise ValueError(f"sampled is on {sampled.device} but input is on {h.device}")
    if sampled.dim() == 1:
        neg = sampled
    elif sampled.dim() == len(lead) + 1 and tuple(sampled.shape[:-1]) == lead:
        neg = sampled.reshape(h.shape[0], sampled.shape[-1])
    else:
        raise ValueError(f"sampled must have shape {lead + ('K',)} (per row) or (K,) "
                         f"(shared), got {tuple(sampled.shape)}")
    bad = (neg < 0) | (neg >= V)
    if not torch.compiler.is_compiling() and bool(bad.any()):
        raise ValueError(f"sampled ids must lie in [0, {V}); found {int(neg[bad].min())} "
                         f"(min offending) and {int(neg[bad].max())} (max offending)")
    return neg


def _sampled_margin(mode, input, linear_weight, target, num_sampled, sampler, margin,
                    linear_bias, reduction, ignore_index, generator, sampled, per_negative):
    lead, t2, h, t, safe = _rows(input, linear_weight, target, reduction, linear_bias,
                                 ignore_index)
    margin = check_margin(margin, allow_negative=False)
    V = linear_weight.shape[0]
    _check_range(safe, V)
    neg = _negatives(h, V, safe, lead, num_sampled, sampler, sampled, generator, UniformSampler)
    s_t, s_neg = _scores(h, linear_weight, linear_bias, safe, neg)
    loss = ops.margin_rank_forward(s_neg, s_t, t, neg, margin, 1, mode, V, int(ignore_index))
    if per_negative == "mean":  # over the row's negatives that are not its target
        kept = (neg != t[:, None]) if neg.dim() == 2 else (neg[None, :] != t[:, None])
        loss = loss / kept.sum(1).clamp_min(1).to(loss.dtype)
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, None, None)


def sampled_margin_ranking_loss(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    num_sampled: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    margin: float = 1.0,
    linear_bias: Optional[Tensor] = None,
    reduction: str = "mean",
    generator: Optional[torch.Generator] = None,
    sampled: Optional[Tensor] = None,
    ignore_index: int = -100,
    negatives_reduction: str = "sum",
) -> Tensor:
    """The margin-ranking loss over K sampled negatives: per row
    sum_k max(0, margin - s(x, y) + s(x, ỹ_k)), negatives equal to the target left out
    (accidental hits). `negatives_reduction='mean'` divides by the row's negatives kept.

    The negatives are `sampled` (int64 [*, K] per row, or [K] shared by the batch, also as
    the SampledValues of sampler.candidates) or, when not given, K = `num_sampled` per row drawn with replacement from `sampler` (default
    uniform over the V classes) with `generator`. With the uniform sampler, the sum's
    expectation times V / K is the exact loss of full_margin_ranking_loss."""
    if negatives_reduction not in _NEGATIVES_REDUCTIONS:
        raise ValueError(f"negatives_reduction must be one of {_NEGATIVES_REDUCTIONS}, got "
                         f"{negatives_reduction!r}")
    return _sampled_margin(ops.MODE_HINGE, input, linear_weight, target, num_sampled, sampler,
                           margin, linear_bias, reduction, ignore_index, generator, sampled,
                           negatives_reduction)


def warp_loss(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    num_sampled: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    margin: float = 1.0,
    linear_bias: Optional[Tensor] = None,
    reduction: str = "mean",
    generator: Optional[torch.Generator] = None,
    sampled: Optional[Tensor] = None,
    ignore_index: int = -100,
) -> Tensor:
    """WARP (Weston et al., 2011) on a block of K candidates drawn up front, in draw order:
    the first candidate ỹ (not the target) with s(x, ỹ) > s(x, y) - margin is the violator;
    N its 1-based trial count (draws equal to the target are no trials), the rank estimate
    r = floor((V - 1) / N), and the row's loss L(r) * (margin - s(x, y) + s(x, ỹ)) with
    L(r) = 1 + 1/2 + ... + 1/r; 0 when none of the K violates. This is WARP's sampling
    until a violator is found, stopped after K trials, with the draws made in one step so
    that the loss is deterministic given `sampled` ([*, K] per row, or [K] shared; drawn
    per row from `sampler`, default uniform, when not given)."""
    return _sampled_margin(ops.MODE_WARP, input, linear_weight, target, num_sampled, sampler,
                           margin, linear_bias, reduction, ignore_index, generator, sampled,
                           "sum")


__all__ = ["check_margin", "full_margin_ranking_loss", "full_warp_loss", "multi_margin_loss",
           "sampled_margin_ranking_loss", "warp_loss"]
