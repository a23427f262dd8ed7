"""One family of output layers: sampled loss in training, exact full softmax in eval.

FullSoftmaxLoss, SampledSoftmaxLoss, NCELoss, NegativeSamplingLoss and HierarchicalSoftmaxLoss
share one interface (OutputLayer) and a registry (`make_head(name, ...)`, `register_head`) from
which every model takes its head by name. The argument names follow
torch.nn.functional.linear_cross_entropy and nn.CrossEntropyLoss (renamed in 0.1): each module
owns the output embedding `linear_weight` [V, D] (and `linear_bias` [V]) or shares a given
Parameter (tying with an input embedding), and `weight` [V] is a per-class rescaling. Loading
a state dict saved before 0.1 (keys 'weight' [V, D] and 'bias') migrates it.

In training mode `forward(input, target, *, generator=None)` draws samples (from `generator`
when given) and returns the sampled loss; in eval mode it returns the exact full-softmax cross
entropy with the same reduction, `weight` and `label_smoothing` as F.cross_entropy, so
exp(eval loss) is a true perplexity. The full-softmax paths (`eval` loss, `log_prob`,
`predict`) are the streaming functionals of fastsoftmax.functional (streaming_logsumexp): no
block of logits larger than `chunk_bytes` exists at once, also for V in the millions.

The default sampler of SampledSoftmaxLoss and NCELoss is log-uniform, which assumes class ids
sorted by falling frequency (id 0 the most frequent). In training the layer checks its first
targets against that assumption and warns once when they contradict it
(fastsoftmax.sampler_fit); give `counts=` (a unigram sampler) or `sampler='uniform'` for a
vocabulary in any other order.
"""

import inspect
import math
from typing import Optional, Union

import torch
from torch import Tensor, nn

from . import functional
from ._layer_parts import (COMMON_ARGS, SAMPLER_ARGS, _refuse_label_smoothing,
                           make_sampler, migrate_state_dict)
from ._reduction import check_softcap, check_z_loss
from ._shapes import check_class_weight, check_label_smoothing, check_reduction, check_size
from .sampler_fit import check_log_uniform_fit
from .samplers import Sampler

class OutputLayer(nn.Module):
    """The family's base: owns `linear_weight` [V, D] and `linear_bias` [V] (or None), the
    per-class `weight` [V] (a buffer, or None) and every exact full-softmax path. A subclass
    sets what training does (`training_loss`); in eval mode `forward` is always `full_loss`.
    `chunk_bytes` bounds the logits held at once."""

    chunk_bytes = functional.CHUNK_BYTES
    z_loss, softcap = 0.0, None  # full-softmax options; FullSoftmaxLoss takes them

    def __init__(self, in_features: int, num_classes: int, *, bias: bool = True,
                 linear_weight: Optional[nn.Parameter] = None, weight: Optional[Tensor] = None,
                 label_smoothing: float = 0.0, reduction: str = "mean",
                 ignore_index: int = -100, device=None, dtype=None):
        super().__init__()
        self.in_features = check_size("in_features", in_features)
        self.num_classes = V = check_size("num_classes", num_classes)
        check_reduction(reduction)
        self.reduction, self.ignore_index = reduction, ignore_index
        self.label_smoothing = check_label_smoothing(label_smoothing)
        if linear_weight is None:
            self.linear_weight = nn.Parameter(
                torch.empty(V, self.in_features, device=device, dtype=dtype))
            nn.init.normal_(self.linear_weight, std=1.0 / math.sqrt(self.in_features))
        else:
            if not isinstance(linear_weight, nn.Parameter):
                raise TypeError("linear_weight must be an nn.Parameter (to tie, pass "
                                "embedding.weight)")
            if tuple(linear_weight.shape) != (V, self.in_features):
                raise ValueError(
                    f"linear_weight must have shape ({V}, {self.in_features}), "
                    f"got {tuple(linear_weight.shape)}"
                )
            self.linear_weight = linear_weight
        like = self.linear_weight
        if bias:
            self.linear_bias = nn.Parameter(torch.zeros(V, dtype=like.dtype, device=like.device))
        else:
            self.register_parameter("linear_bias", None)
        if weight is not None:
            if isinstance(weight, Tensor):
                weight = check_class_weight(weight, V, weight.device)
                weight = weight.detach().to(device=like.device, dtype=like.dtype)
            else:
                check_class_weight(weight, V, like.device)  # raises: not a tensor
        self.register_buffer("weight", weight)

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

    def training_loss(self, input: Tensor, target: Tensor,
                      generator: Optional[torch.Generator] = None) -> Tensor:
        raise NotImplementedError

    def forward(self, input: Tensor, target: Tensor, *,
                generator: Optional[torch.Generator] = None) -> Tensor:
        """input [*, D], target int64 [*] (or [*, T]) -> the loss. Training mode: the layer's
        sampled loss, its samples drawn with `generator` (a torch.Generator; default: the
        global one); eval mode: the exact full-softmax loss."""
        if not self.training:
            return self.full_loss(input, target)
        check_log_uniform_fit(self, target)  # warns once if ids are not sorted by frequency
        if generator is None:  # a registered head may define training_loss(input, target)
            return self.training_loss(input, target)
        return self.training_loss(input, target, generator=generator)

    def extra_repr(self) -> str:
        text = (f"in_features={self.in_features}, num_classes={self.num_classes}, "
                f"bias={self.linear_bias is not None}, reduction={self.reduction!r}")
        if self.weight is not None:
            text += ", weight=[per-class]"
        if self.label_smoothing:
            text += f", label_smoothing={self.label_smoothing}"
        return text


class FullSoftmaxLoss(OutputLayer):
    __doc__ = """The exact softmax cross entropy in training and in eval (the baseline of the
    family), with the logits streamed in blocks of `chunk_bytes`. In training autograd keeps the
    blocks for backward; in eval (no grad) memory stays bounded for any V. It equals
    F.linear_cross_entropy(input, linear_weight, target, linear_bias=, weight=,
    label_smoothing=, reduction=, ignore_index=).

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        label_smoothing: as F.cross_entropy: the target puts 1 - eps on the true class and
            spreads eps uniformly over all V classes (default 0.0).
        z_loss: PaLM's auxiliary loss, z_loss * logsumexp(logits)² added to each row
            (default 0.0: off).
        softcap: Gemma 2's cap, logits -> softcap * tanh(logits / softcap), before the
            softmax, smoothing and z_loss (default None: off).
            See functional.full_softmax_loss.""" + COMMON_ARGS

    num_samples_arg = None

    def __init__(self, in_features: int, num_classes: int, *, bias: bool = True,
                 linear_weight: Optional[nn.Parameter] = None, weight: Optional[Tensor] = None,
                 label_smoothing: float = 0.0, reduction: str = "mean",
                 ignore_index: int = -100, device=None, dtype=None, z_loss: float = 0.0,
                 softcap: Optional[float] = None):
        super().__init__(in_features, num_classes, bias=bias, linear_weight=linear_weight,
                         weight=weight, label_smoothing=label_smoothing, reduction=reduction,
                         ignore_index=ignore_index, device=device, dtype=dtype)
        self.z_loss, self.softcap = check_z_loss(z_loss), check_softcap(softcap)

    def training_loss(self, input: Tensor, target: Tensor,
                      generator: Optional[torch.Generator] = None) -> Tensor:
        return self.full_loss(input, target)  # draws nothing: generator is not needed


class _SampledLayer(OutputLayer):
    """A layer that trains on a sampled objective drawn from `self.sampler`."""

    def __init__(self, in_features, num_classes, num_samples, *, sampler, counts, vocab, power,
                 sparse, default_sampler, **layer):
        super().__init__(in_features, num_classes, **layer)
        self.num_samples = check_size(self.num_samples_arg, num_samples)
        self.sparse = bool(sparse)
        self.sampler = make_sampler(sampler, counts, power, self.num_classes, default_sampler,
                                    vocab=vocab, device=self.linear_weight.device)

    def _sampler_on(self, device: torch.device) -> Sampler:
        if self.sampler.device != device:
            self.sampler = self.sampler.to(device)
        return self.sampler

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, sampler={self.sampler!r}, sparse={self.sparse}"


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
            that row (default True).
        label_smoothing: eps (default 0.0). Eval: exactly F.cross_entropy's. Training: the
            row's target puts 1 - eps on its true class and spreads eps uniformly over its
            candidates (the true class and the sampled classes it keeps), with the
            logQ-corrected logits; `weight` weighs each candidate's term as F.cross_entropy
            weighs each class's. See fastsoftmax._smoothing.""" + SAMPLER_ARGS.format(
        default="log-uniform") + COMMON_ARGS

    num_samples_arg = "num_sampled"

    def __init__(self, in_features: int, num_classes: int, num_sampled: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, vocab=None,
                 power: float = 0.75, bias: bool = True,
                 linear_weight: Optional[nn.Parameter] = None, weight: Optional[Tensor] = None,
                 label_smoothing: float = 0.0, remove_accidental_hits: bool = True,
                 reduction: str = "mean", ignore_index: int = -100, sparse: bool = False,
                 device=None, dtype=None):
        super().__init__(in_features, num_classes, num_sampled, sampler=sampler, counts=counts,
                         vocab=vocab, power=power, sparse=sparse, default_sampler="log_uniform",
                         bias=bias, linear_weight=linear_weight, weight=weight,
                         label_smoothing=label_smoothing, reduction=reduction,
                         ignore_index=ignore_index, device=device, dtype=dtype)
        self.num_sampled = self.num_samples
        self.remove_accidental_hits = remove_accidental_hits

    def training_loss(self, input, target, generator=None):
        return functional.sampled_softmax_loss(
            input, self.linear_weight, target, linear_bias=self.linear_bias,
            weight=self.weight, label_smoothing=self.label_smoothing,
            num_sampled=self.num_sampled, sampler=self._sampler_on(input.device), num_true=None,
            remove_accidental_hits=self.remove_accidental_hits, reduction=self.reduction,
            ignore_index=self.ignore_index, generator=generator, sparse=self.sparse)


class NCELoss(_SampledLayer):
    __doc__ = """Noise-contrastive estimation output layer (tf.nn.nce_loss). Logits are shifted by
    -log_z (self-normalised when 0); with `learn_log_z` it is a Parameter. In eval: the exact
    full softmax.

    The bias starts at -log(num_classes), so that exp(logits) sums to about 1 from the first
    step. With a zero bias every class starts num_classes times too likely and NCE spends its
    first thousands of steps pushing all scores down (a 2x200 LSTM on PTB, 400 SGD steps:
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
                 power: float = 0.75, bias: bool = True,
                 linear_weight: Optional[nn.Parameter] = None, weight: Optional[Tensor] = None,
                 label_smoothing: float = 0.0, log_z: float = 0.0, learn_log_z: bool = False,
                 reduction: str = "mean", ignore_index: int = -100, sparse: bool = False,
                 device=None, dtype=None):
        _refuse_label_smoothing("NCELoss", label_smoothing)
        super().__init__(in_features, num_classes, num_sampled, sampler=sampler, counts=counts,
                         vocab=vocab, power=power, sparse=sparse, default_sampler="log_uniform",
                         bias=bias, linear_weight=linear_weight, weight=weight,
                         label_smoothing=0.0, reduction=reduction, ignore_index=ignore_index,
                         device=device, dtype=dtype)
        self.num_sampled = self.num_samples
        if self.linear_bias is not None:
            nn.init.constant_(self.linear_bias, -math.log(self.num_classes))
        like = self.linear_weight
        value = torch.tensor(float(log_z), device=like.device,
                             dtype=torch.float64 if like.dtype == torch.float64 else torch.float32)
        if learn_log_z:
            self.log_z = nn.Parameter(value)
        else:
            self.register_buffer("log_z", value)

    def training_loss(self, input, target, generator=None):
        # Eval needs no override: NCE's normalised model is the softmax of the unshifted
        # logits (log_z cancels), which is what full_loss computes.
        return functional.nce_loss(
            input, self.linear_weight, target, linear_bias=self.linear_bias, weight=self.weight,
            num_sampled=self.num_sampled, sampler=self._sampler_on(input.device), num_true=None,
            log_z=self.log_z, reduction=self.reduction, ignore_index=self.ignore_index,
            generator=generator, sparse=self.sparse)


class NegativeSamplingLoss(_SampledLayer):
    __doc__ = """word2vec's negative-sampling output layer: `num_negatives` negatives per row (or
    shared by the batch when `shared`), no bias. Default sampler: unigram^power when `counts`
    are given, else uniform. In eval: the exact full softmax of linear_weight. There is no
    bias (word2vec has none). In training `weight` scales each row's whole loss by the weight
    of its true class.

    Args:
        in_features: D, the size of each input row.
        num_classes: V, the number of classes.
        num_negatives: K, the negatives drawn per row (with replacement).
        shared: draw one set of K negatives for the whole batch (default False: per row).
        label_smoothing: only 0.0; any other value is refused (a sum of logistic losses has
            no smoothed target).""" + SAMPLER_ARGS.format(default="uniform") + \
        COMMON_ARGS.replace(
            "        bias: learn a bias `linear_bias` [V] (default True).\n", "")

    num_samples_arg = "num_negatives"

    def __init__(self, in_features: int, num_classes: int, num_negatives: int, *,
                 sampler: Union[Sampler, str, None] = None, counts=None, vocab=None,
                 power: float = 0.75, linear_weight: Optional[nn.Parameter] = None,
                 weight: Optional[Tensor] = None, label_smoothing: float = 0.0,
                 shared: bool = False, reduction: str = "mean", ignore_index: int = -100,
                 sparse: bool = False, device=None, dtype=None):
        _refuse_label_smoothing("NegativeSamplingLoss", label_smoothing)
        super().__init__(in_features, num_classes, num_negatives, sampler=sampler, counts=counts,
                         vocab=vocab, power=power, sparse=sparse, default_sampler="uniform",
                         bias=False, linear_weight=linear_weight, weight=weight,
                         label_smoothing=0.0, reduction=reduction, ignore_index=ignore_index,
                         device=device, dtype=dtype)
        self.num_negatives, self.shared = self.num_samples, bool(shared)

    def training_loss(self, input, target, generator=None):
        sampler = self._sampler_on(input.device)
        rows = input.numel() // self.in_features
        shape = (self.num_negatives,) if self.shared else (rows, self.num_negatives)
        negatives = sampler.sample(*shape, generator=generator)
        if not self.shared:
            negatives = negatives.reshape(*input.shape[:-1], self.num_negatives)
        return functional.negative_sampling_loss(
            input, self.linear_weight, target, weight=self.weight, negatives=negatives,
            reduction=self.reduction, ignore_index=self.ignore_index, sparse=self.sparse)


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
_SHARED_OPTIONS = ("sampler", "counts", "vocab", "power", "bias", "sparse")


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
    that draw none). sampler, counts, vocab, power, bias and sparse go to the heads that take
    them; any other option (linear_weight, weight, label_smoothing, reduction, ignore_index,
    device, dtype, ...) must be one the head takes, or None."""
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
    "make_sampler",
    "migrate_state_dict",
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

    def training_loss(self, input: Tensor, target: Tensor,
                      generator: Optional[torch.Generator] = None) -> Tensor:
        return self.full_loss(input, target)


register_head("hs", HierarchicalSoftmaxLoss)

# help(Layer.__init__) shows the parameters too, not nn.Module's constructor text.
for _layer in (FullSoftmaxLoss, SampledSoftmaxLoss, NCELoss, NegativeSamplingLoss,
               HierarchicalSoftmaxLoss):
    _layer.__init__.__doc__ = _layer.__doc__

__all__ += ["HierarchicalSoftmaxLoss"]

# The two-tower retrieval loss lives in retrieval.py.
from .retrieval import InBatchSoftmaxLoss  # noqa: E402

__all__ += ["InBatchSoftmaxLoss"]
