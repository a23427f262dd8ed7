"""The samplers' argument checks: ints, draw shapes, and weights or counts given as a
tensor, a sequence or a mapping of word to count (with a vocabulary)."""

import numbers
import operator
from collections.abc import Mapping

import torch
from torch import Tensor


def _as_int(value, name: str) -> int:
    """value as a Python int: ints and numpy/torch integer scalars (anything with __index__),
    never bools or floats."""
    if isinstance(value, bool) or (isinstance(value, Tensor) and value.dtype == torch.bool):
        raise TypeError(f"{name} must be an int, got a bool")
    if isinstance(value, Tensor) and value.numel() != 1:
        raise TypeError(f"{name} must be an int, got a tensor of shape {tuple(value.shape)}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


def _shape(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = tuple(shape[0])
    out = []
    for s in shape:
        if isinstance(s, torch.SymInt):
            out.append(s)
            continue
        try:
            s = _as_int(s, "sample shape")
        except TypeError:
            s = -1
        if s < 0:
            raise ValueError(f"sample shape must be non-negative ints, got {tuple(shape)}")
        out.append(s)
    return tuple(out)


def _weights_tensor(values, name: str, vocab=None) -> Tensor:
    """Weights or counts as a tensor: a tensor, a sequence or numpy array of numbers, or a
    mapping (dict, collections.Counter) from vocabulary entries to numbers put in the order of
    `vocab` (a sequence of entries, entry i being id i, or a mapping entry -> id)."""
    if isinstance(values, Mapping):
        values = _ordered_counts(values, name, vocab)
    elif vocab is not None:
        raise ValueError(f"vocab orders the entries of a dict or Counter of {name}; "
                         f"{name} is a {type(values).__name__}, already in id order")
    if isinstance(values, Tensor):
        return values
    try:  # float64 straight away: a list of floats must not pass through float32
        tensor = torch.as_tensor(values)
        if tensor.dtype != torch.bool and not tensor.is_complex():
            tensor = torch.as_tensor(values, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must be numbers (a tensor, a sequence or array of numbers, "
                        f"or a dict/Counter with vocab=), got {type(values).__name__} "
                        "holding something else") from None
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise TypeError(f"{name} must be real numbers, got {tensor.dtype}")
    return tensor if tensor.is_floating_point() else tensor.double()


def _ordered_counts(counts: Mapping, name: str, vocab) -> list:
    if vocab is None:
        raise ValueError(f"{name} is a {type(counts).__name__}: give vocab= (the vocabulary "
                         "in id order, or a mapping entry -> id) so that each count lands on "
                         "its class id")
    if isinstance(vocab, Mapping):
        ids = [_as_int(i, "vocab id") for i in vocab.values()]
        if sorted(ids) != list(range(len(ids))):
            raise ValueError("a vocab mapping must assign the ids 0..len(vocab)-1, each once")
        order = [None] * len(ids)
        for entry, i in zip(vocab.keys(), ids):
            order[i] = entry
    else:
        order = list(vocab)
        if len(set(order)) != len(order):
            raise ValueError("vocab lists an entry twice")
    known = set(order)
    missing = [k for k in counts if k not in known]
    if missing:
        raise ValueError(f"{name} has {len(missing)} entries that are not in vocab "
                         f"(first: {missing[0]!r}); they would be lost")
    values = [counts.get(entry, 0) for entry in order]
    for entry, v in zip(order, values):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be numbers; the entry {entry!r} has {v!r}")
    return [float(v) for v in values]
