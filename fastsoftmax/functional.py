"""Sampled output-layer losses: sampled softmax, NCE and negative sampling.

Shapes: input [*, D], weight [V, D], bias [V], target int64 [*] or [*, num_true]. Any
leading dims. Losses are computed per row in float32 (float64 for float64 input) and
returned in the input's dtype; `reduction='mean'` averages over rows not ignored (NaN when
every row is ignored or the batch is empty, as F.cross_entropy); 'sum' of an empty batch is 0
and 'none' returns shape [*].

Sampled softmax and NCE follow TensorFlow's `_compute_sampled_logits`: the logit of class c
is input.weight[c] + bias[c] - log(expected_count(c)), for the row's true classes and for one
candidate set shared by the batch; with `remove_accidental_hits` a sampled class equal to
one of the row's true classes is left out of that row. Negative sampling (word2vec) draws K
negatives per row (or K shared) and needs neither bias nor log-Q.
"""

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import ops
from ._shapes import check_count, check_inputs, reduce_loss, target_2d
from .samplers import LogUniformSampler, SampledValues, Sampler, UniformSampler

def _check_sampler(sampler, num_classes: int, device: torch.device) -> Sampler:
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sampler must be a fastsoftmax Sampler, got {type(sampler).__name__}")
    if sampler.num_classes != num_classes:
        raise ValueError(
            f"sampler draws from {sampler.num_classes} classes but weight has {num_classes}"
        )
    if sampler.device != device:
        raise ValueError(
            f"sampler is on {sampler.device} but input is on {device} (use sampler.to(device))"
        )
    return sampler


def draw_candidates(
    sampler: Sampler, true_classes: Tensor, num_sampled: int,
    generator: Optional[torch.Generator] = None,
) -> SampledValues:
    """`sampler.candidates(true_classes, num_sampled, unique=True)` without its host-side id
    check, so that it traces under torch.compile; the loss ops check every id natively.
    `true_classes` must hold valid ids (ignored rows replaced by any valid id)."""
    return sampler._draw_candidates(true_classes, num_sampled, True, generator)


def _sampled_logits_loss(input, weight, target, bias, *, mode, num_sampled, sampler, sampled,
                         num_true, remove_accidental_hits, log_z, reduction, ignore_index,
                         generator, sparse):
    """Sampled softmax (mode MODE_SOFTMAX) or NCE (MODE_NCE): the body both public
    functionals share."""
    check_inputs(input, weight, target, reduction)
    lead = tuple(input.shape[:-1])
    t2 = target_2d(target, lead, num_true)
    h = input.reshape(math.prod(input.shape[:-1]), input.shape[-1])
    V = weight.shape[0]
    if sampled is None:
        if num_sampled is None:
            raise ValueError("give either num_sampled (and optionally sampler) or sampled")
        num_sampled = check_count(num_sampled, "num_sampled")
        if num_sampled > V:
            raise ValueError(f"cannot draw {num_sampled} distinct candidates from {V} classes")
        if sampler is None:
            sampler = LogUniformSampler(V, device=input.device)
        sampler = _check_sampler(sampler, V, input.device)
        safe = torch.where(t2 == ignore_index, torch.zeros_like(t2), t2)
        sampled = draw_candidates(sampler, safe, num_sampled, generator)
    else:
        if not (isinstance(sampled, tuple) and len(sampled) == 3):
            raise TypeError("sampled must be a SampledValues triple (sampler.candidates(...))")
        if num_sampled is not None and num_sampled != sampled[0].shape[0]:
            raise ValueError(
                f"num_sampled={num_sampled} but sampled holds {sampled[0].shape[0]} candidates"
            )
    candidates, true_count, sampled_count = sampled
    if not isinstance(log_z, Tensor):
        # float64, so that float64 input keeps every bit of log_z (the op casts it to the
        # accumulation dtype; a float32 tensor here lost 1e-9 relative, fuzzing found).
        log_z = torch.tensor(float(log_z), dtype=torch.float64, device=input.device)
    true_count = true_count.reshape(t2.shape)
    loss, _, _ = ops.sampled_logits_forward(
        h, weight, bias, t2, candidates, true_count, sampled_count, log_z.reshape(()),
        mode, bool(remove_accidental_hits), int(ignore_index), bool(sparse),
    )
    return reduce_loss(loss, t2, lead, reduction, ignore_index, input.dtype)


def sampled_softmax_loss(
    input: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Optional[Tensor] = None,
    *,
    num_sampled: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    sampled: Optional[SampledValues] = None,
    num_true: int = 1,
    remove_accidental_hits: bool = True,
    reduction: str = "mean",
    ignore_index: int = -100,
    generator: Optional[torch.Generator] = None,
    sparse: bool = False,
) -> Tensor:
    """Softmax cross entropy over [true..., sampled...] logits with label mass 1/num_true on
    each true class (tf.nn.sampled_softmax_loss). One candidate set of `num_sampled` distinct
    classes is drawn from `sampler` (default LogUniformSampler) per call, shared by the batch,
    unless `sampled` is given. `sparse` makes weight's gradient a sparse tensor of the rows
    used (for SparseAdam or SGD on very large V)."""
    return _sampled_logits_loss(
        input, weight, target, bias, mode=ops.MODE_SOFTMAX, num_sampled=num_sampled,
        sampler=sampler, sampled=sampled, num_true=num_true,
        remove_accidental_hits=remove_accidental_hits, log_z=0.0, reduction=reduction,
        ignore_index=ignore_index, generator=generator, sparse=sparse)


def nce_loss(
    input: Tensor,
    weight: Tensor,
    target: Tensor,
    bias: Optional[Tensor] = None,
    *,
    num_sampled: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    sampled: Optional[SampledValues] = None,
    num_true: int = 1,
    remove_accidental_hits: bool = False,
    log_z=0.0,
    reduction: str = "mean",
    ignore_index: int = -100,
    generator: Optional[torch.Generator] = None,
    sparse: bool = False,
) -> Tensor:
    """Noise-contrastive estimation (tf.nn.nce_loss): per row, the sum of sigmoid cross
    entropies of the true logits (label 1/num_true) and sampled logits (label 0), every logit
    shifted by -log_z (a float, or a tensor to learn it; 0 = self-normalised). `sparse` as in
    sampled_softmax_loss."""
    return _sampled_logits_loss(
        input, weight, target, bias, mode=ops.MODE_NCE, num_sampled=num_sampled,
        sampler=sampler, sampled=sampled, num_true=num_true,
        remove_accidental_hits=remove_accidental_hits, log_z=log_z, reduction=reduction,
        ignore_index=ignore_index, generator=generator, sparse=sparse)


def negative_sampling_loss(
    input: Tensor,
    weight: Tensor,
    target: Tensor,
    *,
    num_negatives: Optional[int] = None,
    sampler: Optional[Sampler] = None,
    negatives: Optional[Tensor] = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    generator: Optional[torch.Generator] = None,
    sparse: bool = False,
) -> Tensor:
    """word2vec's loss: per row, -sum_true log s(w_t.h) - sum_k log s(-w_k.h). target [*] or
    [*, T]; negatives int64 [*, K] (per row) or [K] (shared). When not given, K =
    `num_negatives` per-row negatives are drawn from `sampler` (default uniform). Negatives
    equal to a true class are kept, as in the formula (word2vec.c skips them). `sparse` as in
    sampled_softmax_loss."""
    check_inputs(input, weight, target, reduction)
    lead = tuple(input.shape[:-1])
    t2 = target_2d(target, lead, None)
    h = input.reshape(math.prod(input.shape[:-1]), input.shape[-1])
    V = weight.shape[0]
    if negatives is None:
        if num_negatives is None:
            raise ValueError("give either num_negatives (and optionally sampler) or negatives")
        num_negatives = check_count(num_negatives, "num_negatives")
        if sampler is None:
            sampler = UniformSampler(V, device=input.device)
        sampler = _check_sampler(sampler, V, input.device)
        neg = sampler.sample(h.shape[0], num_negatives, generator=generator)
    else:
        if not isinstance(negatives, Tensor):
            raise TypeError(f"negatives must be a tensor, got {type(negatives).__name__}")
        if num_negatives is not None and num_negatives != negatives.shape[-1]:
            raise ValueError(
                f"num_negatives={num_negatives} but negatives has {negatives.shape[-1]} per row"
            )
        if negatives.dim() == 1:
            neg = negatives
        elif negatives.dim() == len(lead) + 1 and tuple(negatives.shape[:-1]) == lead:
            neg = negatives.reshape(h.shape[0], negatives.shape[-1])  # K may be 0
        else:
            raise ValueError(
                f"negatives must have shape {lead + ('K',)} (per row) or (K,) (shared), got "
                f"{tuple(negatives.shape)}"
            )
    loss, _ = ops.negative_sampling_forward(h, weight, t2, neg, int(ignore_index), bool(sparse))
    return reduce_loss(loss, t2, lead, reduction, ignore_index, input.dtype)


# ---------------------------------------------------------------------------------------
# Exact full softmax, streamed over the classes
# ---------------------------------------------------------------------------------------
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


def _logit_blocks(h: Tensor, weight: Tensor, bias: Optional[Tensor], chunk_bytes: int):
    """Yields (row slice, class start, logits [n, c] in the accumulation dtype)."""
    rows, classes = h.shape[0], weight.shape[0]
    row_step, class_step = _blocks(rows, classes, chunk_bytes)
    acc = _acc_dtype(h)
    for r0 in range(0, max(rows, 1), row_step):
        part = h[r0:r0 + row_step]
        for c0 in range(0, classes, class_step):
            b = None if bias is None else bias[c0:c0 + class_step]
            yield slice(r0, r0 + part.shape[0]), c0, torch.nn.functional.linear(
                part, weight[c0:c0 + class_step], b).to(acc)


def _check_full(input, weight, bias) -> Tensor:
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if weight.dim() != 2 or input.dim() < 1 or weight.shape[1] != input.shape[-1]:
        raise ValueError(f"input [*, D] and weight [V, D] disagree: {tuple(input.shape)} and "
                         f"{tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")
    return input.reshape(math.prod(input.shape[:-1]), input.shape[-1])


def _stream(h: Tensor, weight: Tensor, bias: Optional[Tensor], chunk_bytes: int,
            targets: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor]]:
    """(log-sum-exp [N], sum of the logits at `targets` [N, T] or None) in one pass over the
    blocks of logits: each block's logsumexp is folded into the running value with logaddexp
    (exact, no overflow: each block subtracts its own max), and the true logits are gathered
    from the block that holds them, so weight rows are never gathered separately."""
    lse_blocks, true_blocks = [], []
    for rows, c0, logits in _logit_blocks(h, weight, bias, chunk_bytes):
        part = torch.logsumexp(logits, 1)
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
    if targets is None:
        return lse, None
    return lse, (torch.cat(true_blocks) if len(true_blocks) > 1 else true_blocks[0])


def streaming_logsumexp(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *,
                        chunk_bytes: int = CHUNK_BYTES) -> Tensor:
    """log sum_c exp(input.weight[c] + bias[c]) per row, shape [*], in float32 (float64 for
    float64 input). The [N, V] logits are never held at once: each block of about
    `chunk_bytes` is reduced by logsumexp and folded into the running value with logaddexp,
    which is exact (no overflow: each block subtracts its own max). Differentiable; in
    backward autograd keeps the blocks it needs."""
    h = _check_full(input, weight, bias)
    lse, _ = _stream(h, weight, bias, chunk_bytes, None)
    return lse.reshape(input.shape[:-1])


def full_log_softmax(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *,
                     chunk_bytes: int = CHUNK_BYTES) -> Tensor:
    """Exact log-probabilities [*, V] of every class (the output itself is [N, V]; only the
    intermediate logits are bounded by chunk_bytes)."""
    h = _check_full(input, weight, bias)
    lse = streaming_logsumexp(h, weight, bias, chunk_bytes=chunk_bytes)
    out = torch.empty(h.shape[0], weight.shape[0], dtype=lse.dtype, device=h.device)
    for rows, c0, logits in _logit_blocks(h, weight, bias, chunk_bytes):
        out[rows, c0:c0 + logits.shape[1]] = logits - lse[rows, None]
    return out.reshape(*input.shape[:-1], weight.shape[0])


def full_argmax(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *,
                chunk_bytes: int = CHUNK_BYTES) -> Tensor:
    """The most likely class [*] (int64) of the exact softmax, streamed as the log-sum-exp."""
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
    weight: Tensor,
    target: Tensor,
    bias: Optional[Tensor] = None,
    *,
    num_true: Optional[int] = None,
    reduction: str = "mean",
    ignore_index: int = -100,
    chunk_bytes: int = CHUNK_BYTES,
) -> Tensor:
    """Exact softmax cross entropy of input.weightᵀ + bias with label mass 1/T on each of the
    row's T true classes (target [*] or [*, T]); the same value as F.cross_entropy on the
    logits, computed with streaming_logsumexp so the logits never exist whole."""
    check_inputs(input, weight, target, reduction)
    lead = tuple(input.shape[:-1])
    t2 = target_2d(target, lead, num_true)
    h = input.reshape(math.prod(input.shape[:-1]), input.shape[-1])
    V = weight.shape[0]
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
        logits = torch.nn.functional.linear(h, weight, bias).to(_acc_dtype(h))
        loss = torch.nn.functional.cross_entropy(logits, safe[:, 0], reduction="none")
    else:
        _check_full(h, weight, bias)
        lse, true = _stream(h, weight, bias, chunk_bytes, safe)
        loss = lse - true / t2.shape[1]
    loss = torch.where(keep, loss, torch.zeros_like(loss))
    return reduce_loss(loss, t2, lead, reduction, ignore_index, input.dtype)


__all__ = [
    "draw_candidates",
    "full_argmax",
    "full_log_softmax",
    "full_softmax_loss",
    "nce_loss",
    "negative_sampling_loss",
    "sampled_softmax_loss",
    "streaming_logsumexp",
]

# The hierarchical softmax lives in its own module; exported from here as well.
from .hierarchical import hierarchical_softmax_loss  # noqa: E402

__all__ += ["hierarchical_softmax_loss"]

# In-batch / mixed negatives (two-tower retrieval) live in retrieval.py.
from .retrieval import in_batch_softmax_loss  # noqa: E402

__all__ += ["in_batch_softmax_loss"]
