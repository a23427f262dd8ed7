"""The logits input.linear_weightᵀ + linear_bias in blocks of at most `chunk_bytes`: the
machinery under every exact loss over all V classes (the full softmax, its hand-written
backward in _softmax_stats.py, the exact margin losses in _margin_stream.py, each
vocabulary-parallel rank's shard), so that no [N, V] tensor larger than the budget exists.

Shapes: h [N, D] (input as rows), linear_weight [V, D], linear_bias [V] or None.
"""

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

CHUNK_BYTES = 256 * 2**20


def acc_dtype(t: Tensor) -> torch.dtype:
    """The accumulation dtype of `t`'s computation: float64 for float64, else float32."""
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def check_chunk_bytes(chunk_bytes) -> int:
    """chunk_bytes as given, or a ValueError unless it is a positive int."""
    if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int) or chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be a positive int (the bytes of logits held at "
                         f"once), got {chunk_bytes!r}")
    return chunk_bytes


def blocks(rows: int, classes: int, chunk_bytes: int) -> Tuple[int, int]:
    """(rows, classes) per block so that one block of logits holds about chunk_bytes. All rows
    go in one block unless that leaves too few classes per block to be efficient (fewer than
    all of them, 1024, or a 16th of the budget); then rows are split too."""
    check_chunk_bytes(chunk_bytes)
    elements = max(1, chunk_bytes // 4)
    class_step = max(1, min(classes, elements // max(rows, 1)))
    floor = max(1, min(classes, 1024, elements // 16))
    if class_step >= floor and class_step * rows <= elements:
        return max(rows, 1), class_step
    return max(1, elements // floor), floor


def one_block(rows: int, classes: int, chunk_bytes: int) -> bool:
    """Whether all the [rows, classes] logits fit in one block of chunk_bytes."""
    return blocks(rows, classes, chunk_bytes) == (max(rows, 1), classes)


def capped(logits: Tensor, softcap: Optional[float]) -> Tensor:
    """Gemma 2's logit cap, softcap * tanh(logits / softcap): smooth, odd, slope 1 at 0 and
    bounded by +-softcap. None leaves the logits alone."""
    return logits if softcap is None else softcap * torch.tanh(logits / softcap)


def all_logits(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor],
               softcap: Optional[float] = None) -> Tensor:
    """Every logit [N, V] at once, in the accumulation dtype, capped (for one block)."""
    return capped(torch.nn.functional.linear(h, linear_weight, linear_bias).to(acc_dtype(h)),
                  softcap)


def logit_blocks(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor],
                 chunk_bytes: int, softcap: Optional[float] = None):
    """Yields (row slice, class start, logits [n, c] in the accumulation dtype, capped)."""
    rows, classes = h.shape[0], linear_weight.shape[0]
    row_step, class_step = blocks(rows, classes, chunk_bytes)
    for r0 in range(0, max(rows, 1), row_step):
        part = h[r0:r0 + row_step]
        for c0 in range(0, classes, class_step):
            b = None if linear_bias is None else linear_bias[c0:c0 + class_step]
            yield slice(r0, r0 + part.shape[0]), c0, all_logits(
                part, linear_weight[c0:c0 + class_step], b, softcap)


def check_full(input, linear_weight, linear_bias) -> Tensor:
    """input [*, D] as rows [N, D], once input, linear_weight [V, D] and linear_bias [V]
    agree (a TypeError or ValueError naming the argument otherwise)."""
    for name, t in (("input", input), ("linear_weight", linear_weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if linear_weight.dim() != 2 or input.dim() < 1 \
            or linear_weight.shape[1] != input.shape[-1]:
        raise ValueError(f"input [*, D] and linear_weight [V, D] disagree: "
                         f"{tuple(input.shape)} and {tuple(linear_weight.shape)}")
    if linear_bias is not None and tuple(linear_bias.shape) != (linear_weight.shape[0],):
        raise ValueError(f"linear_bias must have shape ({linear_weight.shape[0]},), got "
                         f"{tuple(linear_bias.shape)}")
    return input.reshape(math.prod(input.shape[:-1]), input.shape[-1])


def block_figures(logits: Tensor, targets: Optional[Tensor], class_sum: Optional[Tensor],
                  c0: int = 0):
    """One block's (logsumexp [n], sum of the logits at `targets` [n, T] that fall in the
    block's classes [c0, c0 + c) or None, sum_c class_sum[c] * logit[c] [n] or None)."""
    c = logits.shape[1]
    true = total = None
    if targets is not None:
        t = targets - c0
        inside = (t >= 0) & (t < c)
        picked = logits.gather(1, t.clamp(0, c - 1))
        true = torch.where(inside, picked, torch.zeros_like(picked)).sum(1)
    if class_sum is not None:
        total = logits @ class_sum[c0:c0 + c].to(logits.dtype)
    return torch.logsumexp(logits, 1), true, total


def stream(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor], chunk_bytes: int,
           targets: Optional[Tensor], class_sum: Optional[Tensor] = None,
           softcap: Optional[float] = None):
    """(log-sum-exp [N], sum of the logits at `targets` [N, T] or None, and with `class_sum`
    [V] the sum over classes of class_sum[c] * logit[c] [N]) in one pass over the blocks of
    logits: each block's logsumexp is folded into the running value with logaddexp (exact,
    no overflow: each block subtracts its own max), and the true logits are gathered from the
    block that holds them, so linear_weight rows are never gathered separately."""
    rows_done = []  # per block of rows: [lse, true, total]
    for rows, c0, logits in logit_blocks(h, linear_weight, linear_bias, chunk_bytes, softcap):
        lse, true, total = block_figures(logits, targets if targets is None else targets[rows],
                                         class_sum, c0)
        if c0 == 0:  # a new block of rows begins
            rows_done.append([lse, true, total])
            continue
        done = rows_done[-1]
        done[0] = torch.logaddexp(done[0], lse)
        done[1] = None if true is None else done[1] + true
        done[2] = None if total is None else done[2] + total
    lse, true, total = (None if parts[0] is None else
                        parts[0] if len(parts) == 1 else torch.cat(parts)
                        for parts in zip(*rows_done))
    return (lse, true) if class_sum is None else (lse, true, total)


__all__ = ["CHUNK_BYTES", "acc_dtype", "all_logits", "block_figures", "blocks", "capped",
           "check_full", "logit_blocks", "one_block", "stream"]
