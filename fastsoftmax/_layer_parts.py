"""Parts the output layers of fastsoftmax.nn share: sampler construction, argument checks,
the state-dict migration of the 0.1 rename, and the docstring text of their common
constructor parameters."""


from torch import Tensor

from .samplers import LogUniformSampler, Sampler, UniformSampler, UnigramSampler

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


def migrate_state_dict(state_dict, prefix: str) -> None:
    """Before 0.1 the output embedding was saved as 'weight' (2-D) and 'bias'; a per-class
    weight is 1-D, so a 2-D 'weight' with no 'linear_weight' beside it is the old name."""
    old, new = prefix + "weight", prefix + "linear_weight"
    value = state_dict.get(old)
    if new in state_dict or not isinstance(value, Tensor) or value.dim() != 2:
        return
    state_dict[new] = state_dict.pop(old)
    if prefix + "bias" in state_dict and prefix + "linear_bias" not in state_dict:
        state_dict[prefix + "linear_bias"] = state_dict.pop(prefix + "bias")


def _refuse_label_smoothing(layer: str, value) -> None:
    if value != 0.0:
        raise ValueError(
            f"{layer} does not support label_smoothing (got {value!r}): its training "
            "objective is a sum of binary logistic losses, not a cross entropy over classes, "
            "so a smoothed target has no meaning there (use SampledSoftmaxLoss or "
            "FullSoftmaxLoss)")


# Docstring text of the parameters every layer (or every sampling layer) takes.
COMMON_ARGS = """
        bias: learn a bias `linear_bias` [V] (default True).
        linear_weight: an existing nn.Parameter [V, D] to use as the output embedding (tie it
            with an input embedding: pass embedding.weight); default: a new one, N(0, 1/D).
        weight: per-class rescaling [V] (a tensor), as in nn.CrossEntropyLoss: row i's loss
            is multiplied by weight[target_i] and 'mean' divides by the sum of those weights
            over the rows not ignored. Exact F.cross_entropy(weight=...) in eval. Needs one
            true class per row. Kept as the buffer `weight`.
        reduction: 'mean' (over the rows not ignored), 'sum' or 'none'.
        ignore_index: target value whose rows contribute nothing (default -100).
        device, dtype: of the parameters, as for torch.nn.Linear."""

SAMPLER_ARGS = """
        sampler: a fastsoftmax Sampler over the V classes, or 'unigram' (counts ** power),
            'log_uniform' or 'uniform'; default: unigram when `counts` are given, else {default}.
        counts: class frequencies for the unigram sampler: a tensor, list or numpy array in id
            order, or a dict / collections.Counter keyed by vocabulary entry (with `vocab`).
        vocab: the vocabulary in id order (or a mapping entry -> id), when counts is a dict.
        power: exponent of the unigram counts (default 0.75, as word2vec).
        sparse: sparse COO gradient of linear_weight (the rows used), for SparseAdam or SGD on
            very large V."""
