"""One family of output layers: sampled loss in training, exact full softmax in eval.

FullSoftmaxLoss, SampledSoftmaxLoss, NCELoss, NegativeSamplingLoss and HierarchicalSoftmaxLoss
share one interface (OutputLayer) and a registry (`make_head(name, ...)`, `register_head`) from
which every model takes its head by name. Each of the first four is a drop-in for
torch.nn.LinearCrossEntropyLoss: the same positional arguments and keyword defaults (bias=False,
ignore_index=None), the output embedding held as the nn.Linear `linear` (`linear.weight` [V, D],
`linear.bias` [V]; also readable as `linear_weight`/`linear_bias`), or a given Parameter (tying
with an input embedding), and state dicts that load both ways; `weight` [V] is a per-class
rescaling. Older state dicts (keys 'linear_weight'/'linear_bias', or before 0.1 'weight' [V, D]
and 'bias') migrate on load.

In training mode `forward(input, target, *, generator=None)` returns the sampled loss (drawn
with `generator` when given); in eval mode the exact full-softmax cross entropy with the same
reduction, `weight` and `label_smoothing` as F.cross_entropy: exp(eval loss) is a perplexity. The full-softmax paths (`eval` loss, `log_prob`,
`predict`) are the streaming functionals of fastsoftmax.functional (streaming_logsumexp): no
block of logits larger than `chunk_bytes` exists at once, also for V in the millions.

The default sampler of SampledSoftmaxLoss and NCELoss is log-uniform, which assumes class ids
sorted by falling frequency (id 0 the most frequent). In training the layer checks its first
targets against that assumption and warns once when they contradict it
(fastsoftmax.sampler_fit); give `counts=` (a unigram sampler) or `sampler='uniform'` for a
vocabulary in any other order.
"""

import math
from typing import Optional, Union

import torch
from torch import Tensor, nn

from . import functional
from ._layer_parts import (COMMON_ARGS, SAMPLER_ARGS, OutputLayer, SamplerTables,
                           _refuse_label_smoothing, constructor_keywords,
                           keywords_after_positionals, make_sampler, migrate_state_dict)
from ._reduction import check_softcap, check_z_loss
from ._shapes import check_size
from .hierarchical import HierarchicalSoftmaxLoss
from .samplers import Sampler


class _LinearLayer(OutputLayer):
    """A layer whose output embedding is the nn.Linear `linear` (weight [V, D], bias [V] or
    None), as torch.nn.LinearCrossEntropyLoss's, with the exact full-softmax paths.
    `chunk_bytes` bounds the logits held at once."""

    chunk_bytes = functional.CHUNK_BYTES
    z_loss, softcap = 0.0, None  # full-softmax options; FullSoftmaxLoss takes them

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
        return functional.full_log_softmax(input, self.linear_weight,
                                           linear_bias=self.linear_bias,
                                           chunk_bytes=self.chunk_bytes, softcap=self.softcap)

    def predict(self, input: Tensor) -> Tensor:
        """argmax class ids [*] of the exact softmax."""
        return functional.full_argmax(input, self.linear_weight, linear_bias=self.linear_bias,
                                      chunk_bytes=self.chunk_bytes)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        """Exact full-softmax cross entropy (label mass 1/T on each of T true classes), with
        this layer's weight, label_smoothing, ignore_index and reduction (or the one given):
        F.cross_entropy of the full logits."""
        return functional.full_softmax_loss(
            input, self.linear_weight, target, linear_bias=self.linear_bias,
            weight=self.weight, label_smoothing=self.label_smoothing,
            ignore_index=self.ignore_index,
            reduction=self.reduction if reduction is None else reduction,
            chunk_bytes=self.chunk_bytes, z_loss=self.z_loss, softcap=self.softcap)


_with_layer_keywords = keywords_after_positionals(_LinearLayer)


@_with_layer_keywords
class FullSoftmaxLoss(_LinearLayer):
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
        softcap: Gemma 2's cap, logits -> softcap * tanh(logits / softcap).""" + COMMON_ARGS

    def __init__(self, in_features: int, num_classes: int, *, z_loss=0.0, softcap=None, **layer):
        super().__init__(in_features, num_classes, **layer)
        self.z_loss, self.softcap = check_z_loss(z_loss), check_softcap(softcap)

    def training_loss(self, input: Tensor, target: Tensor,
                      generator: Optional[torch.Generator] = None) -> Tensor:
        return self.full_loss(input, target)  # draws nothing: generator is not needed


class _SampledLayer(_LinearLayer):
    """A layer that trains on a sampled objective drawn from `self.sampler`, whose tables are
    the buffers of the submodule `sampler_tables` (saved and moved with the layer)."""

    distinct_samples = True  # its candidates are distinct classes (negative sampling: not)

    def __init__(self, in_features, num_classes, num_samples, *, sampler, counts, vocab, power,
                 sparse, default_sampler, **layer):
        super().__init__(in_features, num_classes, **layer)
        self.num_samples = check_size(self.num_samples_arg, num_samples)
        if self.distinct_samples and self.num_samples >= self.num_classes:
            raise ValueError(
                f"{self.num_samples_arg} ({self.num_samples}) must be smaller than num_classes "
                f"({self.num_classes}): the candidates are distinct classes, so this many "
                f"would be all of them; use FullSoftmaxLoss, the exact softmax, instead")
        setattr(self, self.num_samples_arg, self.num_samples)
        self.sparse = bool(sparse)
        sampler = make_sampler(sampler, counts, power, self.num_classes, default_sampler,
                               vocab=vocab, device=self.linear_weight.device)
        self.sampler_tables = SamplerTables(sampler.to(self.linear_weight.device))

    @property
    def sampler(self) -> Sampler:
        """The Sampler the layer draws from (its tables: the buffers of `sampler_tables`)."""
        return self.sampler_tables.sampler

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, sparse={self.sparse}"


class SampledSoftmaxLoss(_SampledLayer):
    __doc__ = """Sampled softmax output layer (tf.nn.sampled_softmax_loss) over `num_classes`
    classes, `num_sampled` candidates per step shared by the batch (default sampler: log-uniform, or
    unigram^power when `counts` are given). In eval: the exact full softmax.

    Log-uniform assumes ids sorted by falling frequency; the layer warns once in training
    when its targets contradict that (see fastsoftmax.sampler_fit). Give `counts=` or
    sampler='uniform' for a vocabulary in any other order.

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        num_sampled: S, the candidates drawn per step (distinct, shared by the batch).
        remove_accidental_hits: leave a sampled class that equals a row's true class out of
            that row (default True; every such position, see sampled_softmax_loss).
        label_smoothing: eps (default 0.0). Eval: exactly F.cross_entropy's. Training: the
            row's target puts 1 - eps on its true class and spreads eps uniformly over its
            candidates (the true class and the sampled classes it keeps), with the
            logQ-corrected logits; `weight` weighs each candidate's term as F.cross_entropy
            weighs each class's. See fastsoftmax._smoothing.""" + SAMPLER_ARGS.format(
        default="log-uniform") + COMMON_ARGS

    num_samples_arg = "num_sampled"

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, vocab=None,
                 power: float = 0.75, remove_accidental_hits: bool = True, sparse: bool = False,
                 **layer):
        super().__init__(in_features, num_classes, num_sampled, sampler=sampler, counts=counts,
                         vocab=vocab, power=power, sparse=sparse, default_sampler="log_uniform",
                         **layer)
        self.remove_accidental_hits = remove_accidental_hits

    def training_loss(self, input, target, generator=None):
        return functional.sampled_softmax_loss(
            input, self.linear_weight, target, linear_bias=self.linear_bias,
            weight=self.weight, label_smoothing=self.label_smoothing,
            num_sampled=self.num_sampled, sampler=self.sampler, num_true=None,
            remove_accidental_hits=self.remove_accidental_hits, reduction=self.reduction,
            ignore_index=self.ignore_index, generator=generator, sparse=self.sparse)


class NCELoss(_SampledLayer):
    __doc__ = """Noise-contrastive estimation output layer (tf.nn.nce_loss). Logits are shifted by
    -log_z (self-normalised when 0); with `learn_log_z` it is a Parameter. In eval: the exact
    full softmax.

    With a bias, it starts at -log(num_classes), so that exp(logits) sums to about 1 from the
    first step. With a zero bias every class starts num_classes times too likely and NCE spends
    its first thousands of steps pushing all scores down (a 2x200 LSTM on PTB, 400 SGD steps:
    validation perplexity 132,836 from a zero bias, 558 from -log V).

    In training `weight` scales each row's whole NCE loss (true and noise terms: the row is
    one example of its class) by the weight of its true class.

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        num_sampled: S, the noise samples per step (distinct, shared by the batch).
        log_z: the log-normaliser subtracted from every logit (default 0.0).
        learn_log_z: make log_z a learned Parameter (default False: a buffer).
        label_smoothing: only 0.0; any other value is refused (NCE is no cross entropy).
        """ + SAMPLER_ARGS.format(default="log-uniform") + \
        COMMON_ARGS

    num_samples_arg = "num_sampled"

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, vocab=None,
                 power: float = 0.75, log_z: float = 0.0, learn_log_z: bool = False,
                 sparse: bool = False, **layer):
        _refuse_label_smoothing("NCELoss", layer.get("label_smoothing", 0.0))
        super().__init__(in_features, num_classes, num_sampled, sampler=sampler, counts=counts,
                         vocab=vocab, power=power, sparse=sparse, default_sampler="log_uniform",
                         **layer)
        if self.linear_bias is not None:
            nn.init.constant_(self.linear_bias, -math.log(self.num_classes))
        like = self.linear_weight
        value = torch.tensor(float(log_z), device=like.device,
                             dtype=torch.float64 if like.dtype == torch.float64 else torch.float32)
        if learn_log_z:
            self.log_z = nn.Parameter(value)
        else:
            self.register_buffer("log_z", value)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # torch.nn.LinearCrossEntropyLoss has no log_z: its state dict keeps the layer's own.
        state_dict.setdefault(prefix + "log_z", self.log_z.detach())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def training_loss(self, input, target, generator=None):
        # Eval needs no override: NCE's normalised model is the softmax of the unshifted
        # logits (log_z cancels), which is what full_loss computes.
        return functional.nce_loss(
            input, self.linear_weight, target, linear_bias=self.linear_bias, weight=self.weight,
            num_sampled=self.num_sampled, sampler=self.sampler, num_true=None,
            log_z=self.log_z, reduction=self.reduction, ignore_index=self.ignore_index,
            generator=generator, sparse=self.sparse)


class NegativeSamplingLoss(_SampledLayer):
    __doc__ = """word2vec's negative-sampling output layer: `num_negatives` negatives per row (or
    shared by the batch when `shared`), no bias. Default sampler: unigram^power when `counts`
    are given, else uniform. In eval: the exact full softmax of linear.weight. There is no
    bias (word2vec has none). In training `weight` scales each row's whole loss by the weight
    of its true class.

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        num_negatives: K, the negatives drawn per row (with replacement).
        shared: draw one set of K negatives for the whole batch (default False: per row).
        label_smoothing: only 0.0; any other value is refused (a sum of logistic losses has
            no smoothed target).""" + SAMPLER_ARGS.format(default="uniform") + \
        COMMON_ARGS.replace("bias: learn a bias `linear.bias` [V] (default False, as torch's "
                            "module).", "bias: only False (word2vec's objective has no bias).")

    num_samples_arg, has_bias = "num_negatives", False
    distinct_samples = False  # negatives are drawn with replacement: K may exceed V

    def __init__(self, in_features: int, num_classes: int, num_negatives: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, vocab=None,
                 power: float = 0.75, shared: bool = False, sparse: bool = False, **layer):
        _refuse_label_smoothing("NegativeSamplingLoss", layer.get("label_smoothing", 0.0))
        if layer.get("bias"):
            raise ValueError("NegativeSamplingLoss has no bias: word2vec's objective, "
                             "-log s(w_t.h) - sum_k log s(-w_k.h), has none (bias must be False)")
        super().__init__(in_features, num_classes, num_negatives, sampler=sampler, counts=counts,
                         vocab=vocab, power=power, sparse=sparse, default_sampler="uniform",
                         **layer)
        self.shared = bool(shared)

    def training_loss(self, input, target, generator=None):
        rows = input.numel() // self.in_features
        shape = (self.num_negatives,) if self.shared else (rows, self.num_negatives)
        negatives = self.sampler.sample(*shape, generator=generator)
        if not self.shared:
            negatives = negatives.reshape(*input.shape[:-1], self.num_negatives)
        return functional.negative_sampling_loss(
            input, self.linear_weight, target, weight=self.weight, negatives=negatives,
            reduction=self.reduction, ignore_index=self.ignore_index, sparse=self.sparse)


# The registry: every model takes its output layer from here, by name.
HEADS = {
    "full": FullSoftmaxLoss,
    "sampled": SampledSoftmaxLoss,
    "nce": NCELoss,
    "neg": NegativeSamplingLoss,
    "hs": HierarchicalSoftmaxLoss,  # in fastsoftmax.hierarchical: its weight is [V - 1, D]
}

# Options a model may pass to whichever head it builds, with the value that asks nothing of
# a head: a head that does not take one gets it only at that value (dropped); any other value
# is refused, since the head would silently not do what was asked.
_SHARED_OPTIONS = {"sampler": None, "counts": None, "vocab": None, "power": 0.75,
                   "bias": False, "sparse": False, "tree": None}


def register_head(name: str, cls: type) -> None:
    """Make `cls` (an OutputLayer subclass built as cls(in_features, num_classes, ...)) the
    head called `name` for make_head and every model. A class attribute `num_samples_arg`
    names its sample-count argument (None when it draws no samples)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a head name must be a non-empty string, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, OutputLayer)):
        raise TypeError(f"a head must be an OutputLayer subclass, got {cls!r}")
    HEADS[name] = cls


def _unset(value, default) -> bool:
    if default is None:
        return value is None
    return isinstance(value, (bool, int, float)) and value == default


def make_head(name: str, in_features: int, num_classes: int, *,
              num_samples: Optional[int] = None, **options) -> OutputLayer:
    """The registered head `name` ('full', 'sampled', 'nce', 'neg', 'hs', ...) over
    `num_classes` classes. `num_samples` is its sample count (num_sampled / num_negatives;
    ignored by heads that draw none). sampler, counts, vocab, power, bias, sparse and tree go
    to the heads that take them; a head that does not take one accepts it only unset (None,
    power 0.75, bias and sparse False), and refuses any other value with a ValueError. Any
    other option (linear_weight, weight, label_smoothing, reduction, ignore_index, device,
    dtype, ...) must be one the head takes, or None."""
    if name not in HEADS:
        raise ValueError(f"output must be one of {tuple(HEADS)}, got {name!r}")
    cls = HEADS[name]
    accepted = constructor_keywords(cls)
    kwargs = {}
    for key, value in options.items():
        if key in accepted or (key not in _SHARED_OPTIONS and value is not None):
            kwargs[key] = value  # the constructor refuses an option it does not take
        elif key in _SHARED_OPTIONS and not _unset(value, _SHARED_OPTIONS[key]):
            given = f"{key}={value!r}" if isinstance(value, (bool, int, float, str)) else key
            raise ValueError(f"{given} was given, but output {name!r} ({cls.__name__}) does "
                             f"not take {key}: it would be ignored")
    arg = getattr(cls, "num_samples_arg", None)
    if arg is not None:
        if num_samples is None:
            raise ValueError(f"output {name!r} needs a sample count ({arg})")
        num_samples = check_size(arg, num_samples)
        if num_samples >= num_classes:
            raise ValueError(
                f"{arg} ({num_samples}) must be smaller than the number of classes "
                f"({num_classes}); use output 'full' for so few classes"
            )
        kwargs[arg] = num_samples
    return cls(in_features, num_classes, **kwargs)


# help(Layer.__init__) shows the parameters too, not nn.Module's constructor text.
for _layer in (SampledSoftmaxLoss, NCELoss, NegativeSamplingLoss):
    _with_layer_keywords(_layer).__init__.__doc__ = _layer.__doc__
HierarchicalSoftmaxLoss.__init__.__doc__ = HierarchicalSoftmaxLoss.__doc__

# The two-tower retrieval loss lives in retrieval.py.
from .retrieval import InBatchSoftmaxLoss  # noqa: E402

__all__ = [
    "HEADS",
    "FullSoftmaxLoss",
    "HierarchicalSoftmaxLoss",
    "InBatchSoftmaxLoss",
    "NCELoss",
    "NegativeSamplingLoss",
    "OutputLayer",
    "SampledSoftmaxLoss",
    "make_head",
    "make_sampler",
    "migrate_state_dict",
    "register_head",
]
