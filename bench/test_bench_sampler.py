"""Single timings with pytest-benchmark (side-by-side tables are in bench_sampler.py):

    python -m pytest bench/test_bench_sampler.py --benchmark-only
"""

import pytest
import torch

import fastsoftmax as fs

V = 1_000_000
DRAWS = 1_000_000


@pytest.fixture(scope="module")
def weights():
    counts = 1e9 / torch.arange(1, V + 1, dtype=torch.float64) ** 1.1
    return counts[torch.randperm(V, generator=torch.Generator().manual_seed(0))] ** 0.75


@pytest.fixture(scope="module")
def sampler(weights):
    return fs.AliasSampler(weights)


def test_alias_build(benchmark, weights):
    table = benchmark(fs.ops.alias_build, weights)
    assert table[0].numel() == V


def test_alias_draws(benchmark, sampler):
    draws = benchmark(sampler.sample, DRAWS)
    assert draws.numel() == DRAWS and int(draws.max()) < V


def test_multinomial_draws(benchmark, sampler):
    probs = sampler.probs
    draws = benchmark(torch.multinomial, probs, DRAWS, True)
    assert draws.numel() == DRAWS


def test_unique_candidates_8192(benchmark):
    sampler = fs.LogUniformSampler(800_000)
    true = torch.zeros(1, 1, dtype=torch.int64)
    out = benchmark(sampler.candidates, true, 8192)
    assert out.sampled_candidates.unique().numel() == 8192
