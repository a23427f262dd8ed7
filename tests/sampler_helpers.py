"""Samplers and weights shared by the sampler tests (tests/test_samplers.py and
tests/test_sampler_api.py)."""

import torch

import fastsoftmax as fs
from fastsoftmax import ops

KINDS = {"alias": ops.KIND_ALIAS, "uniform": ops.KIND_UNIFORM, "log_uniform": ops.KIND_LOG_UNIFORM}


def zipf_counts(v, s=1.1, seed=0):
    g = torch.Generator().manual_seed(seed)
    counts = 1e9 / torch.arange(1, v + 1, dtype=torch.float64) ** s
    return counts[torch.randperm(v, generator=g)].round().clamp_min(1.0)


def make_sampler(name, v, device):
    if name == "alias":
        return fs.UnigramSampler(zipf_counts(v), device=device)
    if name == "uniform":
        return fs.UniformSampler(v, device=device)
    return fs.LogUniformSampler(v, device=device)
