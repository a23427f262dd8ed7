"""The exact full softmax, streamed over the classes: loss, log-sum-exp, log-probabilities and
argmax of input.linear_weightᵀ + linear_bias without ever holding the [N, V] logits (blocks of
at most `chunk_bytes`, fastsoftmax.losses._streaming), and its module FullSoftmaxLoss.

LinearLayer, the base of every layer that holds its output embedding as an nn.Linear (the
sampled, negative-sampling and margin layers too), lives here because its exact paths (the
eval loss, `log_prob`, `predict`) are this file's functionals.

Shapes: input [*, D], linear_weight [V, D], linear_bias [V], weight [V] (per-class
rescaling), target int64 [*] or [*, T].
"""

import math
from typing import Optional

import torch
from torch import Tensor, nn

from .. import ops
from ._layer_parts import COMMON_ARGS, OutputLayer, keywords_after_positionals, \
    migrate_state_dict
from ._reduction import Normalizer, check_softcap, check_z_loss, finish, loss_rows
from ._shapes import check_label_smoothing, check_target_range
from ._softmax_stats import softmax_stats
from ._streaming import CHUNK_BYTES, acc_dtype, all_logits, check_full, logit_blocks, \
    one_block, stream
from . import fused as _fused

_HAS_LCE = hasattr(torch.nn.functional, "linear_cross_entropy") and hasattr(
    torch.nn, "LinearCrossEntropyOptions")


def _lce_eval_applies(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor],
                      num_true: int, weight: Optional[Tensor], eps: float) -> bool:
    """Where PyTorch's chunked linear_cross_entropy computes our exact loss at least as fast
    and as lean: forward only (no autograd), one true class, no per-class weight or smoothing
    (its chunked path falls back to whole logits for some of those), float32/float64. At
    N = 2048, D = 256, V = 10^5 on the CPU its 256-row chunks took 0.86x the time of our
    streamed blocks at the same 100 MiB budget (bench/bench_losses.py --cases eval)."""
    return (_HAS_LCE and not ops.needs_grad(h, linear_weight, linear_bias) and num_true == 1
            and weight is None and not eps and h.dtype in (torch.float32, torch.float64)
            and linear_weight.dtype == h.dtype)


def _stream_lean(h: Tensor, linear_weight: Tensor, linear_bias: Optional[Tensor],
                 chunk_bytes: int, targets: Tensor, class_sum: Optional[Tensor] = None,
                 softcap: Optional[float] = None):
    """_streaming.stream's (lse, true[, total]); under autograd through _softmax_stats, whose
    backward recomputes each block of logits instead of autograd keeping every block (all
    N x V logits: 10.6 GB against Cut Cross-Entropy's 1.2 GB at its headline shape on an
    H200)."""
    if not ops.needs_grad(h, linear_weight, linear_bias) or (
            class_sum is not None and class_sum.requires_grad):
        return stream(h, linear_weight, linear_bias, chunk_bytes, targets, class_sum, softcap)
    out = softmax_stats(h, linear_weight, linear_bias, targets, class_sum, chunk_bytes, softcap)
    return out if class_sum is not None else out[:2]


def loss_from_stats(lse: Tensor, true: Tensor, total: Optional[Tensor], num_true: int,
                    row_weight: Optional[Tensor], eps: float, class_sum: Optional[Tensor]
                    ) -> Tensor:
    """Each row's cross entropy [N] from the streamed figures: lse - true / T, times the
    row's class weight, and with smoothing eps, (1 - eps) * that + eps / V * sum_c a(c)
    (lse - logit_c) = eps * (sum_c a(c) * lse - total) / V, a = class_sum [V] (F.cross_entropy's
    smoothing)."""
    loss = lse - true / num_true
    if row_weight is not None:
        loss = loss * row_weight
    if eps:
        loss = (1.0 - eps) * loss + eps * (class_sum.sum() * lse - total) / class_sum.numel()
    return loss


def finish_full(loss: Tensor, lse: Optional[Tensor], z_loss: float,
                row_weight: Optional[Tensor], t2: Tensor, lead, reduction: str,
                ignore_index: int, dtype, normalizer: Optional[Normalizer]) -> Tensor:
    """The end every exact softmax loss shares: z_loss * lse² added to each row (weighted as
    the row), the ignored rows zeroed, the reduction."""
    if z_loss:
        z_term = z_loss * lse.to(loss.dtype).square()
        loss = loss + (z_term if row_weight is None else z_term * row_weight)
    loss = torch.where(t2[:, 0] != ignore_index, loss, torch.zeros_like(loss))
    return finish(loss, t2, lead, reduction, ignore_index, dtype, row_weight, normalizer)


def loss_dtype(input: Tensor) -> torch.dtype:
    """The dtype of an exact softmax loss: float32 for float16 and bfloat16 input (the loss is
    summed in float32; rounding it to 16 bits would lose what Cut Cross-Entropy and Liger
    keep), else the input's."""
    return torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype


def _class_sum(weight: Optional[Tensor], V: int, acc, device) -> Tensor:
    """a [V] of F.cross_entropy's smoothing term eps / V * sum_c a(c) * (lse - logit_c)."""
    return torch.ones(V, dtype=acc, device=device) if weight is None else weight.to(acc)


def _cross_entropy(logits, target, weight, eps, reduction, ignore_index=-100):
    """F.cross_entropy of logits that fit one block: the same log-sum-exp as the streamed
    path, fused with its gradient (about 1.5x faster than logsumexp + gather on CPU)."""
    return torch.nn.functional.cross_entropy(
        logits, target, weight=None if weight is None else weight.to(logits.dtype),
        ignore_index=ignore_index, label_smoothing=eps, reduction=reduction)


def _full_rows(h, linear_weight, linear_bias, safe, weight, row_weight, eps, chunk_bytes,
               softcap, want_lse, use_fused):
    """(per-row loss [N] before z_loss, lse [N] or None) by the cheapest exact path: the fused
    kernels when `use_fused` (losses/fused.py resolve()), else streamed blocks."""
    V, acc = linear_weight.shape[0], acc_dtype(h)
    if use_fused and h.shape[0]:
        class_sum = _class_sum(weight, V, acc, h.device) if eps else None
        lse, true, total = ops.fused_softmax.fused_softmax_stats(
            h, linear_weight, linear_bias, safe, class_sum, softcap)
        return loss_from_stats(lse, true, total, safe.shape[1], row_weight, eps,
                               class_sum), lse
    if safe.shape[1] == 1 and one_block(h.shape[0], V, chunk_bytes):
        logits = all_logits(h, linear_weight, linear_bias, softcap)
        loss = _cross_entropy(logits, safe[:, 0], weight, eps, "none")
        return loss, torch.logsumexp(logits, 1) if want_lse else None
    check_full(h, linear_weight, linear_bias)
    if not want_lse and softcap is None and _lce_eval_applies(
            h, linear_weight, linear_bias, safe.shape[1], weight, eps):
        rows = max(1, chunk_bytes // (4 * max(V, 1)))  # the same logits budget, in rows
        loss = torch.nn.functional.linear_cross_entropy(
            h, linear_weight, safe[:, 0], linear_bias=linear_bias, reduction="none",
            options=torch.nn.LinearCrossEntropyOptions(batch_chunk_size=rows))
        return loss.to(acc), None
    class_sum = _class_sum(weight, V, acc, h.device) if eps else None
    lse, true, *total = _stream_lean(h, linear_weight, linear_bias, chunk_bytes, safe,
                                     class_sum, softcap)
    return loss_from_stats(lse, true, total[0] if total else None, safe.shape[1], row_weight,
                           eps, class_sum), lse


def streaming_logsumexp(input: Tensor, linear_weight: Tensor, *,
                        linear_bias: Optional[Tensor] = None,
                        chunk_bytes: int = CHUNK_BYTES,
                        softcap: Optional[float] = None) -> Tensor:
    """log sum_c exp(input.linear_weight[c] + linear_bias[c]) per row, shape [*], in float32
    (float64 for float64 input). The [N, V] logits are never held at once: each block of
    about `chunk_bytes` is reduced by logsumexp and folded into the running value with
    logaddexp, which is exact (no overflow: each block subtracts its own max).
    Differentiable; in backward autograd keeps the blocks it needs. `softcap` caps the logits
    first, as in full_softmax_loss."""
    h = check_full(input, linear_weight, linear_bias)
    none = torch.empty(h.shape[0], 0, dtype=torch.int64, device=h.device)
    lse, _ = _stream_lean(h, linear_weight, linear_bias, chunk_bytes, none,
                          softcap=check_softcap(softcap))
    return lse.reshape(input.shape[:-1])


def full_log_softmax(input: Tensor, linear_weight: Tensor, *,
                     linear_bias: Optional[Tensor] = None,
                     chunk_bytes: int = CHUNK_BYTES,
                     softcap: Optional[float] = None) -> Tensor:
    """Exact log-probabilities [*, V] of every class (the output itself is [N, V]; only the
    intermediate logits are bounded by chunk_bytes), of the logits capped by `softcap`."""
    h = check_full(input, linear_weight, linear_bias)
    lse = streaming_logsumexp(h, linear_weight, linear_bias=linear_bias,
                              chunk_bytes=chunk_bytes, softcap=softcap)
    V = linear_weight.shape[0]
    out = torch.empty(h.shape[0], V, dtype=lse.dtype, device=h.device)
    for rows, c0, logits in logit_blocks(h, linear_weight, linear_bias, chunk_bytes, softcap):
        out[rows, c0:c0 + logits.shape[1]] = logits - lse[rows, None]
    return out.reshape(*input.shape[:-1], V)


def full_argmax(input: Tensor, linear_weight: Tensor, *,
                linear_bias: Optional[Tensor] = None,
                chunk_bytes: int = CHUNK_BYTES) -> Tensor:
    """The most likely class [*] (int64) of the exact softmax, streamed as the log-sum-exp."""
    h = check_full(input, linear_weight, linear_bias)
    best = torch.full((h.shape[0],), -math.inf, dtype=acc_dtype(h), device=h.device)
    arg = torch.zeros(h.shape[0], dtype=torch.int64, device=h.device)
    for rows, c0, logits in logit_blocks(h, linear_weight, linear_bias, chunk_bytes):
        value, index = logits.max(1)
        better = value > best[rows]
        best[rows] = torch.where(better, value, best[rows])
        arg[rows] = torch.where(better, index + c0, arg[rows])
    return arg.reshape(input.shape[:-1])


def full_softmax_loss(
    input: Tensor, linear_weight: Tensor, target: Tensor, *,
    linear_bias: Optional[Tensor] = None,
    weight: Optional[Tensor] = None,
    label_smoothing: float = 0.0,
    num_true: Optional[int] = None,
    reduction: str = "mean", ignore_index: int = -100,
    chunk_bytes: int = CHUNK_BYTES,
    z_loss: float = 0.0,
    softcap: Optional[float] = None,
    return_lse: bool = False,
    normalizer: Optional[Normalizer] = None,
    fused: Optional[bool] = None,
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
    whole batch's 'mean' loss (gradient accumulation).

    `fused` picks the path: None (default) the streamed blocks, the path measured on a GPU
    (losses/fused.py states when the default will take the kernels); True the fused Triton
    kernels (no logits in memory, forward or backward) or a ValueError saying why they
    cannot run; False the streamed blocks. Both give the same loss to rounding. The loss is
    float32 for float16 and bfloat16 input (the input's dtype otherwise); the gradients are
    in the input's dtype."""
    lead, t2, h, weight = loss_rows(input, linear_weight, target, reduction, num_true, weight,
                                    normalizer)
    z_loss, softcap = check_z_loss(z_loss), check_softcap(softcap)
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse must be a bool, got {type(return_lse).__name__}")
    eps = check_label_smoothing(label_smoothing)
    ignored = t2 == ignore_index
    safe = check_target_range(torch.where(ignored, torch.zeros_like(t2), t2),
                              linear_weight.shape[0])
    use_fused = _fused.resolve(fused, h, linear_weight, linear_bias, weight, targets=safe)
    if (t2.shape[1] == 1 and not z_loss and not return_lse and normalizer is None
            and not use_fused and one_block(h.shape[0], linear_weight.shape[0], chunk_bytes)
            and not torch.is_autocast_enabled(h.device.type)):
        # Few logits and nothing to add: F.cross_entropy does the weighting, ignored rows and
        # reduction in one node, forward and backward. The rest of this function's steps
        # cost twice plain PyTorch's whole loss at small sizes (MemN2N's 32 x 175).
        # The checked ids go in (a deferred check passes safe ones on), ignored rows kept.
        first = torch.where(ignored[:, 0], t2[:, 0], safe[:, 0])
        loss = _cross_entropy(all_logits(h, linear_weight, linear_bias, softcap), first,
                              weight, eps, reduction, ignore_index)
        return loss.reshape(lead) if reduction == "none" else loss
    row_weight = None if weight is None else weight.to(acc_dtype(h))[safe[:, 0]]
    loss, lse = _full_rows(h, linear_weight, linear_bias, safe, weight, row_weight, eps,
                           chunk_bytes, softcap, want_lse=bool(z_loss) or return_lse,
                           use_fused=use_fused)
    out = finish_full(loss, lse, z_loss, row_weight, t2, lead, reduction, ignore_index,
                      loss_dtype(input), normalizer)
    return (out, lse.reshape(lead)) if return_lse else out


class LinearLayer(OutputLayer):
    """A layer whose output embedding is the nn.Linear `linear` (weight [V, D], bias [V] or
    None), as torch.nn.LinearCrossEntropyLoss's, with the exact full-softmax paths.
    `chunk_bytes` bounds the logits held at once."""

    chunk_bytes = CHUNK_BYTES
    z_loss, softcap = 0.0, None  # full-softmax options; FullSoftmaxLoss takes them
    fused = None  # the exact paths' kernels (full_softmax_loss's `fused`)

    def __init__(self, in_features: int, num_classes: int, *, out_features=(),
                 bias: bool = False, device=None, dtype=None, reduction: str = "mean",
                 weight: Optional[Tensor] = None, ignore_index: Optional[int] = None,
                 label_smoothing: float = 0.0, options=None,
                 linear_weight: Optional[nn.Parameter] = None):
        """torch.nn.LinearCrossEntropyLoss's arguments and `linear_weight` (for tying); the
        layer's class docstring documents each."""
        super().__init__(in_features, num_classes, out_features=out_features, options=options,
                         reduction=reduction, ignore_index=ignore_index,
                         label_smoothing=label_smoothing)
        V, D = self.num_classes, self.in_features
        # An empty shell on the meta device: its parameters are set below (a tied one kept).
        self.linear = nn.Linear(D, V, bias=bias, device="meta", dtype=dtype)
        if linear_weight is None:
            linear_weight = nn.Parameter(torch.empty(V, D, device=device, dtype=dtype))
            nn.init.normal_(linear_weight, std=1.0 / math.sqrt(D))
        elif not isinstance(linear_weight, nn.Parameter):
            raise TypeError("linear_weight must be an nn.Parameter (to tie, pass "
                            "embedding.weight)")
        elif tuple(linear_weight.shape) != (V, D):
            raise ValueError(f"linear_weight must have shape ({V}, {D}), "
                             f"got {tuple(linear_weight.shape)}")
        self.linear.weight = linear_weight
        if bias:
            self.linear.bias = nn.Parameter(torch.zeros(V, dtype=linear_weight.dtype,
                                                        device=linear_weight.device))
        self._register_class_weight(weight, linear_weight)

    @property
    def linear_weight(self) -> nn.Parameter:
        """The output embedding [V, D]: `linear.weight`."""
        return self.linear.weight

    @property
    def linear_bias(self) -> Optional[nn.Parameter]:
        """The bias [V] (`linear.bias`), or None."""
        return self.linear.bias

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        migrate_state_dict(state_dict, prefix)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def log_prob(self, input: Tensor) -> Tensor:
        """Exact log-probabilities [*, V] of every class."""
        return full_log_softmax(input, self.linear_weight, linear_bias=self.linear_bias,
                                chunk_bytes=self.chunk_bytes, softcap=self.softcap)

    def predict(self, input: Tensor) -> Tensor:
        """argmax class ids [*] of the exact softmax."""
        return full_argmax(input, self.linear_weight, linear_bias=self.linear_bias,
                           chunk_bytes=self.chunk_bytes)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        """Exact full-softmax cross entropy (label mass 1/T on each of T true classes), with
        this layer's weight, label_smoothing, ignore_index and reduction (or the one given):
        F.cross_entropy of the full logits."""
        return full_softmax_loss(
            input, self.linear_weight, target, linear_bias=self.linear_bias,
            weight=self.weight, label_smoothing=self.label_smoothing,
            ignore_index=self.ignore_index,
            reduction=self.reduction if reduction is None else reduction,
            chunk_bytes=self.chunk_bytes, z_loss=self.z_loss, softcap=self.softcap,
            fused=self.fused)


# A decorator for every layer built on LinearLayer: its signature names LinearLayer's keywords
# (torch.nn.LinearCrossEntropyLoss's) and help(Layer.__init__) shows the class docstring.
with_layer_keywords = keywords_after_positionals(LinearLayer)


@with_layer_keywords
class FullSoftmaxLoss(LinearLayer):
    __doc__ = """The exact softmax cross entropy in training and in eval (the baseline of the
    family), with the logits streamed in blocks of `chunk_bytes`. In training autograd keeps the
    blocks for backward; in eval (no grad) memory stays bounded for any V. It equals
    torch.nn.LinearCrossEntropyLoss (same arguments, same state dict) and
    F.linear_cross_entropy(input, linear.weight, target, linear_bias=, weight=,
    label_smoothing=, reduction=, ignore_index=).

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        label_smoothing: as F.cross_entropy: the target puts 1 - eps on the true class and
            spreads eps uniformly over all V classes (default 0.0).
        z_loss: PaLM's z-loss, z_loss * lse² per row (default 0.0; see full_softmax_loss).
        softcap: Gemma 2's cap, logits -> softcap * tanh(logits / softcap).
        fused: None (default) or False the streamed blocks, True the fused Triton kernels
            or an error (full_softmax_loss); the loss is float32 for float16 and bfloat16
            input.""" + COMMON_ARGS

    def __init__(self, in_features: int, num_classes: int, *, z_loss=0.0, softcap=None,
                 fused=None, **layer):
        super().__init__(in_features, num_classes, **layer)
        self.z_loss, self.softcap = check_z_loss(z_loss), check_softcap(softcap)
        self.fused = _fused.check_fused(fused)

    def training_loss(self, input: Tensor, target: Tensor,
                      generator: Optional[torch.Generator] = None) -> Tensor:
        return self.full_loss(input, target)  # draws nothing: generator is not needed


__all__ = ["CHUNK_BYTES", "FullSoftmaxLoss", "full_argmax", "full_log_softmax",
           "full_softmax_loss", "streaming_logsumexp"]
