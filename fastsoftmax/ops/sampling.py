"""The sampler ops: alias tables and Philox draws (csrc/cpu/sampler.cpp, csrc/cuda/sampler.cu).
`seed` is an int64 tensor of one element on the sampler's device; `kind` is KIND_ALIAS,
KIND_UNIFORM or KIND_LOG_UNIFORM (prob and alias are read only for KIND_ALIAS)."""

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import _checks
from ._registry import OpParts, _op

KIND_ALIAS, KIND_UNIFORM, KIND_LOG_UNIFORM = 0, 1, 2

PARTS = OpParts()


def seed_device(generator: Optional[torch.Generator], device: torch.device,
                compiling: bool) -> torch.device:
    """Where draw_seed draws the key: on the CPU, except for a CUDA sampler without a
    generator under torch.compile. A CPU draw copied to the GPU would keep the step out of
    a CUDA graph (mode='reduce-overhead'), so there the key comes from torch's CUDA generator
    on the device (seeded by torch.manual_seed, replayed by the graph's RNG offsets); the ids
    then follow that stream rather than the CPU's."""
    if generator is None and compiling and device.type == "cuda":
        return device
    return torch.device("cpu")


def draw_seed(generator: Optional[torch.Generator], device: torch.device) -> Tensor:
    """One 64-bit Philox key from a CPU generator (the default one when None).

    Draws on every device are a function of this key, so the same CPU generator state gives
    the same ids on CPU and CUDA; a CUDA generator is refused rather than silently giving a
    different stream. Under torch.compile a CUDA sampler without a generator draws the key
    on the device instead (seed_device).
    """
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(
            "fastsoftmax samplers take a CPU torch.Generator on every device (the draw is a "
            "function of a seed taken from it, so CPU and CUDA give the same ids); got a "
            f"generator on {generator.device}"
        )
    where = seed_device(generator, torch.device(device), torch.compiler.is_compiling())
    seed = torch.randint(-(2**63), 2**63 - 1, (1,), dtype=torch.int64, generator=generator,
                         device=where)
    return seed.to(device, non_blocking=True)


def alias_build(weights: Tensor) -> Tuple[Tensor, Tensor]:
    """Walker's alias table of finite non-negative `weights` [V], not all zero (normalised
    by the op): (prob float32 [V], alias int32 [V]), on the weights' device; what `sample`
    and `sample_unique` read for KIND_ALIAS."""
    return _op("alias_build")(weights)


@PARTS.fake("alias_build")
def _alias_build_fake(weights):
    torch._check(weights.dim() == 1, lambda: "weights must be 1-D")
    n = weights.shape[0]
    return weights.new_empty(n, dtype=torch.float32), weights.new_empty(n, dtype=torch.int32)


def sample(
    prob: Tensor, alias: Tensor, seed: Tensor, num_classes: int, kind: int, size: Sequence[int]
) -> Tensor:
    """int64 class ids of shape `size` in [0, num_classes), drawn independently (with
    replacement) from the distribution `kind` names, as a function of the Philox key `seed`
    (draw_seed): the same key gives the same ids on every device."""
    return _op("sample")(prob, alias, seed, num_classes, kind, list(size))


@PARTS.fake("sample")
def _sample_fake(prob, alias, seed, num_classes, kind, size):
    return seed.new_empty(size, dtype=torch.int64)


def sample_unique(
    prob: Tensor, alias: Tensor, seed: Tensor, num_classes: int, kind: int, num_sampled: int
) -> Tuple[Tensor, Tensor]:
    """`num_sampled` distinct int64 class ids, drawn from the distribution `kind` names until
    that many distinct ones came up (rejection of repeats, as TensorFlow's unique candidate
    samplers), as a function of the Philox key `seed`: (sampled [num_sampled], num_tries),
    num_tries the number of draws taken (what the expected counts are computed from). Under
    deferred checks on a device, a draw that could not find enough distinct classes is
    flagged there rather than read back."""
    sampled, tries = _op("sample_unique")(prob, alias, seed, num_classes, kind, num_sampled)
    checks = _checks.pending()
    if checks is not None and _checks.on_device(seed):
        # The native op gave up without reading back (num_tries -1, ids -1): keep the flag.
        checks.flag(tries < 0, f"could not find {num_sampled} distinct candidates in the "
                    f"draws allowed: too few classes have non-negligible probability")
        sampled = sampled.clamp_min(0)
    return sampled, tries


@PARTS.fake("sample_unique")
def _sample_unique_fake(prob, alias, seed, num_classes, kind, num_sampled):
    return seed.new_empty(num_sampled, dtype=torch.int64), seed.new_empty((), dtype=torch.int64)


def device_reads() -> int:
    """How many reads of device data to the host the current namespace's native ops have made
    (the tests' emulated build counts every read a GPU would make)."""
    return int(_op("device_reads")(torch.empty(0), -1))
