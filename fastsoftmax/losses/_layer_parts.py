"""Parts the output layers of fastsoftmax.nn share: the family's base class OutputLayer,
the sampler kept as module buffers (SamplerTables), sampler construction, argument checks,
the state-dict migration of older names, and the docstring text of their common constructor
parameters."""

import inspect
from typing import Optional

import torch
from torch import Tensor, nn

from ._shapes import (check_class_weight, check_generator, check_label_smoothing,
                      check_reduction, check_size)
from ..samplers.fit import check_log_uniform_fit
from ..samplers import (LogUniformSampler, Sampler, UniformSampler, UnigramSampler,
                       interleaved_table)

_SAMPLERS = ("unigram", "log_uniform", "uniform")


def make_sampler(sampler, counts, power: float, num_classes: int, default: str, *,
                 vocab=None, device=None) -> Sampler:
    """A Sampler over num_classes: `sampler` itself, or the one named ('unigram' from counts
    to the power `power`, 'log_uniform', 'uniform') on `device`; None picks unigram when
    counts are given, else `default`. `counts` is anything UnigramSampler takes: a tensor,
    sequence or numpy array in id order, or a dict / Counter with `vocab`."""
    if isinstance(sampler, Sampler):
        if sampler.num_classes != num_classes:
            raise ValueError(
                f"sampler draws from {sampler.num_classes} classes, the layer has {num_classes}"
            )
        return sampler
    name = sampler if sampler is not None else ("unigram" if counts is not None else default)
    if name not in _SAMPLERS:
        raise ValueError(f"sampler must be a Sampler or one of {_SAMPLERS}, got {sampler!r}")
    if name != "unigram" and counts is not None:
        raise ValueError(f"counts is only used by sampler='unigram', not {name!r}")
    if vocab is not None and counts is None:
        raise ValueError("vocab orders the entries of counts; it needs counts=")
    if name == "unigram":
        if counts is None:
            raise ValueError("sampler='unigram' needs counts (class frequencies)")
        built = UnigramSampler(counts, power, vocab=vocab, device=device)
        if built.num_classes != num_classes:
            raise ValueError(f"counts has {built.num_classes} entries for {num_classes} classes")
        return built
    if name == "log_uniform":
        return LogUniformSampler(num_classes, device=device)
    return UniformSampler(num_classes, device=device)


def migrate_state_dict(state_dict, prefix: str, weight_key: str = "linear.weight",
                       bias_key: str = "linear.bias") -> None:
    """Older names of the output embedding, renamed in place to `weight_key`/`bias_key`:
    'linear_weight'/'linear_bias' (0.1 to 0.2, before the layers held an nn.Linear like
    torch.nn.LinearCrossEntropyLoss) and 'weight' (2-D)/'bias' (before 0.1; a per-class
    weight is 1-D, so a 2-D 'weight' with no new key beside it is the old name)."""
    new_weight, new_bias = prefix + weight_key, prefix + bias_key
    for old_weight, old_bias in (("linear_weight", "linear_bias"), ("weight", "bias")):
        value = state_dict.get(prefix + old_weight)
        if new_weight in state_dict or not isinstance(value, Tensor) or value.dim() != 2 \
                or prefix + old_weight == new_weight:
            continue
        state_dict[new_weight] = state_dict.pop(prefix + old_weight)
        if prefix + old_bias in state_dict and new_bias not in state_dict:
            state_dict[new_bias] = state_dict.pop(prefix + old_bias)


def check_torch_only_args(layer: str, out_features, options) -> None:
    """torch.nn.LinearCrossEntropyLoss's out_features and options, refused unless unset."""
    try:
        extra = tuple(out_features)
    except TypeError:
        extra = None
    if extra != ():
        raise ValueError(
            f"{layer} takes one class id per row: out_features must be () (the default of "
            f"torch.nn.LinearCrossEntropyLoss), got {out_features!r}")
    if options is not None:
        raise ValueError(
            f"{layer} does not take options= (torch.nn.LinearCrossEntropyOptions picks "
            "PyTorch's chunking); its exact softmax is streamed in blocks of `chunk_bytes`, "
            "and its training loss is sampled")


class SamplerTables(nn.Module):
    """A Sampler's tensors (its draw table, its probabilities) as buffers, so that the
    layer's state_dict(), .to(), copy.deepcopy and torch.save carry the sampling distribution
    with it. `sampler` is the Sampler drawing from the buffers as they are now."""

    def __init__(self, sampler: Sampler):
        super().__init__()
        self._sampler = sampler
        for name, tensor in sampler._tensors().items():
            self.register_buffer(name, tensor)

    @property
    def sampler(self) -> Sampler:
        known = self._sampler._tensors()
        if any(known[name] is not tensor for name, tensor in self._buffers.items()):
            self._sampler = self._sampler._with_tensors(dict(self._buffers))  # after .to()
        return self._sampler

    def _apply(self, fn, recurse=True):
        # Tables move between devices but keep their dtypes and values: layer.double() must
        # not make the float32 alias probabilities float64 (the native draw reads float32),
        # nor layer.half() round them. A cast is replaced by a move of the original.
        for name, tensor in self._buffers.items():
            moved = fn(tensor)
            self._buffers[name] = moved if moved.dtype == tensor.dtype else \
                tensor.to(moved.device)
        return self

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A state dict without sampler tables (torch.nn.LinearCrossEntropyLoss's, or one saved
        # before they were kept) leaves the layer's own sampler as it is. One saved before the
        # alias table was interleaved has its two halves: packed here.
        old = (prefix + "prob_table", prefix + "alias_table")
        if "entries" in self._buffers and all(k in state_dict for k in old):
            prob, alias = (state_dict.pop(k) for k in old)
            state_dict[prefix + "entries"] = interleaved_table(prob, alias)
        for name, tensor in self._buffers.items():
            state_dict.setdefault(prefix + name, tensor)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._sampler = self._sampler._with_tensors(dict(self._buffers))
        self._sampler._forget_derived()

    def extra_repr(self) -> str:
        return repr(self._sampler)


class OutputLayer(nn.Module):
    """The base of the output-layer family. Every layer has `in_features`, `num_classes`, the
    output embedding `linear_weight` (and `linear_bias` or None), the per-class `weight` [V]
    (a buffer, or None), `reduction`, `ignore_index` and `label_smoothing`, and the exact
    paths `full_loss`, `log_prob` and `predict`; a subclass sets what training computes
    (`training_loss`). `forward` gives the training loss in training mode and `full_loss` in
    eval mode."""

    num_samples_arg: Optional[str] = None  # make_head's name for the sample count, if any
    has_bias = True  # whether `bias=True` gives the logits a bias (models ask, see models/heads.py)

    def __init__(self, in_features, num_classes, *, out_features=(), options=None,
                 reduction="mean", ignore_index=None, label_smoothing=0.0):
        super().__init__()
        check_torch_only_args(type(self).__name__, out_features, options)
        self.in_features = check_size("in_features", in_features)
        self.num_classes = check_size("num_classes", num_classes)
        check_reduction(reduction)
        self.reduction = reduction
        # None is torch.nn.LinearCrossEntropyLoss's default, which means -100 for class ids.
        self.ignore_index = -100 if ignore_index is None else ignore_index
        self.label_smoothing = check_label_smoothing(label_smoothing)

    def _register_class_weight(self, weight, like: Tensor) -> None:
        """The per-class `weight` buffer, on the device and in the dtype of `like` (the layer's
        output embedding, made with the factory arguments device= and dtype=)."""
        if weight is not None:
            device = weight.device if isinstance(weight, Tensor) else like.device
            weight = check_class_weight(weight, self.num_classes, device)
            weight = weight.detach().to(device=like.device, dtype=like.dtype)
        self.register_buffer("weight", weight)

    def full_loss(self, input: Tensor, target: Tensor, *, reduction: Optional[str] = None
                  ) -> Tensor:
        raise NotImplementedError

    def training_loss(self, input: Tensor, target: Tensor,
                      generator: Optional[torch.Generator] = None) -> Tensor:
        raise NotImplementedError

    def forward(self, input: Tensor, target: Tensor, *,
                generator: Optional[torch.Generator] = None) -> Tensor:
        """input [*, D], target int64 [*] (or [*, T]) -> the loss. Training mode: the layer's
        training loss, its samples drawn with `generator` (a CPU torch.Generator; default:
        the global one); eval mode: the exact full-softmax loss."""
        check_generator(generator)
        self._check_device(input)
        if not self.training:
            return self.full_loss(input, target)
        check_log_uniform_fit(self, target)  # warns once if ids are not sorted by frequency
        if generator is None:  # a registered head may define training_loss(input, target)
            return self.training_loss(input, target)
        return self.training_loss(input, target, generator=generator)

    def _check_device(self, input: Tensor) -> None:
        """The input on the layer's device, or an error naming the fix: the layer's weights
        and its sampler's tables move together with layer.to(device)."""
        mine = next(self.parameters(), None)
        if isinstance(input, Tensor) and mine is not None and input.device != mine.device:
            raise ValueError(
                f"input is on {input.device} but {type(self).__name__} is on {mine.device}: "
                f"move the layer with head.to({str(input.device)!r}) (its weights and sampler "
                f"tables move with it), or the input with input.to({str(mine.device)!r})")

    def extra_repr(self) -> str:
        text = (f"in_features={self.in_features}, num_classes={self.num_classes}, "
                f"bias={self.linear_bias is not None}, reduction={self.reduction!r}, "
                f"ignore_index={self.ignore_index}")
        if self.weight is not None:
            text += ", weight=[per-class]"
        if self.label_smoothing:
            text += f", label_smoothing={self.label_smoothing}"
        return text


_LOGISTIC = ("its training objective is a sum of binary logistic losses, not a cross entropy "
             "over classes, so a smoothed target has no meaning there (use SampledSoftmaxLoss "
             "or FullSoftmaxLoss)")


def refuse_label_smoothing(layer: str, value, why: str = _LOGISTIC) -> None:
    """A ValueError saying `why` unless label_smoothing `value` is 0.0 (for the layers whose
    objective has no target distribution to smooth)."""
    if value != 0.0:
        raise ValueError(f"{layer} does not support label_smoothing (got {value!r}): {why}")


# Docstring text of the parameters every layer (or every sampling layer) takes.
COMMON_ARGS = """
        out_features: only () (one class id per row), torch.nn.LinearCrossEntropyLoss's
            default; any other value is refused.
        bias: learn a bias `linear.bias` [V] (default False, as torch's module).
        linear_weight: an existing nn.Parameter [V, D] to use as the output embedding (tie it
            with an input embedding: pass embedding.weight); default: a new one, N(0, 1/D).
            Held as `linear.weight` of the nn.Linear `linear`, as in
            torch.nn.LinearCrossEntropyLoss, whose state dicts load into this layer.
        weight: per-class rescaling [V] (a tensor), as in nn.CrossEntropyLoss: row i's loss
            is multiplied by weight[target_i] and 'mean' divides by the sum of those weights
            over the rows not ignored. Exact F.cross_entropy(weight=...) in eval. Needs one
            true class per row. Kept as the buffer `weight`.
        reduction: 'mean' (over the rows not ignored), 'sum' or 'none'.
        ignore_index: target value whose rows contribute nothing (default None: -100).
        options: only None; torch.nn.LinearCrossEntropyOptions is refused (the exact softmax
            is streamed in blocks of `chunk_bytes` here).
        device, dtype: of the parameters and buffers, as for torch.nn.Linear."""

SAMPLER_ARGS = """
        sampler: a fastsoftmax Sampler over the V classes, or 'unigram' (counts ** power),
            'log_uniform' or 'uniform'; default: unigram when `counts` are given, else {default}.
        counts: class frequencies for the unigram sampler: a tensor, list or numpy array in id
            order, or a dict / collections.Counter keyed by vocabulary entry (with `vocab`).
        vocab: the vocabulary in id order (or a mapping entry -> id), when counts is a dict.
        power: exponent of the unigram counts (default 0.75, as word2vec).
        sparse: sparse COO gradient of linear_weight (the rows used), for SparseAdam or SGD on
            very large V."""


def keywords_after_positionals(base: type):
    """A class decorator for a layer whose constructor passes `base`'s keyword-only
    parameters (torch.nn.LinearCrossEntropyLoss's) on as `**layer`: it gives the class the
    signature that names them, for inspect, help() and make_head: the layer's positional
    parameters, then base's keywords, then the layer's own. help(Layer.__init__) shows the
    class docstring (which documents them), not nn.Module's constructor text."""
    layer = [p for p in inspect.signature(base.__init__).parameters.values()
             if p.kind is inspect.Parameter.KEYWORD_ONLY]

    def named(cls: type) -> type:
        own = list(inspect.signature(cls.__init__).parameters.values())[1:]
        cls.__signature__ = inspect.Signature(
            [p for p in own if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD] + layer
            + [p for p in own if p.kind is inspect.Parameter.KEYWORD_ONLY])
        if "__init__" in vars(cls) and cls.__doc__:
            cls.__init__.__doc__ = cls.__doc__
        return cls
    return named


def constructor_keywords(cls: type) -> set:
    """The keyword names `cls(...)` takes. A family layer names them in its composed
    signature (keywords_after_positionals), which a subclass would inherit as a class
    attribute even when it defines a constructor of its own; so a class's own signature is
    read from its own __init__, and an __init__ that passes `**kwargs` on also takes its
    base's keywords."""
    if cls in (object, nn.Module):
        return set()
    if "__signature__" in vars(cls):
        return set(inspect.signature(cls).parameters)
    if "__init__" not in vars(cls):
        return constructor_keywords(cls.__mro__[1])
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    named = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    if any(p.kind is p.VAR_KEYWORD for p in params):
        named |= constructor_keywords(cls.__mro__[1])
    return named
