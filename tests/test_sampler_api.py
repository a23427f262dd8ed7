"""The samplers' behaviour around the draws: TensorFlow candidate semantics (shapes, counts,
expected counts), determinism and generators, the CPU and CUDA drawing the same ids, the
Python API (probs, log_prob, .to), bad input, opcheck and torch.compile. The distributions
themselves are tested in tests/test_samplers.py."""

from types import SimpleNamespace

import pytest
import torch

import fastsoftmax as fs
from fastsoftmax import ops
from conftest import requires_cuda

import reference as R

from sampler_helpers import KINDS, make_sampler, zipf_counts


# --- TensorFlow candidate semantics -----------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("unique", [True, False])
def test_candidates_shapes_and_counts(kind, unique, device):
    sampler = make_sampler(kind, 500, device)
    true = torch.tensor([[0, 3, 499], [7, 7, 1]], device=device)
    out = sampler.candidates(true, 64, unique=unique, generator=torch.Generator().manual_seed(1))
    assert out.sampled_candidates.shape == (64,) and out.sampled_candidates.dtype == torch.int64
    assert out.true_expected_count.shape == (2, 3)
    assert out.sampled_expected_count.shape == (64,)
    assert out.true_expected_count.dtype == torch.float32
    if unique:
        assert out.sampled_candidates.unique().numel() == 64
    p_true = sampler.probs.double()[true].cpu()
    p_sampled = sampler.probs.double()[out.sampled_candidates].cpu()
    if unique:
        # Recover num_tries by replaying the rejection loop.
        table = sampler._table
        seed = int(torch.randint(-(2**63), 2**63 - 1, (1,), generator=torch.Generator().manual_seed(1)))
        tab = (table[0].cpu().numpy(), table[1].cpu().numpy()) if kind == "alias" else (None, None)
        _, tries = R.unique_reference(KINDS[kind], seed, 500, 64, *tab)
    else:
        tries = 64
    torch.testing.assert_close(out.true_expected_count.cpu().double(),
                               R.expected_count(p_true, 64, tries, unique), rtol=1e-6, atol=0)
    torch.testing.assert_close(out.sampled_expected_count.cpu().double(),
                               R.expected_count(p_sampled, 64, tries, unique), rtol=1e-6, atol=0)


def test_expected_counts_match_simulation():
    """Average occurrences over many candidate sets agree with the expected counts."""
    sampler = fs.UnigramSampler(zipf_counts(200, s=1.0))
    g = torch.Generator().manual_seed(11)
    classes = torch.arange(200).unsqueeze(0)
    for unique in (False, True):
        hits = torch.zeros(200, dtype=torch.float64)
        predicted = torch.zeros(200, dtype=torch.float64)
        for _ in range(4000):
            out = sampler.candidates(classes, 20, unique=unique, generator=g)
            hits += torch.bincount(out.sampled_candidates, minlength=200).double()
            predicted += out.true_expected_count[0].double()
        # Totals of binomial/Bernoulli counts: variance <= mean, so this z is conservative.
        z = (hits - predicted) / predicted.sqrt()
        assert float(z.abs().max()) < 5.0, (unique, float(z.abs().max()))


def test_unique_too_many_samples_is_an_error():
    sampler = fs.AliasSampler(torch.tensor([1.0, 0.0, 2.0, 0.0]))
    with pytest.raises(ValueError, match="distinct"):
        sampler.candidates(torch.tensor([[0]]), 3, unique=True)
    out = sampler.candidates(torch.tensor([[0]]), 2, unique=True)
    assert sorted(out.sampled_candidates.tolist()) == [0, 2]
    assert sampler.candidates(torch.tensor([[0]]), 3, unique=False).sampled_candidates.numel() == 3


# --- determinism and generators ---------------------------------------------------------------


def test_manual_seed_reproduces_and_streams_advance():
    sampler = fs.UnigramSampler(zipf_counts(1000))
    torch.manual_seed(5)
    a, b = sampler.sample(100), sampler.sample(100)
    torch.manual_seed(5)
    assert torch.equal(sampler.sample(100), a) and torch.equal(sampler.sample(100), b)
    assert not torch.equal(a, b)


def test_explicit_generator_is_used_and_default_untouched():
    sampler = fs.LogUniformSampler(10_000)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    x = sampler.sample(4, 5, generator=torch.Generator().manual_seed(9))
    assert torch.equal(torch.get_rng_state(), state)
    assert x.shape == (4, 5)
    assert torch.equal(x, sampler.sample((4, 5), generator=torch.Generator().manual_seed(9)))


def test_cuda_generator_is_refused():
    # Without a GPU a stand-in with a CUDA device exercises the same check.
    gen = torch.Generator("cuda") if torch.cuda.is_available() else SimpleNamespace(
        device=torch.device("cuda"))
    with pytest.raises(ValueError, match="CPU torch.Generator"):
        fs.UniformSampler(10).sample(3, generator=gen)


@requires_cuda
@pytest.mark.parametrize("kind", list(KINDS))
def test_cpu_and_cuda_draw_the_same_ids(kind):
    cpu = make_sampler(kind, 100_000, "cpu")
    cuda = make_sampler(kind, 100_000, "cuda")  # built on the GPU
    moved = cpu.to("cuda")
    for t_cpu, t_gpu in zip(cpu._table, cuda._table):
        assert torch.equal(t_cpu, t_gpu.cpu()), "CPU and CUDA builds must be bit-identical"
    for other in (cuda, moved):
        torch.manual_seed(42)
        a = cpu.sample(1_000_000)
        torch.manual_seed(42)
        assert torch.equal(a, other.sample(1_000_000).cpu())
        g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        true = torch.tensor([[1, 2]])
        x = cpu.candidates(true, 512, generator=g1)
        y = other.candidates(true.cuda(), 512, generator=g2)
        for u, w in zip(x, y):
            assert torch.equal(u, w.cpu())


# --- API -------------------------------------------------------------------------------------


def test_probs_log_prob_and_to():
    counts = torch.tensor([10.0, 0.0, 5.0, 1.0])
    s = fs.UnigramSampler(counts, power=0.5, num_reserved_ids=1)
    w = counts.double() ** 0.5
    w[0] = 0
    torch.testing.assert_close(s.probs.double(), w / w.sum(), rtol=1e-6, atol=0)
    assert float(s.probs.sum()) == pytest.approx(1.0, abs=1e-6)
    torch.testing.assert_close(s.log_prob(torch.tensor([2, 3])), (w / w.sum())[2:].log().float())
    assert s.num_classes == 4 and s.device.type == "cpu"
    assert int((s.sample(100_000) == 0).sum()) == 0  # reserved id never drawn
    assert s.to("cpu") is s
    lu = fs.LogUniformSampler(50)
    torch.testing.assert_close(lu.probs.double(), R.log_uniform_probs(50).float().double())
    torch.testing.assert_close(fs.UniformSampler(8).probs, torch.full((8,), 0.125))


def test_to_meta_device_keeps_distribution():
    s = fs.UnigramSampler(zipf_counts(100))
    m = s.to("meta")
    assert m.device.type == "meta" and m._table[0].device.type == "meta"
    assert s.device.type == "cpu"


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "weights,exc,match",
    [
        (torch.tensor([1.0, -1.0]), ValueError, "non-negative"),
        (torch.tensor([1.0, float("nan")]), ValueError, "finite"),
        (torch.tensor([1.0, float("inf")]), ValueError, "finite"),
        (torch.zeros(5), ValueError, "all be zero"),
        (torch.zeros(0), ValueError, "empty"),
        (torch.ones(2, 3), ValueError, "1-D"),
        (torch.tensor([True, False]), TypeError, "real"),
    ],
)
def test_bad_weights(weights, exc, match):
    with pytest.raises(exc, match=match):
        fs.AliasSampler(weights)


def test_bad_counts_and_arguments():
    with pytest.raises(ValueError, match="non-negative"):
        fs.UnigramSampler([3, -1, 2])
    with pytest.raises(ValueError, match="num_reserved_ids"):
        fs.UnigramSampler([3, 1], num_reserved_ids=5)
    with pytest.raises(ValueError, match="all be zero"):
        fs.UnigramSampler([3, 1], num_reserved_ids=2)
    with pytest.raises(ValueError, match="positive"):
        fs.UniformSampler(0)
    with pytest.raises(TypeError, match="int"):
        fs.LogUniformSampler(2.5)
    with pytest.raises(ValueError, match="non-negative ints"):
        fs.UniformSampler(3).sample(-1)


def test_bad_ids():
    s = fs.LogUniformSampler(10)
    with pytest.raises(ValueError, match=r"\[0, 10\)"):
        s.log_prob(torch.tensor([3, 10]))
    with pytest.raises(ValueError, match=r"\[0, 10\)"):
        s.candidates(torch.tensor([[-1]]), 2)
    with pytest.raises(TypeError, match="int64"):
        s.candidates(torch.tensor([[1.0]]), 2)
    with pytest.raises(TypeError, match="a tensor or a list of int ids, got str"):
        s.log_prob("ab")  # lists of ids are accepted (tests/test_sampler_inputs.py)
    with pytest.raises(ValueError, match="positive"):
        s.candidates(torch.tensor([[1]]), 0)
    with pytest.raises(TypeError, match="int"):
        s.candidates(torch.tensor([[1]]), 2.0)


def test_op_level_checks():
    seed = torch.tensor([1])
    with pytest.raises(TypeError, match="seed"):
        ops.sample(torch.empty(0), torch.empty(0), torch.tensor([1.0]), 5, 1, (3,))
    with pytest.raises(ValueError, match="kind"):
        ops.sample(torch.empty(0), torch.empty(0), seed, 5, 9, (3,))
    with pytest.raises(ValueError, match="num_classes"):
        ops.sample(torch.ones(4), torch.zeros(4, dtype=torch.int32), seed, 5, 0, (3,))
    with pytest.raises(ValueError, match="num_sampled"):
        ops.sample_unique(torch.empty(0), torch.empty(0), seed, 5, 1, 6)


# --- torch.library / torch.compile --------------------------------------------------------------


def test_opcheck(device):
    op = fs.ops._overload  # opcheck takes the OpOverload, not ops._op's wrapper
    w = zipf_counts(300).to(device)
    torch.library.opcheck(op("alias_build"), (w,))
    prob, alias = ops.alias_build(w)
    seed = torch.tensor([77], device=device)
    for kind in (0, 1, 2):
        torch.library.opcheck(op("sample"),
                              (prob, alias, seed, 300, kind, [4, 5]))
        torch.library.opcheck(op("sample_unique"),
                              (prob, alias, seed, 300, kind, 50))


def test_torch_compile_fullgraph_sample():
    sampler = fs.UnigramSampler(zipf_counts(1000))

    @torch.compile(fullgraph=True)  # inductor: fake kernels, no graph break
    def negatives(x):
        return x + sampler.sample(x.shape[0], 5)

    out = negatives(torch.zeros(8, 5, dtype=torch.int64))
    assert out.shape == (8, 5) and int(out.min()) >= 0 and int(out.max()) < 1000
