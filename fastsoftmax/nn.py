"""One family of output layers: sampled loss in training, exact full softmax in eval.

FullSoftmaxLoss, SampledSoftmaxLoss, NCELoss and NegativeSamplingLoss share one interface
(OutputLayer) and a registry (`make_head(name, ...)`, `register_head`) from which every model
takes its head by name. Each module owns `weight` [V, D] (and `bias` [V]) or shares a given
weight Parameter (tying with an input embedding). In training mode `forward(input, target)` draws samples and returns
the sampled loss; in eval mode it returns the exact full-softmax cross entropy with the same
reduction, so exp(eval loss) is a true perplexity. The full-softmax paths (`eval` loss,
`log_prob`, `predict`) are the streaming functionals of fastsoftmax.functional
(streaming_logsumexp): no block of logits larger than `chunk_bytes` exists at once, also for
V in the millions.
"""

import inspect
import math
from typing import Optional, Union

import torch
from torch import Tensor, nn

from . import functional
from ._shapes import check_reduction
from .sampler_fit import check_log_uniform_fit
from .samplers import LogUniformSampler, Sampler, UniformSampler, UnigramSampler

_SAMPLERS = ("unigram", "log_uniform", "uniform")


def make_sampler(sampler, counts, power: float, num_classes: int, default: str) -> Sampler:
    """A Sampler over num_classes: `sampler` itself, or the one named ('unigram' from counts
    to the power `power`, 'log_uniform', 'uniform'); None picks unigram when counts are given,
    else `default`."""
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


def _check_size(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


class OutputLayer(nn.Module):
    """The family's base: owns `weight` [V, D] and `bias` [V] (or None) and every exact
    full-softmax path. A subclass sets what training does (`training_loss`); in eval mode
    `forward` is always `full_loss`. `chunk_bytes` bounds the logits held at once."""

    chunk_bytes = functional.CHUNK_BYTES

    def __init__(self, in_features: int, num_classes: int, *, bias: bool,
                 weight: Optional[nn.Parameter], reduction: str, ignore_index: int):
        super().__init__()
        self.in_features = _check_size("in_features", in_features)
        self.num_classes = _check_size("num_classes", num_classes)
        check_reduction(reduction)
        self.reduction, self.ignore_index = reduction, ignore_index
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

    def log_prob(self, input: Tensor) -> Tensor:
        """Exact log-probabilities [*, V] of every class."""
        return functional.full_log_softmax(input, self.weight, self.bias,
                                           chunk_bytes=self.chunk_bytes)

    def predict(self, input: Tensor) -> Tensor:
        """argmax class ids [*] of the exact softmax."""
        return functional.full_argmax(input, self.weight, self.bias, chunk_bytes=self.chunk_bytes)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        """Exact full-softmax cross entropy (label mass 1/T on each of T true classes), with
        this layer's ignore_index and reduction (or the one given)."""
        return functional.full_softmax_loss(
            input, self.weight, target, self.bias, ignore_index=self.ignore_index,
            reduction=self.reduction if reduction is None else reduction,
            chunk_bytes=self.chunk_bytes)

    def training_loss(self, input: Tensor, target: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        if not self.training:
            return self.full_loss(input, target)
        check_log_uniform_fit(self, target)  # warns once if ids are not sorted by frequency
        return self.training_loss(input, target)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, num_classes={self.num_classes}, "
                f"bias={self.bias is not None}, reduction={self.reduction!r}")


class FullSoftmaxLoss(OutputLayer):
    """The exact softmax cross entropy in training and in eval (the baseline of the family),
    with the logits streamed in blocks of `chunk_bytes`. In training autograd keeps the
    blocks for backward; in eval (no grad) memory stays bounded for any V."""

    num_samples_arg = None

    def __init__(self, in_features: int, num_classes: int, *, bias: bool = True,
                 weight: Optional[nn.Parameter] = None, reduction: str = "mean",
                 ignore_index: int = -100):
        super().__init__(in_features, num_classes, bias=bias, weight=weight,
                         reduction=reduction, ignore_index=ignore_index)

    def training_loss(self, input: Tensor, target: Tensor) -> Tensor:
        return self.full_loss(input, target)


class _SampledLayer(OutputLayer):
    """A layer that trains on a sampled objective drawn from `self.sampler`."""

    def __init__(self, in_features, num_classes, num_samples, *, sampler, counts, power, sparse,
                 default_sampler, **layer):
        super().__init__(in_features, num_classes, **layer)
        _check_size(self.num_samples_arg, num_samples)
        self.sparse = bool(sparse)
        self.sampler = make_sampler(sampler, counts, power, num_classes, default_sampler)

    def _sampler_on(self, device: torch.device) -> Sampler:
        if self.sampler.device != device:
            self.sampler = self.sampler.to(device)
        return self.sampler

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, sampler={self.sampler!r}, sparse={self.sparse}"


class SampledSoftmaxLoss(_SampledLayer):
    """Sampled softmax output layer (tf.nn.sampled_softmax_loss) over `num_classes` classes,
    `num_sampled` candidates per step shared by the batch (default sampler: log-uniform, or
    unigram^power when `counts` are given)."""

    num_samples_arg = "num_sampled"

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, power: float = 0.75,
                 bias: bool = True, weight: Optional[nn.Parameter] = None,
                 remove_accidental_hits: bool = True, reduction: str = "mean",
                 ignore_index: int = -100, sparse: bool = False):
        super().__init__(in_features, num_classes, num_sampled, sampler=sampler, counts=counts,
                         power=power, sparse=sparse, default_sampler="log_uniform", bias=bias,
                         weight=weight, reduction=reduction, ignore_index=ignore_index)
        self.num_sampled = num_sampled
        self.remove_accidental_hits = remove_accidental_hits

    def training_loss(self, input, target):
        return functional.sampled_softmax_loss(
            input, self.weight, target, self.bias, num_sampled=self.num_sampled,
            sampler=self._sampler_on(input.device), num_true=None,
            remove_accidental_hits=self.remove_accidental_hits, reduction=self.reduction,
            ignore_index=self.ignore_index, sparse=self.sparse)


class NCELoss(_SampledLayer):
    """Noise-contrastive estimation output layer (tf.nn.nce_loss). Logits are shifted by
    -log_z (self-normalised when 0); with `learn_log_z` it is a Parameter.

    The bias starts at -log(num_classes), so that exp(logits) sums to about 1 from the first
    step. With a zero bias every class starts num_classes times too likely and NCE spends its
    first thousands of steps pushing all scores down (a 2x200 LSTM on PTB, 400 SGD steps:
    validation perplexity 132,836 from a zero bias, 558 from -log V)."""

    num_samples_arg = "num_sampled"

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, power: float = 0.75,
                 bias: bool = True, weight: Optional[nn.Parameter] = None, log_z: float = 0.0,
                 learn_log_z: bool = False, reduction: str = "mean", ignore_index: int = -100,
                 sparse: bool = False):
        super().__init__(in_features, num_classes, num_sampled, sampler=sampler, counts=counts,
                         power=power, sparse=sparse, default_sampler="log_uniform", bias=bias,
                         weight=weight, reduction=reduction, ignore_index=ignore_index)
        self.num_sampled = num_sampled
        if self.bias is not None:
            nn.init.constant_(self.bias, -math.log(num_classes))
        value = torch.tensor(float(log_z), dtype=torch.float32)
        if learn_log_z:
            self.log_z = nn.Parameter(value)
        else:
            self.register_buffer("log_z", value)

    def training_loss(self, input, target):
        # Eval needs no override: NCE's normalised model is the softmax of the unshifted
        # logits (log_z cancels), which is what full_loss computes.
        return functional.nce_loss(
            input, self.weight, target, self.bias, num_sampled=self.num_sampled,
            sampler=self._sampler_on(input.device), num_true=None, log_z=self.log_z,
            reduction=self.reduction, ignore_index=self.ignore_index, sparse=self.sparse)


class NegativeSamplingLoss(_SampledLayer):
    """word2vec's negative-sampling output layer: `num_negatives` negatives per row (or
    shared by the batch when `shared`), no bias. Default sampler: unigram^power when `counts`
    are given, else uniform."""

    num_samples_arg = "num_negatives"

    def __init__(self, in_features: int, num_classes: int, num_negatives: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, power: float = 0.75,
                 weight: Optional[nn.Parameter] = None, shared: bool = False,
                 reduction: str = "mean", ignore_index: int = -100, sparse: bool = False):
        super().__init__(in_features, num_classes, num_negatives, sampler=sampler, counts=counts,
                         power=power, sparse=sparse, default_sampler="uniform", bias=False,
                         weight=weight, reduction=reduction, ignore_index=ignore_index)
        self.num_negatives, self.shared = num_negatives, bool(shared)

    def training_loss(self, input, target):
        sampler = self._sampler_on(input.device)
        rows = input.numel() // self.in_features
        shape = (self.num_negatives,) if self.shared else (rows, self.num_negatives)
        negatives = sampler.sample(*shape)
        if not self.shared:
            negatives = negatives.reshape(*input.shape[:-1], self.num_negatives)
        return functional.negative_sampling_loss(
            input, self.weight, target, negatives=negatives, reduction=self.reduction,
            ignore_index=self.ignore_index, sparse=self.sparse)


# ---------------------------------------------------------------------------------------
# The registry: every model takes its output layer from here, by name.
# ---------------------------------------------------------------------------------------
HEADS = {
    "full": FullSoftmaxLoss,
    "sampled": SampledSoftmaxLoss,
    "nce": NCELoss,
    "neg": NegativeSamplingLoss,
}

# Options a model passes to whichever head it builds; a head whose constructor does not take
# one (the full softmax samples nothing, negative sampling has no bias) does not get it.
_SHARED_OPTIONS = ("sampler", "counts", "power", "bias", "sparse")


def register_head(name: str, cls: type) -> None:
    """Make `cls` (an OutputLayer subclass built as cls(in_features, num_classes, ...)) the
    head called `name` for make_head and every model. A class attribute `num_samples_arg`
    names its sample-count argument (None when it draws no samples)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a head name must be a non-empty string, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, OutputLayer)):
        raise TypeError(f"a head must be an OutputLayer subclass, got {cls!r}")
    HEADS[name] = cls


def make_head(name: str, in_features: int, num_classes: int, *,
              num_samples: Optional[int] = None, **options) -> OutputLayer:
    """The registered head `name` ('full', 'sampled', 'nce', 'neg', ...) over `num_classes`
    classes. `num_samples` is its sample count (num_sampled / num_negatives; ignored by heads
    that draw none). sampler, counts, power, bias and sparse go to the heads that take them;
    any other option must be one the head takes, or None."""
    if name not in HEADS:
        raise ValueError(f"output must be one of {tuple(HEADS)}, got {name!r}")
    cls = HEADS[name]
    accepted = inspect.signature(cls).parameters
    # An option the head does not take is dropped when it is a shared one or None (nothing is
    # asked of the head); any other goes through, so that the constructor refuses it.
    kwargs = {k: v for k, v in options.items()
              if k in accepted or (k not in _SHARED_OPTIONS and v is not None)}
    arg = getattr(cls, "num_samples_arg", None)
    if arg is not None:
        if num_samples is None:
            raise ValueError(f"output {name!r} needs a sample count ({arg})")
        if isinstance(num_samples, int) and num_samples >= num_classes:
            raise ValueError(
                f"{arg} ({num_samples}) must be smaller than the number of classes "
                f"({num_classes}); use output 'full' for so few classes"
            )
        kwargs[arg] = num_samples
    return cls(in_features, num_classes, **kwargs)


__all__ = [
    "HEADS",
    "FullSoftmaxLoss",
    "HierarchicalSoftmaxLoss",
    "NCELoss",
    "NegativeSamplingLoss",
    "OutputLayer",
    "SampledSoftmaxLoss",
    "make_head",
    "register_head",
]

# The hierarchical softmax lives in its own module (its weight is [V - 1, D], one row per inner
# node of the tree); here it joins the family as the 'hs' head. It is exactly normalised, so
# training and eval compute the same loss.
from . import hierarchical as _hierarchical  # noqa: E402


class HierarchicalSoftmaxLoss(_hierarchical.HierarchicalSoftmaxLoss, OutputLayer):
    __doc__ = _hierarchical.HierarchicalSoftmaxLoss.__doc__
    num_samples_arg = None

    def training_loss(self, input: Tensor, target: Tensor) -> Tensor:
        return self.full_loss(input, target)


register_head("hs", HierarchicalSoftmaxLoss)

__all__ += ["HierarchicalSoftmaxLoss"]

# The two-tower retrieval loss lives in retrieval.py.
from .retrieval import InBatchSoftmaxLoss  # noqa: E402

__all__ += ["InBatchSoftmaxLoss"]
