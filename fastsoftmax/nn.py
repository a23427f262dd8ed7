"""One family of output layers: sampled loss in training, exact full softmax in eval.

Every output layer shares one interface (OutputLayer) and a registry (`make_head(name, ...)`,
`register_head`) from which every model takes its head by name; this module holds the
registry and gathers the layers, each defined beside its functional in its family's module
under fastsoftmax.losses. FullSoftmaxLoss, SampledSoftmaxLoss, NCELoss and
NegativeSamplingLoss are each a drop-in for torch.nn.LinearCrossEntropyLoss: the same
positional arguments and keyword defaults (bias=False, ignore_index=None), the output
embedding held as the nn.Linear `linear` (`linear.weight` [V, D], `linear.bias` [V]; also
readable as `linear_weight`/`linear_bias`), or a given Parameter (tying with an input
embedding), and state dicts that load both ways; `weight` [V] is a per-class rescaling.
Older state dicts (keys 'linear_weight'/'linear_bias', or before 0.1 'weight' [V, D] and
'bias') migrate on load.

In training mode `forward(input, target, *, generator=None)` returns the sampled loss (drawn
with `generator` when given); in eval mode the exact full-softmax cross entropy with the same
reduction, `weight` and `label_smoothing` as F.cross_entropy: exp(eval loss) is a
perplexity. The full-softmax paths (`eval` loss, `log_prob`, `predict`) are the streaming
functionals of fastsoftmax.functional (streaming_logsumexp): no block of logits larger than
`chunk_bytes` exists at once, also for V in the millions.

The default sampler of SampledSoftmaxLoss and NCELoss is log-uniform, which assumes class ids
sorted by falling frequency (id 0 the most frequent). In training the layer checks its first
targets against that assumption and warns once when they contradict it
(fastsoftmax.samplers.fit); give `counts=` (a unigram sampler) or `sampler='uniform'` for a
vocabulary in any other order.
"""

from typing import Optional

from .losses._layer_parts import OutputLayer, constructor_keywords, make_sampler, migrate_state_dict
from .losses._shapes import check_size
from .losses.full import FullSoftmaxLoss
from .losses.hierarchical import HierarchicalSoftmaxLoss
from .losses.in_batch import InBatchSoftmaxLoss
from .losses.margin import MultiMarginLoss, SampledMarginRankingLoss, WARPLoss
from .losses.negative_sampling import NegativeSamplingLoss
from .losses.sampled import NCELoss, SampledSoftmaxLoss

# The registry: every model takes its output layer from here, by name.
HEADS = {
    "full": FullSoftmaxLoss,
    "sampled": SampledSoftmaxLoss,
    "nce": NCELoss,
    "neg": NegativeSamplingLoss,
    "hs": HierarchicalSoftmaxLoss,  # its linear_weight is [V - 1, D]: one row per inner node
    "multi_margin": MultiMarginLoss,
    "margin_ranking": SampledMarginRankingLoss,
    "warp": WARPLoss,
}

# Options a model may pass to whichever head it builds, with the value that asks nothing of
# a head: a head that does not take one gets it only at that value (dropped); any other value
# is refused, since the head would silently not do what was asked.
_SHARED_OPTIONS = {"sampler": None, "counts": None, "vocab": None, "power": 0.75,
                   "bias": False, "sparse": False, "tree": None}


def register_head(name: str, cls: type) -> None:
    """Make `cls` (an OutputLayer subclass built as cls(in_features, num_classes, ...)) the
    head called `name` for make_head and every model. A class attribute `num_samples_arg`
    names its constructor's sample-count argument, which make_head fills from its
    `num_sampled` (None when it draws no samples)."""
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
              num_sampled: Optional[int] = None, **options) -> OutputLayer:
    """The registered head `name` ('full', 'sampled', 'nce', 'neg', 'hs', ...) over
    `num_classes` classes. `num_sampled` is its sample count, given to the head under its own
    name (`num_samples_arg`: num_sampled, or num_negatives for 'neg'; ignored by heads that
    draw none), which checks it. sampler, counts, vocab, power, bias, sparse and tree go to
    the heads that take them; a head that does not take one accepts it only unset (None,
    power 0.75, bias and sparse False), and refuses any other value with a ValueError. Any
    other option (linear_weight, weight, label_smoothing, reduction, ignore_index, device,
    dtype, ...) must be one the head takes, or None."""
    if "num_samples" in options:  # the old name: refused, not silently passed on
        raise TypeError("make_head: num_samples= was renamed: use num_sampled=")
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
        if num_sampled is None:
            raise ValueError(f"output {name!r} needs a sample count (num_sampled)")
        # Its size and its bound against num_classes are the layer's to check (a sampled
        # layer's candidates are distinct, negative sampling's need not be).
        kwargs[arg] = num_sampled
    return cls(in_features, num_classes, **kwargs)


__all__ = [
    "HEADS",
    "FullSoftmaxLoss",
    "HierarchicalSoftmaxLoss",
    "InBatchSoftmaxLoss",
    "MultiMarginLoss",
    "NCELoss",
    "NegativeSamplingLoss",
    "OutputLayer",
    "SampledMarginRankingLoss",
    "SampledSoftmaxLoss",
    "WARPLoss",
    "check_size",
    "constructor_keywords",
    "make_head",
    "make_sampler",
    "migrate_state_dict",
    "register_head",
]
