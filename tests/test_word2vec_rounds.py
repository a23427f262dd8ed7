"""word2vec's lockstep rounds (round_size > 0, csrc/common/word2vec_math.h), the CUDA
trainer's update order: the op against the float64 reference on the CPU replay and on the
emulated CUDA kernels, the emulated kernels against the replay (the same model whatever the
warps and their order), the deterministic mode bit for bit, a diverged update as NaN, and the
bad arguments."""

import numpy as np
import pytest
import torch

from fastsoftmax import ClassTree, UnigramSampler, ops

import reference as R

from conftest import CUDA_EMU, DEVICES, backend_context
from cuda_emulator import emulated_cuda
from w2v_helpers import token_batch

requires_emulator = pytest.mark.skipif(not CUDA_EMU, reason="no emulated CUDA build")


@pytest.fixture(params=DEVICES)
def backend(request):
    """(name, device): the CPU replay, the emulated CUDA kernels or a real GPU."""
    device, enter = backend_context(request.param)
    with enter():
        yield request.param, device


def _corpus(seed=7, V=40):
    """Zipfian counts (so frequent rows take many updates a round), sentences of varied
    lengths with an empty one, and every table away from zero."""
    rng = np.random.default_rng(seed)
    counts = (1000 / np.arange(1, V + 1)).astype(np.int64) + 1
    p = counts / counts.sum()
    sentences = [rng.choice(V, n, p=p) for n in (19, 0, 7, 26, 1, 13, 30, 11)]
    before = np.concatenate(([0], np.cumsum([len(s) for s in sentences])[:-1])).tolist()
    return rng, counts, sentences, before


def _tables(rng, V, D, negative, hs):
    return [rng.random((V, D), dtype=np.float32) - 0.5,
            (rng.random((V if negative else 0, D), dtype=np.float32) - 0.5) * 0.5,
            (rng.random((V - 1 if hs else 0, D), dtype=np.float32) - 0.5) * 0.5]


def _train(tables, counts, sentences, before, *, sg, cbow_mean, negative, hs, round_size,
           workers=1, alpha=0.4, lockf=None, device="cpu"):
    """Runs the op on copies of `tables`; returns (tables after, stats)."""
    V, D = tables[0].shape
    prob, alias = UnigramSampler(torch.tensor(counts, dtype=torch.float64), 0.75)._table
    tree = ClassTree.huffman(torch.tensor(counts))
    paths, offsets = ops.huffman_paths(tree.links, tree.lengths)
    t = [torch.tensor(x, device=device) for x in tables]
    tokens, ends = (x.to(device) for x in token_batch(sentences))
    keep = torch.linspace(0.6, 1.0, V, device=device)
    extra = dict(syn1=t[2], hs_paths=paths.to(device), hs_offsets=offsets.to(device)) \
        if hs else {}
    stats = ops.word2vec_train(
        t[0], t[1], tokens, ends, torch.tensor(before, device=device), keep, prob.to(device),
        alias.to(device), 9, 300, sg, cbow_mean, 3, negative, True, alpha, 0.02, 150.0,
        workers, round_size=round_size, lockf=None if lockf is None else lockf.to(device),
        **extra)
    return [x.cpu().numpy() for x in t], stats.cpu()


CASES = [(1, 1, 5, 0), (0, 1, 5, 0), (0, 0, 5, 0), (1, 1, 0, 1), (0, 1, 0, 1), (1, 1, 3, 1),
         (0, 1, 3, 1)]


@pytest.mark.parametrize("sg,cbow_mean,negative,hs", CASES)
def test_rounds_match_reference(backend, sg, cbow_mean, negative, hs):
    name, device = backend
    rng, counts, sentences, before = _corpus()
    tables = _tables(rng, len(counts), 12, negative, hs)
    lockf = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.25])  # words 1, 6, 11, ... locked
    # Rounds of 9 centres: several rounds, one cut inside a sentence.
    got, stats = _train(tables, counts, sentences, before, sg=sg, cbow_mean=cbow_mean,
                        negative=negative, hs=hs, round_size=9,
                        workers=1 if name == "cpu" else 64, lockf=lockf, device=device)
    prob, alias = UnigramSampler(torch.tensor(counts, dtype=torch.float64), 0.75)._table
    codes, points = R.huffman_reference(counts.tolist())
    ref = R.w2v_rounds_reference(
        tables[0], tables[1], sentences, before, torch.linspace(0.6, 1.0, len(counts)).numpy(),
        prob.numpy(), alias.numpy(), round_size=9, seed=9, first_token=300, sg=sg,
        cbow_mean=cbow_mean, window=3, negative=negative, shrink=True, alpha=0.4,
        min_alpha=0.02, total_words=150.0, syn1_hs=tables[2] if hs else None, codes=codes,
        points=points, lockf=lockf.numpy())
    r0, r1, loss, examples, kept = ref[:5]
    assert examples > 0 and kept > 27  # more than three rounds of 9
    assert stats[1].item() == examples and stats[2].item() == kept
    assert stats[0].item() == pytest.approx(loss, rel=1e-5)
    np.testing.assert_allclose(got[0], r0, atol=2e-5)
    np.testing.assert_array_equal(got[0][1::5], tables[0][1::5])  # locked rows stay
    if negative:
        np.testing.assert_allclose(got[1], r1, atol=2e-5)
    if hs:
        np.testing.assert_allclose(got[2], ref[5], atol=2e-5)
    assert not np.allclose(r0, tables[0])


def test_rounds_tend_to_the_sequential_order():
    # The snapshot of a round departs from the sequential order the more centres it holds:
    # with one centre a round only the updates within a centre differ. Guards against the op
    # quietly training the sequential order, or rounds of another size.
    rng, counts, sentences, before = _corpus()
    tables = _tables(rng, len(counts), 12, 5, 0)
    args = dict(sg=0, cbow_mean=1, negative=5, hs=0, alpha=0.05)
    seq = _train(tables, counts, sentences, before, round_size=0, **args)[0][0]
    moved = np.abs(seq - tables[0]).max()
    gaps = [np.abs(_train(tables, counts, sentences, before, round_size=r, **args)[0][0] - seq)
            .max() for r in (1, 5, 50)]
    assert 0 < gaps[0] < gaps[1] < gaps[2] < moved and gaps[0] < 0.02 * moved


@requires_emulator
@pytest.mark.parametrize("sg,cbow_mean,negative,hs", CASES)
def test_emulated_cuda_trains_the_replayed_model(sg, cbow_mean, negative, hs):
    """The CUDA kernels, with any number of warps in any order, train the CPU replay's model
    up to the order of float sums."""
    rng, counts, sentences, before = _corpus(seed=3, V=60)
    tables = _tables(rng, 60, 40, negative, hs)
    args = dict(sg=sg, cbow_mean=cbow_mean, negative=negative, hs=hs, round_size=16)
    replay, replay_stats = _train(tables, counts, sentences, before, **args)
    for workers, policy in ((1, "forward"), (7, "reverse"), (64, "random")):
        with emulated_cuda(policy, seed=workers):
            got, stats = _train(tables, counts, sentences, before, workers=workers, **args)
        for a, b, start in zip(got, replay, tables):
            if a.size:
                assert np.abs(a - b).max() < 2e-5 < np.abs(b - start).max()
        assert torch.equal(stats[1:], replay_stats[1:])
        assert stats[0].item() == pytest.approx(replay_stats[0].item(), rel=1e-6)


@requires_emulator
@pytest.mark.parametrize("sg,hs", [(1, 0), (0, 1)])
def test_deterministic_mode_is_bit_identical(sg, hs):
    """Under torch.use_deterministic_algorithms the CUDA rounds sum in fixed point: the same
    bits whatever the warps and their order. Float atomics (the default) differ in the last
    bits between orders, which shows the test can tell."""
    rng, counts, sentences, before = _corpus(seed=5, V=60)
    tables = _tables(rng, 60, 40, 5, hs)
    args = dict(sg=sg, cbow_mean=1, negative=5, hs=hs, round_size=16)
    runs = {}
    for deterministic in (True, False):
        for workers, policy in ((3, "forward"), (64, "random"), (64, "reverse")):
            torch.use_deterministic_algorithms(deterministic)
            try:
                with emulated_cuda(policy, seed=1):
                    runs[deterministic, workers, policy] = _train(
                        tables, counts, sentences, before, workers=workers, **args)[0]
            finally:
                torch.use_deterministic_algorithms(False)
    same = [runs[True, w, p] for w, p in ((3, "forward"), (64, "random"), (64, "reverse"))]
    for other in same[1:]:
        for a, b in zip(same[0], other):
            np.testing.assert_array_equal(a, b)
    floats = [runs[False, w, p] for w, p in ((3, "forward"), (64, "random"), (64, "reverse"))]
    assert any(not np.array_equal(a, b) for x in floats[1:] for a, b in zip(floats[0], x))


@requires_emulator
def test_diverged_update_is_nan_in_fixed_point():
    """An update too large for the fixed-point sums (here from a huge learning rate) makes its
    row NaN, as float sums propagate a diverged run, never a wrapped-around value."""
    rng, counts, sentences, before = _corpus(seed=5, V=60)
    tables = _tables(rng, 60, 16, 5, 0)
    tables[0] *= 1e4
    torch.use_deterministic_algorithms(True)
    try:
        with emulated_cuda():
            got = _train(tables, counts, sentences, before, sg=1, cbow_mean=1, negative=5, hs=0,
                         round_size=16, workers=8, alpha=1e3)[0]
    finally:
        torch.use_deterministic_algorithms(False)
    assert np.isnan(got[1]).any()
    finite = np.isfinite(got[1]).all(axis=1)
    assert finite.any() and (np.abs(got[1][finite]) < 1e7).all()


def test_rounds_reject_bad_arguments(backend):
    name, device = backend
    rng, counts, sentences, before = _corpus()
    tables = _tables(rng, len(counts), 8, 5, 0)
    args = dict(sg=1, cbow_mean=1, negative=5, hs=0, device=device)
    with pytest.raises(ValueError, match="round_size must be >= 0"):
        _train(tables, counts, sentences, before, round_size=-1, **args)
    if name == "cpu":
        with pytest.raises(ValueError, match="replays lockstep rounds .* on one thread"):
            _train(tables, counts, sentences, before, round_size=4, workers=2, **args)
    else:
        with pytest.raises(ValueError, match="sequential order .* runs on one warp"):
            _train(tables, counts, sentences, before, round_size=0, workers=2, **args)
