"""Vocabulary-parallel losses: each rank holds the rows [start, start + rows) of the output
embedding linear_weight [V, D] (and of linear_bias [V]) and the same input rows h [N, D] and
targets as every other rank of its group. The values equal the single-process functionals'
(fastsoftmax.functional), the only differences being the order of floating-point sums.

Exact full softmax: each rank streams its shard's logits in blocks
(fastsoftmax.losses._streaming.stream), or computes them tile by tile with the fused kernels (losses/fused.py, with fused=True),
and keeps its own log-sum-exp, target logit (0 where another rank owns the target) and,
with label smoothing, weighted logit sum; log Z = logsumexp_over_vocab_group (all-reduce max,
then sum) and the target logit = reduce_from_vocab_group. Backward: one all-reduce, of dL/dh.

Sampled softmax, NCE, negative sampling: every rank holds the same candidate ids (drawn by
the layer from one sampler over the global V with the same generator state, or given). Each
computes the logits of the ids it owns, [N, T + S] with zeros elsewhere, and one all-reduce
(sum) gives every rank the whole logit matrix; logQ, accidental hits and the loss follow on
that small matrix, identically on every rank. Backward: again only the all-reduce of dL/dh.
"""

import math
from typing import Optional

import torch
from torch import Tensor

from .. import ops
from ..losses._reduction import check_softcap, check_z_loss, finish, loss_rows
from ..losses._shapes import check_label_smoothing
from ..losses._softmax_stats import softmax_stats
from ..losses._streaming import CHUNK_BYTES, acc_dtype
from ..losses import fused as _fused
from ..losses.full import finish_full, loss_dtype, loss_from_stats
from .mappings import (agree, copy_to_vocab_group, logsumexp_over_vocab_group,
                       reduce_from_vocab_group)


def _checked_targets(t2: Tensor, num_classes: int, ignore_index: int, device, group,
                     check: bool) -> Tensor:
    """Targets [N, T] with ignored rows set to 0; an id outside [0, V) on any rank is a
    ValueError on every rank (one small all-reduce; skipped when `check` is False)."""
    safe = torch.where(t2 == ignore_index, torch.zeros_like(t2), t2)
    if check:
        bad = safe[(safe < 0) | (safe >= num_classes)]
        agree(bad.numel() == 0,
              f"target ids must lie in [0, {num_classes}) or equal ignore_index; found "
              f"{int(bad.min()) if bad.numel() else 0} (min offending) and "
              f"{int(bad.max()) if bad.numel() else 0} (max offending)", device, group)
    return safe


def vocab_parallel_full_softmax_loss(
    input: Tensor, linear_weight: Tensor, target: Tensor, *, num_classes: int, start: int,
    linear_bias: Optional[Tensor] = None, weight: Optional[Tensor] = None,
    label_smoothing: float = 0.0, num_true: Optional[int] = None, reduction: str = "mean",
    ignore_index: int = -100, chunk_bytes: int = CHUNK_BYTES, z_loss: float = 0.0,
    softcap: Optional[float] = None, group=None, check_targets: bool = True,
    fused: Optional[bool] = None,
) -> Tensor:
    """full_softmax_loss with linear_weight the rows [start, start + rows) of the [V, D]
    embedding (V = num_classes). `weight` is the whole per-class weight [V] on every rank
    (a row's weight is its target's, wherever that class lives). `fused` picks each shard's
    kernels as full_softmax_loss's does."""
    V, rows = num_classes, linear_weight.shape[0]
    full_shape = torch.empty(V, linear_weight.shape[1], device="meta")
    lead, t2, h, weight = loss_rows(input, full_shape, target, reduction, num_true, weight,
                                    None)
    z_loss, softcap = check_z_loss(z_loss), check_softcap(softcap)
    eps = check_label_smoothing(label_smoothing)
    safe = _checked_targets(t2, V, ignore_index, h.device, group, check_targets)
    h = copy_to_vocab_group(h, group)
    local = safe - start  # outside [0, rows) on the other ranks: the stream leaves it out
    acc = acc_dtype(h)
    a = None
    if eps:  # F.cross_entropy's smoothing needs sum_c a(c) * logit_c over all V classes
        a = torch.ones(V, dtype=acc, device=h.device) if weight is None else weight.to(acc)
    lse, true, total = shard_stats(h, linear_weight, linear_bias, local,
                                   None if a is None else a[start:start + rows], chunk_bytes,
                                   softcap, fused, weight)
    if eps:
        total = reduce_from_vocab_group(total, group)
    lse = logsumexp_over_vocab_group(lse, group)
    true = reduce_from_vocab_group(true, group)
    row_weight = None if weight is None else weight.to(lse.dtype)[safe[:, 0]]
    loss = loss_from_stats(lse, true, total, t2.shape[1], row_weight, eps, a)
    return finish_full(loss, lse, z_loss, row_weight, t2, lead, reduction, ignore_index,
                       loss_dtype(input), None)


def shard_stats(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor],
                local: Tensor, class_sum: Optional[Tensor], chunk_bytes: int,
                softcap: Optional[float], fused: Optional[bool], weight: Optional[Tensor]):
    """(lse, true, total) [N] over this rank's classes, targets outside [0, rows) counting in
    no row's true: the fused kernels where `fused` resolves to them, else streamed blocks.
    Either way the logit blocks are recomputed in backward, never kept."""
    if _fused.resolve(fused, h, linear_weight, linear_bias, weight):
        return ops.fused_softmax.fused_softmax_stats(h, linear_weight, linear_bias, local,
                                                     class_sum, softcap)
    return softmax_stats(h, linear_weight, linear_bias, local, class_sum, chunk_bytes, softcap)


def owned_logits(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor], ids: Tensor,
                 start: int, group=None) -> Tensor:
    """The logits h[n] . w[ids] + b[ids] of global class ids, on every rank: ids [M] (shared
    by the rows) gives [N, M], ids [N, M] gives [N, M]. Each rank computes the ids it owns
    (zeros elsewhere) and one all-reduce sums them. `h` must already be copy_to_vocab_group'd.
    """
    rows = linear_weight.shape[0]
    local = ids - start
    mine = (local >= 0) & (local < rows)
    at = torch.where(mine, local, torch.zeros_like(local))
    acc = acc_dtype(h)
    if ids.dim() == 1:
        part = h @ linear_weight[at].t()  # [N, M]
        if linear_bias is not None:
            part = part + linear_bias[at]
        part = torch.where(mine[None, :], part.to(acc), torch.zeros((), dtype=acc,
                                                                    device=h.device))
    else:  # fused gather-dots: no [N, M, D] block of gathered rows
        part = ops.row_scores(h, linear_weight, linear_bias, at).to(acc)
        part = torch.where(mine, part, torch.zeros((), dtype=acc, device=h.device))
    return reduce_from_vocab_group(part, group)


def _sampled_loss(input, linear_weight, target, *, num_classes, start, linear_bias, sampled,
                  num_true, remove_accidental_hits, log_z, reduction, ignore_index, mode, group,
                  check_targets):
    """The shared body of the vocabulary-parallel sampled softmax and NCE (TensorFlow's
    _compute_sampled_logits on the gathered logits): logit = h.w + b - log Q - log_z."""
    V = num_classes
    full_shape = torch.empty(V, linear_weight.shape[1], device="meta")
    lead, t2, h, _ = loss_rows(input, full_shape, target, reduction, num_true, None, None)
    keep = t2[:, 0] != ignore_index
    safe = _checked_targets(t2, V, ignore_index, h.device, group, check_targets)
    candidates, true_count, sampled_count = sampled
    T = t2.shape[1]
    if check_targets:
        bad = (candidates < 0) | (candidates >= V)
        agree(not bool(bad.any()), f"sampled candidates must lie in [0, {V})", h.device, group)
    h = copy_to_vocab_group(h, group)
    acc = acc_dtype(h)
    if isinstance(log_z, Tensor):
        log_z = log_z.to(acc)
    xt = owned_logits(h, linear_weight, linear_bias, safe, start, group)
    xt = xt - true_count.reshape(t2.shape).to(acc).log() - log_z
    xs = owned_logits(h, linear_weight, linear_bias, candidates, start, group)
    xs = xs - sampled_count.to(acc).log()[None, :] - log_z
    hit = torch.zeros(xs.shape, dtype=torch.bool, device=h.device)
    if remove_accidental_hits:  # every position of a candidate equal to a true class
        hit = (candidates[None, None, :] == safe[:, :, None]).any(1)
    if mode == ops.MODE_SOFTMAX:
        masked = torch.where(hit, torch.full((), -math.inf, dtype=acc, device=h.device), xs)
        lse = torch.logsumexp(torch.cat([xt, masked], 1), 1)
        loss = lse - xt.sum(1) / T
    else:  # sigmoid cross entropy, labels 1/T on the true logits and 0 on the sampled
        noise = torch.where(hit, torch.zeros((), dtype=acc, device=h.device),
                            torch.nn.functional.softplus(xs))
        loss = (torch.nn.functional.softplus(xt) - xt / T).sum(1) + noise.sum(1)
    loss = torch.where(keep, loss, torch.zeros_like(loss))
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, None, None)


def vocab_parallel_sampled_softmax_loss(input, linear_weight, target, *, num_classes, start,
                                        sampled, linear_bias=None, num_true=1,
                                        remove_accidental_hits=True, reduction="mean",
                                        ignore_index=-100, group=None, check_targets=True):
    """sampled_softmax_loss over given candidates `sampled` (a SampledValues triple over the
    global V, the same on every rank) with a row-sharded linear_weight."""
    return _sampled_loss(input, linear_weight, target, num_classes=num_classes, start=start,
                         linear_bias=linear_bias, sampled=sampled, num_true=num_true,
                         remove_accidental_hits=remove_accidental_hits, log_z=0.0,
                         reduction=reduction, ignore_index=ignore_index,
                         mode=ops.MODE_SOFTMAX, group=group, check_targets=check_targets)


def vocab_parallel_nce_loss(input, linear_weight, target, *, num_classes, start, sampled,
                            linear_bias=None, num_true=1, remove_accidental_hits=False,
                            log_z=0.0, reduction="mean", ignore_index=-100, group=None,
                            check_targets=True):
    """nce_loss over given candidates with a row-sharded linear_weight; `log_z` a float or a
    (replicated) tensor."""
    return _sampled_loss(input, linear_weight, target, num_classes=num_classes, start=start,
                         linear_bias=linear_bias, sampled=sampled, num_true=num_true,
                         remove_accidental_hits=remove_accidental_hits, log_z=log_z,
                         reduction=reduction, ignore_index=ignore_index, mode=ops.MODE_NCE,
                         group=group, check_targets=check_targets)


def vocab_parallel_negative_sampling_loss(input, linear_weight, target, *, num_classes, start,
                                          negatives, reduction="mean", ignore_index=-100,
                                          group=None, check_targets=True):
    """negative_sampling_loss with given `negatives` ([*, K] per row or [K] shared, global
    ids, the same on every rank): per row sum_t softplus(-x_t) + sum_k softplus(x_k)."""
    V = num_classes
    full_shape = torch.empty(V, linear_weight.shape[1], device="meta")
    lead, t2, h, _ = loss_rows(input, full_shape, target, reduction, None, None, None)
    keep = t2[:, 0] != ignore_index
    safe = _checked_targets(t2, V, ignore_index, h.device, group, check_targets)
    neg = negatives if negatives.dim() == 1 else negatives.reshape(h.shape[0], -1)
    if check_targets:
        bad = (neg < 0) | (neg >= V)
        agree(not bool(bad.any()), f"negatives must lie in [0, {V})", h.device, group)
    h = copy_to_vocab_group(h, group)
    xt = owned_logits(h, linear_weight, None, safe, start, group)
    xk = owned_logits(h, linear_weight, None, neg, start, group)
    softplus = torch.nn.functional.softplus
    loss = softplus(-xt).sum(1) + softplus(xk).sum(1)
    loss = torch.where(keep, loss, torch.zeros_like(loss))
    return finish(loss, t2, lead, reduction, ignore_index, input.dtype, None, None)
