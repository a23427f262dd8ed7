"""Property-based tests of the samplers against tests/reference.py: alias tables reproduce
any weights (1e-300..1e300, denormals, zeros, near-equal values), draws equal the numpy
Philox reference value for value, unique candidates equal TensorFlow's rejection loop, expected
counts follow their formulas and, without `unique`, match a simulation."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import fastsoftmax as fs
import reference as R
from fastsoftmax import ops
from fuzz_support import passed

KINDS = {"alias": ops.KIND_ALIAS, "uniform": ops.KIND_UNIFORM, "log_uniform": ops.KIND_LOG_UNIFORM}
seeds = st.integers(-(2**63), 2**63 - 1)

# ---------------------------------------------------------------------------------------
# weights
# ---------------------------------------------------------------------------------------

wide = st.builds(lambda m, e: m * 10.0**e, st.floats(1.0, 9.99), st.integers(-300, 300))
denormal = st.floats(5e-324, 2.2e-308)
moderate = st.floats(1e-3, 1e3)


@st.composite
def weight_lists(draw, max_size=48):
    """Non-negative finite weights with a positive sum, float64 (as a list)."""
    style = draw(st.sampled_from(["wide", "near_equal", "denormal", "mixed", "integers"]))
    size = st.integers(1, max_size)
    if style == "near_equal":  # a run of values a few ulps apart, some zeros
        base = draw(st.one_of(moderate, wide))
        ks = draw(st.lists(st.integers(-3, 3), min_size=1, max_size=max_size))
        w = [0.0 if k == -3 else base * (1.0 + k * 2.0**-52) for k in ks]
    elif style == "integers":  # word counts
        w = [float(x) for x in draw(st.lists(st.integers(0, 10**6), min_size=1,
                                             max_size=max_size))]
    else:
        elements = {"wide": st.one_of(wide, st.just(0.0)),
                    "denormal": st.one_of(denormal, st.just(0.0)),
                    "mixed": st.one_of(wide, denormal, moderate, st.just(0.0))}[style]
        w = draw(st.lists(elements, min_size=draw(size) // 2 + 1, max_size=max_size))
    if not any(x > 0 for x in w):
        w[draw(st.integers(0, len(w) - 1))] = draw(st.one_of(wide, denormal, moderate))
    return w


def table_error(weights: torch.Tensor, prob: torch.Tensor, alias: torch.Tensor):
    """(implied distribution, target, allowed error): each class within a few float32
    roundings of its own mass (the exactness promise of docs/samplers.md)."""
    w = weights.double()
    target = (w / w.max()) / (w / w.max()).sum()
    implied = R.alias_implied_probs(prob, alias)
    tol = 4e-7 * target + 1e-7 / w.numel() * (target > 0)
    return implied, target, tol


@given(weights=weight_lists())
def test_alias_table_reproduces_weights(weights):
    w = torch.tensor(weights, dtype=torch.float64)
    sampler = fs.AliasSampler(w)
    prob, alias = sampler._table
    implied, target, tol = table_error(w, prob, alias)
    assert bool(((implied - target).abs() <= tol).all()), float(((implied - target).abs() - tol).max())
    assert bool((implied[w == 0] == 0).all()), "a zero weight got mass"
    assert bool(((prob >= 0) & (prob <= 1)).all())
    assert bool(((alias >= 0) & (alias < len(weights))).all())
    # The build is a fixed-order computation: the same table every time.
    again = ops.alias_build(w)
    assert torch.equal(again[0], prob) and torch.equal(again[1], alias)
    # float32 weights (when they fit) build the table of their float64 values.
    w32 = w.float()
    if bool(torch.isfinite(w32).all()) and bool((w32 > 0).any()):
        t32 = ops.alias_build(w32)
        t64 = ops.alias_build(w32.double())
        assert torch.equal(t32[0], t64[0]) and torch.equal(t32[1], t64[1])
    # The distribution the sampler reports sums to 1, and the feasibility of unique draws
    # counts exactly the classes the table can draw.
    assert abs(float(sampler.probs.double().sum()) - 1.0) <= 1e-6
    log_p = sampler.log_prob(torch.arange(len(weights)))
    assert abs(float(log_p.double().exp().sum()) - 1.0) <= 1e-6
    drawable = int((implied > 0).sum())
    assert sampler._num_possible == drawable
    with pytest.raises(ValueError, match="distinct"):
        sampler.candidates(torch.zeros(1, 1, dtype=torch.int64), drawable + 1, unique=True)
    passed("alias_build")


# ---------------------------------------------------------------------------------------
# draws
# ---------------------------------------------------------------------------------------


def make_sampler(kind: str, num_classes: int, weights=None):
    if kind == "alias":
        return fs.AliasSampler(torch.tensor(weights, dtype=torch.float64))
    if kind == "uniform":
        return fs.UniformSampler(num_classes)
    return fs.LogUniformSampler(num_classes)


@st.composite
def samplers(draw, max_table=48, max_v=2**31 - 1):
    kind = draw(st.sampled_from(list(KINDS)))
    if kind == "alias":
        weights = draw(weight_lists(max_table))
        return kind, make_sampler(kind, len(weights), weights)
    # No table: any V up to the largest supported, small ones more often.
    v = draw(st.one_of(st.integers(1, min(64, max_v)), st.integers(1, max_v)))
    return kind, make_sampler(kind, v)


def assert_draws_equal_reference(kind, sampler, seed, first, got):
    prob, alias = sampler._table
    table = (prob.numpy(), alias.numpy()) if kind == "alias" else (None, None)
    want = R.draw_reference(KINDS[kind], seed, 0, first, got.size, sampler.num_classes, *table)
    if kind != "log_uniform":
        np.testing.assert_array_equal(got, want)
        return
    # Log-uniform draws floor(exp(u log(V + 1))) - 1: libm's and numpy's exp may differ in
    # the last ulp, which moves a draw only when exp(...) lies that close to an integer.
    index = np.arange(first, first + got.size, dtype=np.uint64)
    w0, w1, _, _ = R.philox4x32_10(index & R.M32, index >> np.uint64(32), 0, seed)
    x = np.exp(R._uniform_double(w0, w1) * math.log1p(sampler.num_classes))
    near_boundary = np.abs(x - np.round(x)) <= 1e-12 * x
    bad = (got != want) & ~(near_boundary & (np.abs(got - want) == 1))
    assert not bad.any(), (got[bad], want[bad])


@given(kind_sampler=samplers(), seed=seeds,
       shape=st.lists(st.integers(0, 7), min_size=0, max_size=3), generator_seed=seeds)
def test_draws_equal_reference_and_repeat(kind_sampler, seed, shape, generator_seed):
    kind, sampler = kind_sampler
    prob, alias = sampler._table
    count = math.prod(shape)
    got = ops.sample(prob, alias, torch.tensor([seed]), sampler.num_classes, KINDS[kind],
                     (count,)).numpy()
    assert_draws_equal_reference(kind, sampler, seed, 0, got)
    # The public API: shape kept, ids in range, and a pure function of the generator state.
    a = sampler.sample(*shape, generator=torch.Generator().manual_seed(generator_seed))
    b = sampler.sample(*shape, generator=torch.Generator().manual_seed(generator_seed))
    assert a.shape == tuple(shape) and a.dtype == torch.int64
    assert torch.equal(a, b)
    assert bool(((a >= 0) & (a < sampler.num_classes)).all())
    key = ops.draw_seed(torch.Generator().manual_seed(generator_seed), torch.device("cpu"))
    assert_draws_equal_reference(kind, sampler, int(key), 0, a.reshape(-1).numpy())
    if kind != "alias" and sampler.num_classes <= 100_000:
        p = sampler.log_prob(torch.arange(sampler.num_classes)).double().exp()
        assert abs(float(p.sum()) - 1.0) <= 1e-5
    passed("sample")


# ---------------------------------------------------------------------------------------
# candidates
# ---------------------------------------------------------------------------------------


@st.composite
def candidate_cases(draw):
    """A sampler, true classes [N, T] (N may be 0) and a feasible num_sampled: at most the
    number of classes with mass >= 1 / (8 V), so the rejection loop ends quickly."""
    kind, sampler = draw(samplers(max_table=40, max_v=5000))
    V = sampler.num_classes
    if kind == "alias":
        mass = R.alias_implied_probs(*sampler._table)
        easy = int((mass >= 1.0 / (8 * V)).sum())
    else:
        easy = min(V, 64) if kind == "uniform" else min(V, 16)
    num_sampled = draw(st.integers(1, max(1, min(easy, 24))))
    n, t = draw(st.integers(0, 4)), draw(st.integers(1, 3))
    true = draw(st.lists(st.integers(0, V - 1), min_size=n * t, max_size=n * t))
    return kind, sampler, torch.tensor(true, dtype=torch.int64).reshape(n, t), num_sampled


@given(case=candidate_cases(), unique=st.booleans(), generator_seed=seeds)
def test_candidates_equal_reference(case, unique, generator_seed):
    kind, sampler, true, num_sampled = case
    out = sampler.candidates(true, num_sampled, unique=unique,
                             generator=torch.Generator().manual_seed(generator_seed))
    key = int(ops.draw_seed(torch.Generator().manual_seed(generator_seed), torch.device("cpu")))
    prob, alias = sampler._table
    table = (prob.numpy(), alias.numpy()) if kind == "alias" else (None, None)
    got = out.sampled_candidates.numpy()
    if unique:
        want, tries = R.unique_reference(KINDS[kind], key, sampler.num_classes, num_sampled,
                                         *table)
        np.testing.assert_array_equal(got, want)
        assert len(set(got.tolist())) == num_sampled
    else:
        tries = num_sampled
        assert_draws_equal_reference(kind, sampler, key, 0, got)
    p = sampler._prob_of
    assert out.true_expected_count.shape == true.shape
    torch.testing.assert_close(
        out.true_expected_count.double(), R.expected_count(p(true), num_sampled, tries, unique),
        rtol=1e-6, atol=0)
    torch.testing.assert_close(
        out.sampled_expected_count.double(),
        R.expected_count(p(out.sampled_candidates), num_sampled, tries, unique),
        rtol=1e-6, atol=0)
    passed("sample_unique" if unique else "candidates")


@given(kind_sampler=samplers(max_table=32, max_v=64), generator_seed=seeds)
def test_expected_counts_match_simulation(kind_sampler, generator_seed):
    """Without `unique` a candidate set of n draws holds class c Binomial(n, p_c) times, and
    its expected count is n p_c: an exact binomial test per class (Bonferroni over classes,
    1e-9 per example, so that 10^4 examples give no false alarm). With `unique` TensorFlow's
    expected count is an approximation (see docs/reliability.md), checked against its formula above."""
    kind, sampler = kind_sampler
    V, n = sampler.num_classes, 20_000
    classes = torch.arange(V).unsqueeze(0)
    out = sampler.candidates(classes, n, unique=False,
                             generator=torch.Generator().manual_seed(generator_seed))
    counts = torch.bincount(out.sampled_candidates, minlength=V).numpy()
    expected = out.true_expected_count[0].double().numpy()
    q = np.clip(expected / n, 0.0, 1.0)
    assert (counts[q == 0] == 0).all(), "a class of zero probability was drawn"
    lower = stats.binom.cdf(counts, n, q)
    upper = stats.binom.sf(counts - 1, n, q)
    p_value = np.minimum(1.0, 2 * np.minimum(lower, upper))
    assert p_value[q > 0].min() >= 1e-9 / V, (counts, expected)
    passed("candidates_vs_simulation")
