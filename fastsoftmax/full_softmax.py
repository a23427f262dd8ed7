"""The exact full softmax, streamed over the classes: loss, log-sum-exp, log-probabilities and
argmax of input.linear_weightᵀ + linear_bias without ever holding the [N, V] logits (blocks of
at most `chunk_bytes`). Every output layer's eval path, `log_prob` and `predict` run here.

Shapes: input [*, D], linear_weight [V, D], linear_bias [V], weight [V] (per-class
rescaling), target int64 [*] or [*, T].
"""

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from ._reduction import Normalizer, check_softcap, check_z_loss, finish, loss_rows
from ._shapes import check_label_smoothing

CHUNK_BYTES = 256 * 2**20


def _acc_dtype(input: Tensor) -> torch.dtype:
    return torch.float64 if input.dtype == torch.float64 else torch.float32


def _blocks(rows: int, classes: int, chunk_bytes: int) -> Tuple[int, int]:
    """(rows, classes) per block so that one block of logits holds about chunk_bytes. All rows
    go in one block unless that leaves too few classes per block to be efficient (fewer than
    all of them, 1024, or a 16th of the budget); then rows are split too."""
    if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int) or chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be a positive int, got {chunk_bytes!r}")
    elements = max(1, chunk_bytes // 4)
    class_step = max(1, min(classes, elements // max(rows, 1)))
    floor = max(1, min(classes, 1024, elements // 16))
    if class_step >= floor and class_step * rows <= elements:
        return max(rows, 1), class_step
    return max(1, elements // floor), floor


def capped(logits: Tensor, softcap: Optional[float]) -> Tensor:
    """Gemma 2's logit cap, softcap * tanh(logits / softcap): smooth, odd, slope 1 at 0 and
    bounded by +-softcap. None leaves the logits alone."""
    return logits if softcap is None else softcap * torch.tanh(logits / softcap)


def _logit_blocks(h: Tensor, weight: Tensor, bias: Optional[Tensor], chunk_bytes: int,
                  softcap: Optional[float] = None):
    """Yields (row slice, class start, logits [n, c] in the accumulation dtype, capped)."""
    rows, classes = h.shape[0], weight.shape[0]
    row_step, class_step = _blocks(rows, classes, chunk_bytes)
    acc = _acc_dtype(h)
    for r0 in range(0, max(rows, 1), row_step):
        part = h[r0:r0 + row_step]
        for c0 in range(0, classes, class_step):
            b = None if bias is None else bias[c0:c0 + class_step]
            yield slice(r0, r0 + part.shape[0]), c0, capped(torch.nn.functional.linear(
                part, weight[c0:c0 + class_step], b).to(acc), softcap)


_HAS_LCE = hasattr(torch.nn.functional, "linear_cross_entropy") and hasattr(
    torch.nn, "LinearCrossEntropyOptions")


def _lce_eval_applies(h: Tensor, weight: Tensor, bias: Optional[Tensor], num_true: int,
                      class_weight: Optional[Tensor], eps: float) -> bool:
    """Where PyTorch's chunked linear_cross_entropy computes our exact loss at least as fast
    and as lean: forward only (no autograd), one true class, no per-class weight or smoothing
    (its chunked path falls back to whole logits for some of those), float32/float64. At
    N = 2048, D = 256, V = 10^5 on the CPU its 256-row chunks took 0.86x the time of our
    streamed blocks at the same 100 MiB budget (bench/bench_losses.py --cases eval)."""
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (h, weight, bias))
    return (_HAS_LCE and not needs_grad and num_true == 1 and class_weight is None and not eps
            and h.dtype in (torch.float32, torch.float64) and weight.dtype == h.dtype)


def _check_full(input, weight, bias) -> Tensor:
    for name, t in (("input", input), ("linear_weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if weight.dim() != 2 or input.dim() < 1 or weight.shape[1] != input.shape[-1]:
        raise ValueError(f"input [*, D] and linear_weight [V, D] disagree: "
                         f"{tuple(input.shape)} and {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"linear_bias must have shape ({weight.shape[0]},), got "
                         f"{tuple(bias.shape)}")
    return input.reshape(math.prod(input.shape[:-1]), input.shape[-1])


def _stream(h: Tensor, weight: Tensor, bias: Optional[Tensor], chunk_bytes: int,
            targets: Optional[Tensor], class_sum: Optional[Tensor] = None,
            softcap: Optional[float] = None):
    """(log-sum-exp [N], sum of the logits at `targets` [N, T] or None, and with `class_sum`
    [V] the sum over classes of class_sum[c] * logit[c] [N]) in one pass over the blocks of
    logits: each block's logsumexp is folded into the running value with logaddexp (exact,
    no overflow: each block subtracts its own max), and the true logits are gathered from the
    block that holds them, so weight rows are never gathered separately."""
    lse_blocks, true_blocks, sum_blocks = [], [], []
    for rows, c0, logits in _logit_blocks(h, weight, bias, chunk_bytes, softcap):
        part = torch.logsumexp(logits, 1)
        if class_sum is not None:
            total = logits @ class_sum[c0:c0 + logits.shape[1]].to(logits.dtype)
            if c0 == 0:
                sum_blocks.append(total)
            else:
                sum_blocks[-1] = sum_blocks[-1] + total
        true = None
        if targets is not None:
            t = targets[rows]
            inside = (t >= c0) & (t < c0 + logits.shape[1])
            picked = logits.gather(1, (t - c0).clamp(0, logits.shape[1] - 1))
            true = torch.where(inside, picked, torch.zeros_like(picked)).sum(1)
        if c0 == 0:  # a new block of rows begins
            lse_blocks.append(part)
            true_blocks.append(true)
        else:
            lse_blocks[-1] = torch.logaddexp(lse_blocks[-1], part)
            if true is not None:
                true_blocks[-1] = true_blocks[-1] + true
    lse = torch.cat(lse_blocks) if len(lse_blocks) > 1 else lse_blocks[0]
    true = None
    if targets is not None:
        true = torch.cat(true_blocks) if len(true_blocks) > 1 else true_blocks[0]
    if class_sum is None:
        return lse, true
    return lse, true, (torch.cat(sum_blocks) if len(sum_blocks) > 1 else sum_blocks[0])


def _stream_lean(h: Tensor, weight: Tensor, bias: Optional[Tensor], chunk_bytes: int,
                 targets: Tensor, class_sum: Optional[Tensor] = None,
                 softcap: Optional[float] = None):
    """_stream's (lse, true[, total]); under autograd through _softmax_stats, whose backward
    recomputes each block of logits instead of autograd keeping every block (all N x V
    logits: 10.6 GB against Cut Cross-Entropy's 1.2 GB at its headline shape on an H200)."""
    from ._softmax_stats import softmax_stats

    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (h, weight, bias))
    if not needs_grad or (class_sum is not None and class_sum.requires_grad):
        return _stream(h, weight, bias, chunk_bytes, targets, class_sum, softcap)
    out = softmax_stats(h, weight, bias, targets, class_sum, chunk_bytes, softcap)
    return out if class_sum is not None else out[:2]


def streaming_logsumexp(input: Tensor, linear_weight: Tensor, *,
                        linear_bias: Optional[Tensor] = None,
                        chunk_bytes: int = CHUNK_BYTES,
                        softcap: Optional[float] = None) -> Tensor:
    """log sum_c exp(input.weight[c] + bias[c]) per row, shape [*], in float32 (float64 for
    float64 input). The [N, V] logits are never held at once: each block of about
    `chunk_bytes` is reduced by logsumexp and folded into the running value with logaddexp,
    which is exact (no overflow: each block subtracts its own max). Differentiable; in
    backward autograd keeps the blocks it needs. `softcap` caps the logits first, as in
    full_softmax_loss."""
    weight, bias = linear_weight, linear_bias
    h = _check_full(input, weight, bias)
    none = torch.empty(h.shape[0], 0, dtype=torch.int64, device=h.device)
    lse, _ = _stream_lean(h, weight, bias, chunk_bytes, none, softcap=check_softcap(softcap))
    return lse.reshape(input.shape[:-1])


def full_log_softmax(input: Tensor, linear_weight: Tensor, *,
                     linear_bias: Optional[Tensor] = None,
                     chunk_bytes: int = CHUNK_BYTES,
                     softcap: Optional[float] = None) -> Tensor:
    """Exact log-probabilities [*, V] of every class (the output itself is [N, V]; only the
    intermediate logits are bounded by chunk_bytes), of the logits capped by `softcap`."""
    weight, bias = linear_weight, linear_bias
    h = _check_full(input, weight, bias)
    lse = streaming_logsumexp(h, weight, linear_bias=bias, chunk_bytes=chunk_bytes,
                              softcap=softcap)
    out = torch.empty(h.shape[0], weight.shape[0], dtype=lse.dtype, device=h.device)
    for rows, c0, logits in _logit_blocks(h, weight, bias, chunk_bytes, softcap):
        out[rows, c0:c0 + logits.shape[1]] = logits - lse[rows, None]
    return out.reshape(*input.shape[:-1], weight.shape[0])


def full_argmax(input: Tensor, linear_weight: Tensor, *,
                linear_bias: Optional[Tensor] = None,
                chunk_bytes: int = CHUNK_BYTES) -> Tensor:
    """The most likely class [*] (int64) of the exact softmax, streamed as the log-sum-exp."""
    weight, bias = linear_weight, linear_bias
    h = _check_full(input, weight, bias)
    best = torch.full((h.shape[0],), -math.inf, dtype=_acc_dtype(h), device=h.device)
    arg = torch.zeros(h.shape[0], dtype=torch.int64, device=h.device)
    for rows, c0, logits in _logit_blocks(h, weight, bias, chunk_bytes):
        value, index = logits.max(1)
        better = value > best[rows]
        best[rows] = torch.where(better, value, best[rows])
        arg[rows] = torch.where(better, index + c0, arg[rows])
    return arg.reshape(input.shape[:-1])


def full_softmax_loss(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Optional[Tensor] = None,
    weight: Optional[Tensor] = None,
    label_smoothing: float = 0.0,
    num_true: Optional[int] = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    chunk_bytes: int = CHUNK_BYTES,
    z_loss: float = 0.0,
    softcap: Optional[float] = None,
    return_lse: bool = False,
    normalizer: Optional[Normalizer] = None,
):
    """Exact softmax cross entropy of input.linear_weightᵀ + linear_bias with label mass 1/T
    on each of the row's T true classes (target [*] or [*, T]); the same value as
    F.linear_cross_entropy / F.cross_entropy on the logits, including `weight` (per-class
    rescaling [V], one true class per row; 'mean' divides by the sum of the rows' target
    weights) and `label_smoothing` (mass eps spread uniformly over all V classes), computed
    with streaming_logsumexp so the logits never exist whole.

    The options large-model training asks for (Liger-Kernel, Cut Cross-Entropy):
    `softcap` (Gemma 2) replaces every logit x by softcap * tanh(x / softcap) before
    everything else (smoothing and z_loss see the capped logits). `z_loss` (PaLM) adds
    z_loss * lse² to each row's loss, lse the row's logsumexp; with `weight` the row's whole
    loss, this term included, is scaled by its class weight. `return_lse=True` returns
    (loss, lse): lse [*] the logsumexp of the (capped) logits of every row, ignored rows
    included, in float32 (float64 for float64 input), differentiable.
    `normalizer` (with reduction='sum') divides the summed loss by it: give every
    micro-batch the whole batch's `mean_normalizer` and the micro-batch losses sum to the
    whole batch's 'mean' loss (gradient accumulation)."""
    class_weight, weight, bias = weight, linear_weight, linear_bias
    lead, t2, h, class_weight = loss_rows(input, weight, target, reduction, num_true, class_weight,
                                          normalizer)
    z_loss, softcap = check_z_loss(z_loss), check_softcap(softcap)
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse must be a bool, got {type(return_lse).__name__}")
    want_lse = bool(z_loss) or return_lse
    V = weight.shape[0]
    eps = check_label_smoothing(label_smoothing)
    keep = t2[:, 0] != ignore_index
    safe = torch.where(t2 == ignore_index, torch.zeros_like(t2), t2)
    in_range = ((safe >= 0) & (safe < V)).all()
    message = f"target ids must lie in [0, {V}) or equal ignore_index"
    if torch.compiler.is_compiling():
        torch._assert_async(in_range, message)
    elif not bool(in_range):
        bad = safe[(safe < 0) | (safe >= V)]  # the same detail as the sampled losses give
        raise ValueError(f"{message}; found {int(bad.min())} (min offending) and "
                         f"{int(bad.max())} (max offending)")
    if t2.shape[1] == 1 and _blocks(h.shape[0], V, chunk_bytes) == (max(h.shape[0], 1), V):
        # All logits fit in one block: F.cross_entropy computes the same log-sum-exp, fused
        # with its gradient (about 1.5x faster than logsumexp + gather on CPU).
        logits = capped(torch.nn.functional.linear(h, weight, bias).to(_acc_dtype(h)), softcap)
        loss = torch.nn.functional.cross_entropy(
            logits, safe[:, 0], reduction="none", label_smoothing=eps,
            weight=None if class_weight is None else class_weight.to(logits.dtype))
        lse = torch.logsumexp(logits, 1) if want_lse else None
    elif (not want_lse and softcap is None
          and _lce_eval_applies(h, weight, bias, t2.shape[1], class_weight, eps)):
        _check_full(h, weight, bias)
        rows = max(1, chunk_bytes // (4 * max(V, 1)))  # the same logits budget, in rows
        loss = torch.nn.functional.linear_cross_entropy(
            h, weight, safe[:, 0], linear_bias=bias, reduction="none",
            options=torch.nn.LinearCrossEntropyOptions(batch_chunk_size=rows)).to(_acc_dtype(h))
        lse = None
    else:
        _check_full(h, weight, bias)
        if eps:  # F.cross_entropy's smoothing: eps / V * sum_c a(c) * (lse - logit_c)
            a = (torch.ones(V, dtype=_acc_dtype(h), device=h.device) if class_weight is None
                 else class_weight.to(_acc_dtype(h)))
            lse, true, total = _stream_lean(h, weight, bias, chunk_bytes, safe, a, softcap)
        else:
            lse, true = _stream_lean(h, weight, bias, chunk_bytes, safe, softcap=softcap)
        loss = lse - true / t2.shape[1]
        if class_weight is not None:
            loss = loss * class_weight.to(loss.dtype)[safe[:, 0]]
        if eps:
            loss = (1.0 - eps) * loss + eps * (a.sum() * lse - total) / V
    row_weight = None if class_weight is None else class_weight.to(loss.dtype)[safe[:, 0]]
    if z_loss:
        z_term = z_loss * lse.to(loss.dtype).square()
        loss = loss + (z_term if row_weight is None else z_term * row_weight)
    loss = torch.where(keep, loss, torch.zeros_like(loss))
    out = finish(loss, t2, lead, reduction, ignore_index, input.dtype, row_weight, normalizer)
    return (out, lse.reshape(lead)) if return_lse else out


__all__ = ["CHUNK_BYTES", "capped", "full_argmax", "full_log_softmax", "full_softmax_loss",
           "streaming_logsumexp"]
