"""Drop-in output-layer modules: sampled loss in training, exact full softmax in eval.

Each module owns `weight` [V, D] (and `bias` [V]) or shares a given weight Parameter (tying
with an input embedding). In training mode `forward(input, target)` draws samples and returns
the sampled loss; in eval mode it returns the exact full-softmax cross entropy with the same
reduction, so exp(eval loss) is a true perplexity. The full-softmax paths (`eval` loss,
`log_prob`, `predict`) visit the classes in chunks so that no [N, V] float32 buffer larger
than `chunk_bytes` exists at once, also for V in the millions.
"""

import math
from typing import Optional, Union

import torch
from torch import Tensor, nn

from . import functional as F
from . import ops
from .samplers import LogUniformSampler, Sampler, UniformSampler, UnigramSampler

_SAMPLERS = ("unigram", "log_uniform", "uniform")


def _acc_dtype(x: Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _make_sampler(sampler, counts, power: float, num_classes: int, default: str) -> Sampler:
    if isinstance(sampler, Sampler):
        if sampler.num_classes != num_classes:
            raise ValueError(
                f"sampler draws from {sampler.num_classes} classes, the layer has {num_classes}"
            )
        return sampler
    name = sampler if sampler is not None else ("unigram" if counts is not None else default)
    if name not in _SAMPLERS:
        raise ValueError(f"sampler must be a Sampler or one of {_SAMPLERS}, got {sampler!r}")
    if name == "unigram":
        if counts is None:
            raise ValueError("sampler='unigram' needs counts (class frequencies)")
        counts = torch.as_tensor(counts)
        if counts.numel() != num_classes:
            raise ValueError(f"counts has {counts.numel()} entries for {num_classes} classes")
        return UnigramSampler(counts, power)
    if counts is not None:
        raise ValueError(f"counts is only used by sampler='unigram', not {name!r}")
    if name == "log_uniform":
        return LogUniformSampler(num_classes)
    return UniformSampler(num_classes)


class _OutputLayer(nn.Module):
    chunk_bytes = 256 * 2**20

    def __init__(self, in_features, num_classes, num_sampled, sampler, counts, power, bias,
                 weight, reduction, ignore_index, sparse, default_sampler, name):
        super().__init__()
        for arg, value in (("in_features", in_features), ("num_classes", num_classes),
                           (name, num_sampled)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{arg} must be a positive int, got {value!r}")
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.in_features, self.num_classes = in_features, num_classes
        self.reduction, self.ignore_index, self.sparse = reduction, ignore_index, bool(sparse)
        if weight is None:
            self.weight = nn.Parameter(torch.empty(num_classes, in_features))
            nn.init.normal_(self.weight, std=1.0 / math.sqrt(in_features))
        else:
            if not isinstance(weight, nn.Parameter):
                raise TypeError("weight must be an nn.Parameter (to tie, pass embedding.weight)")
            if tuple(weight.shape) != (num_classes, in_features):
                raise ValueError(
                    f"weight must have shape ({num_classes}, {in_features}), "
                    f"got {tuple(weight.shape)}"
                )
            self.weight = weight
        if bias:
            self.bias = nn.Parameter(torch.zeros(num_classes, dtype=self.weight.dtype,
                                                 device=self.weight.device))
        else:
            self.register_parameter("bias", None)
        self.sampler = _make_sampler(sampler, counts, power, num_classes, default_sampler)

    def _sampler_on(self, device: torch.device) -> Sampler:
        if self.sampler.device != device:
            self.sampler = self.sampler.to(device)
        return self.sampler

    # -- full softmax, chunked over V ---------------------------------------------------------
    def _chunk(self, rows: int) -> int:
        return max(1, min(self.num_classes, self.chunk_bytes // (4 * max(rows, 1))))

    def _logits(self, h: Tensor, start: int, stop: int) -> Tensor:
        # In float32, or float64 for float64 input (the accumulation dtype of the ops).
        b = None if self.bias is None else self.bias[start:stop]
        return torch.nn.functional.linear(h, self.weight[start:stop], b).to(_acc_dtype(h))

    def _logsumexp(self, h: Tensor) -> Tensor:
        lse = None
        step = self._chunk(h.shape[0])
        for start in range(0, self.num_classes, step):
            part = torch.logsumexp(self._logits(h, start, start + step), 1)
            lse = part if lse is None else torch.logaddexp(lse, part)
        return lse

    def log_prob(self, input: Tensor) -> Tensor:
        """Full log-probabilities [*, V] (float32; float64 for float64 input), computed in
        chunks of classes."""
        h = input.reshape(-1, self.in_features)
        lse = self._logsumexp(h)
        out = torch.empty(h.shape[0], self.num_classes, device=h.device, dtype=_acc_dtype(h))
        step = self._chunk(h.shape[0])
        for start in range(0, self.num_classes, step):
            out[:, start:start + step] = self._logits(h, start, start + step) - lse[:, None]
        return out.reshape(*input.shape[:-1], self.num_classes)

    def predict(self, input: Tensor) -> Tensor:
        """argmax class ids [*] of the full softmax, computed in chunks of classes."""
        h = input.reshape(-1, self.in_features)
        best = torch.full((h.shape[0],), -math.inf, device=h.device, dtype=_acc_dtype(h))
        arg = torch.zeros(h.shape[0], dtype=torch.int64, device=h.device)
        step = self._chunk(h.shape[0])
        for start in range(0, self.num_classes, step):
            value, index = self._logits(h, start, start + step).max(1)
            better = value > best
            best = torch.where(better, value, best)
            arg = torch.where(better, index + start, arg)
        return arg.reshape(input.shape[:-1])

    def full_loss(self, input: Tensor, target: Tensor) -> Tensor:
        """Exact full-softmax cross entropy (label mass 1/T on each of T true classes), with
        this layer's reduction and ignore_index."""
        F._check_common(input, self.weight, target, self.reduction)
        lead = tuple(input.shape[:-1])
        t2 = F._target_2d(target, lead, None)
        h = input.reshape(-1, self.in_features)
        keep = t2[:, 0] != self.ignore_index
        safe = torch.where(t2 == self.ignore_index, torch.zeros_like(t2), t2)
        in_range = ((safe >= 0) & (safe < self.num_classes)).all()
        message = f"target ids must lie in [0, {self.num_classes}) or equal ignore_index"
        if torch.compiler.is_compiling():
            torch._assert_async(in_range, message)
        elif not bool(in_range):
            raise ValueError(message)
        true = (h.unsqueeze(1) * self.weight[safe]).to(_acc_dtype(h)).sum(-1)
        if self.bias is not None:
            true = true + self.bias[safe].to(_acc_dtype(h))
        loss = self._logsumexp(h) - true.mean(1)
        loss = torch.where(keep, loss, torch.zeros_like(loss))
        return F._reduce(loss, t2, lead, self.reduction, self.ignore_index, input.dtype)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        if not self.training:
            return self.full_loss(input, target)
        return self._sampled_loss(input, target)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, num_classes={self.num_classes}, "
                f"bias={self.bias is not None}, sampler={self.sampler!r}, "
                f"reduction={self.reduction!r}, sparse={self.sparse}")


class SampledSoftmaxLoss(_OutputLayer):
    """Sampled softmax output layer (tf.nn.sampled_softmax_loss) over `num_classes` classes,
    `num_sampled` candidates per step shared by the batch (default sampler: log-uniform, or
    unigram^power when `counts` are given)."""

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, power: float = 0.75,
                 bias: bool = True, weight: Optional[nn.Parameter] = None,
                 remove_accidental_hits: bool = True, reduction: str = "mean",
                 ignore_index: int = -100, sparse: bool = False):
        super().__init__(in_features, num_classes, num_sampled, sampler, counts, power, bias,
                         weight, reduction, ignore_index, sparse, "log_uniform", "num_sampled")
        self.num_sampled = num_sampled
        self.remove_accidental_hits = remove_accidental_hits

    def _sampled_loss(self, input, target):
        return F._sampled_loss(
            ops.MODE_SOFTMAX, input, self.weight, target, self.bias, self.num_sampled,
            self._sampler_on(input.device), None, None, self.remove_accidental_hits, 0.0,
            self.reduction, self.ignore_index, None, self.sparse)


class NCELoss(_OutputLayer):
    """Noise-contrastive estimation output layer (tf.nn.nce_loss). Logits are shifted by
    -log_z (self-normalised when 0); with `learn_log_z` it is a Parameter.

    The bias starts at -log(num_classes), so that exp(logits) sums to about 1 from the first
    step. With a zero bias every class starts num_classes times too likely and NCE spends its
    first thousands of steps pushing all scores down (a 2x200 LSTM on PTB, 400 SGD steps:
    validation perplexity 132,836 from a zero bias, 558 from -log V)."""

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, power: float = 0.75,
                 bias: bool = True, weight: Optional[nn.Parameter] = None, log_z: float = 0.0,
                 learn_log_z: bool = False, reduction: str = "mean", ignore_index: int = -100,
                 sparse: bool = False):
        super().__init__(in_features, num_classes, num_sampled, sampler, counts, power, bias,
                         weight, reduction, ignore_index, sparse, "log_uniform", "num_sampled")
        self.num_sampled = num_sampled
        if self.bias is not None:
            nn.init.constant_(self.bias, -math.log(num_classes))
        value = torch.tensor(float(log_z), dtype=torch.float32)
        if learn_log_z:
            self.log_z = nn.Parameter(value)
        else:
            self.register_buffer("log_z", value)

    def _sampled_loss(self, input, target):
        return F._sampled_loss(
            ops.MODE_NCE, input, self.weight, target, self.bias, self.num_sampled,
            self._sampler_on(input.device), None, None, False, self.log_z, self.reduction,
            self.ignore_index, None, self.sparse)

    def full_loss(self, input, target):
        """Exact full-softmax cross entropy: NCE's normalised model is the softmax of the
        unshifted logits (log_z cancels)."""
        return super().full_loss(input, target)


class NegativeSamplingLoss(_OutputLayer):
    """word2vec's negative-sampling output layer: `num_negatives` negatives per row (or
    shared by the batch when `shared`), no bias. Default sampler: unigram^power when `counts`
    are given, else uniform."""

    def __init__(self, in_features: int, num_classes: int, num_negatives: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, power: float = 0.75,
                 weight: Optional[nn.Parameter] = None, shared: bool = False,
                 reduction: str = "mean", ignore_index: int = -100, sparse: bool = False):
        super().__init__(in_features, num_classes, num_negatives, sampler, counts, power, False,
                         weight, reduction, ignore_index, sparse, "uniform", "num_negatives")
        self.num_negatives, self.shared = num_negatives, bool(shared)

    def _sampled_loss(self, input, target):
        sampler = self._sampler_on(input.device)
        rows = input.numel() // self.in_features
        shape = (self.num_negatives,) if self.shared else (rows, self.num_negatives)
        negatives = sampler.sample(*shape)
        if not self.shared:
            negatives = negatives.reshape(*input.shape[:-1], self.num_negatives)
        return F._negative_sampling(input, self.weight, target, None, None, negatives,
                                    self.reduction, self.ignore_index, None, self.sparse)


__all__ = ["NCELoss", "NegativeSamplingLoss", "SampledSoftmaxLoss"]
