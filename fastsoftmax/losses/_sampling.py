"""What every sampled loss shares: the sampler's checks, the draws (candidates shared by the
batch, negatives per row or shared), the checks of negatives given by the caller, and
SampledLayer, the base of the layers that train on a sampled objective (sampled softmax,
NCE, negative sampling, the sampled margin losses)."""

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from ._layer_parts import SamplerTables, make_sampler
from ._shapes import check_count, check_size
from ..samplers import SampledValues, Sampler
from .full import LinearLayer


def check_sampler(sampler, num_classes: int, device: torch.device) -> Sampler:
    """`sampler`, once it is a Sampler over `num_classes` classes on `device`."""
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sampler must be a fastsoftmax Sampler, got {type(sampler).__name__}")
    if sampler.num_classes != num_classes:
        raise ValueError(
            f"sampler draws from {sampler.num_classes} classes but linear_weight has "
            f"{num_classes}"
        )
    if sampler.device != device:
        raise ValueError(
            f"sampler is on {sampler.device} but input is on {device} (use sampler.to(device))"
        )
    return sampler


def sampler_for(sampler: Optional[Sampler], count, count_name: str, given_name: str,
                num_classes: int, device: torch.device, default: type) -> Tuple[Sampler, int]:
    """(the sampler to draw from, the sample count) when the loss draws its samples itself:
    `count` (named `count_name`) must be given unless the samples are (`given_name`), and
    `sampler` None is `default(num_classes)`."""
    if count is None:
        raise ValueError(f"give either {count_name} (and optionally sampler) or {given_name}")
    count = check_count(count, count_name)
    if sampler is None:
        sampler = default(num_classes, device=device)
    return check_sampler(sampler, num_classes, device), count


def draw_candidates(
    sampler: Sampler, true_classes: Tensor, num_sampled: int,
    generator: Optional[torch.Generator] = None,
) -> SampledValues:
    """`sampler.candidates(true_classes, num_sampled, unique=True)` without its host-side id
    check, so that it traces under torch.compile; the loss ops check every id natively.
    `true_classes` must hold valid ids (ignored rows replaced by any valid id)."""
    return sampler._draw_candidates(true_classes, num_sampled, True, generator)


def draw_negatives(sampler: Sampler, input: Tensor, num_negatives: int, shared: bool,
                   generator: Optional[torch.Generator] = None) -> Tensor:
    """`num_negatives` ids drawn with replacement for each row of input [*, D] ([*, K]), or
    one set for the whole batch ([K]) when `shared`."""
    if shared:
        return sampler.sample(num_negatives, generator=generator)
    draws = sampler.sample(math.prod(input.shape[:-1]), num_negatives, generator=generator)
    return draws.reshape(*input.shape[:-1], num_negatives)


def negatives_as_rows(negatives: Tensor, name: str, lead: Tuple[int, ...], rows: int) -> Tensor:
    """Negatives given per row [*, K] as [N, K], or shared by the batch [K] as they are; a
    ValueError naming `name` for any other shape. K may be 0."""
    if negatives.dim() == 1:
        return negatives
    if negatives.dim() == len(lead) + 1 and tuple(negatives.shape[:-1]) == lead:
        return negatives.reshape(rows, negatives.shape[-1])
    raise ValueError(f"{name} must have shape {lead + ('K',)} (per row) or (K,) (shared), got "
                     f"{tuple(negatives.shape)}")


class SampledLayer(LinearLayer):
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


__all__ = ["SampledLayer", "check_sampler", "draw_candidates", "draw_negatives",
           "negatives_as_rows", "sampler_for"]
