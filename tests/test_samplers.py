"""The samplers' distributions: each draw is a fixed function of (seed, index) equal to the
numpy reference, alias tables reproduce their weights exactly (adversarial, random and Zipf
weights), and ten million draws pass a goodness-of-fit test. Candidate semantics,
determinism, the API, bad input, opcheck and torch.compile are in tests/test_sampler_api.py."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

import fastsoftmax as fs
from fastsoftmax import ops

import reference as R

from sampler_helpers import KINDS, make_sampler, zipf_counts


def adversarial_weights():
    """Weights that break naive alias builds: huge dynamic range, zeros, denormals, one class
    holding nearly all mass, long runs of equal weights."""
    return {
        "single": torch.tensor([3.0]),
        "one_heavy": torch.cat([torch.tensor([1e12]), torch.full((999,), 1e-3)]),
        "zeros_inside": torch.tensor([0.0, 5.0, 0.0, 0.0, 1.0, 0.0, 2.0, 0.0]),
        "equal": torch.full((1000,), 7.0),
        "dynamic_range": torch.logspace(-300, 300, 601, dtype=torch.float64),
        "denormals": torch.tensor([5e-324, 1e-320, 2e-310, 1e-308], dtype=torch.float64),
        "two_spikes": torch.cat([torch.full((500,), 1e-9), torch.tensor([1.0, 1.0])]),
    }


def pooled_chisquare(observed: np.ndarray, expected: np.ndarray, min_expected=20.0):
    """Chi-square test with classes of small expectation pooled (in order of expectation) into
    bins of at least `min_expected`, so the chi-square approximation holds for Zipf tails."""
    order = np.argsort(expected)
    obs, exp = observed[order], expected[order]
    bins_o, bins_e, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(obs, exp):
        acc_o += o
        acc_e += e
        if acc_e >= min_expected:
            bins_o.append(acc_o)
            bins_e.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0:
        if bins_e:
            bins_o[-1] += acc_o
            bins_e[-1] += acc_e
        else:
            bins_o.append(acc_o)
            bins_e.append(acc_e)
    bins_o, bins_e = np.array(bins_o), np.array(bins_e)
    if len(bins_e) < 2:
        return 1.0
    stat = ((bins_o - bins_e) ** 2 / bins_e).sum()
    return stats.chi2.sf(stat, len(bins_e) - 1)


# --- the draw is a fixed function of (seed, index) ---------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
def test_draws_equal_numpy_reference(kind, device):
    sampler = make_sampler(kind, 5000, device)
    seed = torch.tensor([-1234567890123456789], device=device)
    prob, alias = sampler._table
    got = ops.sample(prob, alias, seed, sampler.num_classes, KINDS[kind], (3000,)).cpu().numpy()
    table = (prob.cpu().numpy(), alias.cpu().numpy()) if kind == "alias" else (None, None)
    want = R.draw_reference(KINDS[kind], -1234567890123456789, 0, 0, 3000, 5000, *table)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", list(KINDS))
def test_unique_candidates_equal_reference_loop(kind, device):
    sampler = make_sampler(kind, 3000, device)
    seed = torch.tensor([987654321], device=device)
    prob, alias = sampler._table
    got, tries = ops.sample_unique(prob, alias, seed, 3000, KINDS[kind], 1500)
    table = (prob.cpu().numpy(), alias.cpu().numpy()) if kind == "alias" else (None, None)
    want, want_tries = R.unique_reference(KINDS[kind], 987654321, 3000, 1500, *table)
    np.testing.assert_array_equal(got.cpu().numpy(), want)
    assert int(tries) == want_tries


# --- alias tables reproduce the weights ------------------------------------------------------


def assert_table_exact(weights: torch.Tensor):
    sampler = fs.AliasSampler(weights)
    w = weights.double()
    target = w / w.sum()
    implied = R.alias_implied_probs(*sampler._table)
    # float32 thresholds: each class is off by a few float32 roundings of its own mass.
    tol = 4e-7 * target + 1e-7 / weights.numel() * (target > 0)
    err = (implied - target).abs()
    assert bool((err <= tol).all()), f"worst error {float((err - tol).max())}"
    assert bool((implied[target == 0] == 0).all()), "zero-weight classes must get no mass"
    prob, alias = sampler._table
    assert prob.dtype == torch.float32 and alias.dtype == torch.int32
    assert bool(((prob >= 0) & (prob <= 1)).all())
    assert bool(((alias >= 0) & (alias < weights.numel())).all())


@pytest.mark.parametrize("name", list(adversarial_weights()))
def test_alias_table_exact_adversarial(name):
    assert_table_exact(adversarial_weights()[name])


@pytest.mark.parametrize("v", [1, 2, 7, 1000, 100_000])
def test_alias_table_exact_random(v):
    g = torch.Generator().manual_seed(v)
    assert_table_exact(torch.rand(v, generator=g, dtype=torch.float64) ** 8)


def test_alias_table_exact_zipf_ten_million():
    assert_table_exact(zipf_counts(10_000_000, s=1.3))


def test_alias_table_float32_and_float64_input_agree():
    w = zipf_counts(10_000).float()
    a = fs.AliasSampler(w)._table
    b = fs.AliasSampler(w.double())._table
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# --- goodness of fit at scale ------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind,v", [("alias", 1_000_000), ("uniform", 1_000_000), ("log_uniform", 1_000_000),
               ("alias", 1), ("log_uniform", 1)]
)
def test_goodness_of_fit_ten_million_draws(kind, v):
    torch.manual_seed(2024)
    sampler = make_sampler(kind, v, "cpu")
    n = 10_000_000
    draws = sampler.sample(n)
    assert draws.dtype == torch.int64 and draws.shape == (n,)
    assert int(draws.min()) >= 0 and int(draws.max()) < v
    observed = torch.bincount(draws, minlength=v).double()
    p = (R.log_uniform_probs(v) if kind == "log_uniform" else sampler.probs.double())
    assert pooled_chisquare(observed.numpy(), (n * p).numpy()) > 1e-4
    # Total variation against what sampling noise alone gives (E|X - np| ~ sqrt(2 n p / pi)).
    tv = 0.5 * float((observed / n - p).abs().sum())
    noise = 0.5 * float(torch.sqrt(2 * n * p * (1 - p) / math.pi).sum()) / n
    assert tv <= 1.05 * noise + 1e-4, (tv, noise)


@pytest.mark.parametrize("name", ["one_heavy", "zeros_inside", "dynamic_range", "two_spikes"])
def test_goodness_of_fit_adversarial(name):
    torch.manual_seed(7)
    w = adversarial_weights()[name].double()
    sampler = fs.AliasSampler(w)
    n = 10_000_000
    observed = torch.bincount(sampler.sample(n), minlength=w.numel()).double()
    p = w / w.sum()
    assert bool((observed[p == 0] == 0).all())
    assert pooled_chisquare(observed.numpy(), (n * p).numpy()) > 1e-4


def test_wrong_distribution_is_detected():
    # The fit test must be able to fail: draws from a sampler whose weights differ by 1%.
    torch.manual_seed(3)
    w = zipf_counts(1000)
    w_off = w.clone()
    w_off[:500] *= 1.01
    observed = torch.bincount(fs.AliasSampler(w_off).sample(10_000_000), minlength=1000).double()
    p = w / w.sum()
    assert pooled_chisquare(observed.numpy(), (10_000_000 * p).numpy()) < 1e-6
