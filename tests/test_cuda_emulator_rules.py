"""The emulator's stricter rules, on purpose-built kernels (csrc/emu/emu_selftest_rules.cpp):
races on global memory between warps and between blocks, the fence-and-atomic hand-off from
block to block, blocks interleaved within a launch, static shared memory per block, and the
launch limits and occupancy queries of an H100/H200-like device. The test_emulator_catches_*
tests show that each detector fires on a kernel that breaks its rule; their neighbours show
that the same kernel with the rule kept passes, so the detectors do not fire on everything."""

import numpy as np
import pytest
import torch

from cuda_emulator import AVAILABLE, POLICIES, emulated_cuda

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="emulated CUDA build not built")
POISON = -842150451  # 0xCDCDCDCD
# Races, interleaved blocks and static shared memory per block need the instrumented build
# (an AddressSanitizer build of the emulator has none).
instrumented = pytest.mark.skipif(
    not AVAILABLE or not torch.ops.fastsoftmax_emu.instrumented(),
    reason="the emulated kernels are not instrumented (ASan build)")


def rules(which, threads=64, blocks=1, variant=0, policy="forward", seed=0):
    with emulated_cuda(policy, seed):
        return torch.ops.fastsoftmax_emu.rules(which, threads, blocks, variant)


@instrumented
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("kind,blocks,who", [
    (0, 1, r"warp \d of block \(0,0,0\).*warp \d of block \(0,0,0\)"),  # writes, two warps
    (1, 1, r"warp \d of block \(0,0,0\).*warp \d of block \(0,0,0\)"),  # read vs write
    (3, 6, r"warp 0 of block \(\d,0,0\).*warp 0 of block \(\d,0,0\)"),  # across blocks
    (5, 3, r"warp 0 of block \(\d,0,0\).*warp 0 of block \(\d,0,0\)"),  # same value, still
    (6, 1, r"warp \d of block \(0,0,0\).*warp \d of block \(0,0,0\)"),  # many readers, a write
])
def test_emulator_catches_racy_toy_kernel(policy, kind, blocks, who):
    with pytest.raises(RuntimeError, match=r"data race in kernel race_kernel at global address "
                                           r"0x[0-9a-f]+: " + who):
        rules("race", threads=64, blocks=blocks, variant=kind, policy=policy, seed=1)


@instrumented
@pytest.mark.parametrize("policy", POLICIES)
def test_ordered_or_atomic_sharing_is_no_race(policy):
    out = rules("race", threads=64, blocks=1, variant=2, policy=policy, seed=1)
    t = torch.arange(64)
    assert torch.equal(out[64:128], ((t + 32) % 64).int())  # read after the barrier
    out = rules("race", threads=256, blocks=1, variant=7, policy=policy, seed=1)
    assert out[0] == 5 and (out[1:257] == 0).all()  # 8 warps read, then one writes
    out = rules("race", threads=64, blocks=5, variant=4, policy=policy, seed=1)
    assert out[0] == 5 * 64 and out[2] == 0  # atomics only, and reads of data[1] only
    # One warp may write and read its own lanes' data (lanes are not told apart).
    out = rules("race", threads=32, blocks=1, variant=1, policy=policy, seed=1)
    assert torch.equal(out[32:64], torch.arange(32).int())


@instrumented
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("blocks", [2, 7, 40])
def test_fenced_last_block_hand_off_passes(policy, blocks):
    out = rules("handoff", threads=64, blocks=blocks, variant=0, policy=policy, seed=blocks)
    assert out[blocks] == blocks  # every block arrived
    assert out[blocks + 1] == blocks * (blocks + 1) // 2


@instrumented
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("variant,side", [(1, "writer"), (2, "reader")])
def test_emulator_catches_hand_off_without_fence(policy, variant, side):
    """The count kernel of unique sampling (unique_rounds.cuh) with either __threadfence
    removed: the last block's read of another block's count is then a race."""
    with pytest.raises(RuntimeError, match="data race in kernel handoff_kernel"):
        rules("handoff", threads=64, blocks=7, variant=variant, policy=policy, seed=3)


@instrumented
def test_blocks_interleave_within_a_launch():
    sequential = 0
    for policy in POLICIES:
        for seed in range(3):
            t = rules("tickets", threads=64, blocks=9, policy=policy, seed=seed).view(-1, 2)
            assert sorted(t.flatten().tolist()) == list(range(18))
            sequential += bool((t[:, 1] == t[:, 0] + 1).all())
    assert sequential == 0  # some block overtook another at the barrier in every run


@instrumented
@pytest.mark.parametrize("policy", POLICIES)
def test_static_shared_memory_is_per_block_and_poisoned(policy):
    blocks, threads = 6, 96
    out = rules("static_shared", threads=threads, blocks=blocks, policy=policy, seed=4)
    assert (out[:, 0] == POISON).all()
    t = torch.arange(threads)
    for b in range(blocks):
        assert torch.equal(out[b, 1:], (b * 1000 + (t + 1) % threads).int())


@pytest.mark.parametrize("variant,size,message", [
    (0, 65536, r"grid x is 1 to 2\^31 - 1, y and z 1 to 65535"),
    (1, 0, r"grid x is 1 to 2\^31 - 1"),
])
def test_emulator_catches_over_limit_grid(variant, size, message):
    with pytest.raises(RuntimeError, match="invalid launch: grid_kernel with grid .*" + message):
        rules("launch", threads=32, blocks=size, variant=variant)
    assert rules("launch", threads=32, blocks=300, variant=variant)[0] == 1


def test_emulator_catches_over_limit_block():
    with pytest.raises(RuntimeError, match="a block has 1 to 1024 threads"):
        rules("launch", threads=1025, blocks=1, variant=0)
    assert rules("launch", threads=1024, blocks=1, variant=0)[0] == 1


def test_emulator_catches_shared_memory_over_budget_without_opt_in():
    with pytest.raises(RuntimeError, match=r"asks for 49153 bytes of dynamic shared memory, "
                                           r"above the kernel's 49152 \(48 KiB without the opt-in"):
        rules("launch", threads=64, blocks=48 * 1024 + 1, variant=2)
    rules("launch", threads=64, blocks=48 * 1024, variant=2)  # the default limit itself
    # With the opt-in a block may take up to 227 KiB, no more.
    assert torch.equal(rules("launch", threads=64, blocks=100 * 1024, variant=3),
                       torch.arange(64).int())
    with pytest.raises(RuntimeError, match="cudaFuncSetAttribute refused"):
        rules("launch", threads=64, blocks=227 * 1024 + 1, variant=3)


@pytest.mark.parametrize("threads,smem,optin,blocks", [
    (256, 0, 0, 8),             # 2048 threads an SM
    (32, 0, 0, 32),             # 32 blocks an SM
    (1024, 0, 0, 2),
    (1000, 0, 0, 2),            # whole warps
    (256, 32 * 1024, 0, 6),     # 228 KiB / (32 KiB + 1 KiB reserved)
    (256, 48 * 1024 + 1, 0, 0),  # above 48 KiB without the opt-in: cannot launch
    (1025, 0, 0, 0),            # too many threads
    (128, 100 * 1024, 1, 2),    # opted in (test above): 228 / 101
])
def test_occupancy_query_answers_from_its_arguments(threads, smem, optin, blocks):
    if optin:  # the opt-in is the function's attribute: set it here too
        rules("launch", threads=64, blocks=100 * 1024, variant=3)
    got = rules("occupancy", threads=threads, blocks=smem, variant=optin)
    assert got.tolist() == [blocks, 0]


def test_emulator_word2vec_with_wide_vectors_asks_occupancy_for_its_launch():
    """word2vec's rounds with D = 2048 keep each warp's scratch in global memory and launch
    with no dynamic shared memory; the grid is sized by an occupancy query that must ask
    about that launch, not about 4 warps x 2 x D floats (64 KiB, which cannot launch)."""
    from fastsoftmax import UnigramSampler, ops

    V, D = 12, 2048
    rng = np.random.default_rng(0)
    counts = np.arange(V, 0, -1) * 10
    prob, alias = UnigramSampler(torch.tensor(counts, dtype=torch.float64), 0.75)._table
    tokens = torch.tensor(rng.integers(0, V, 24), dtype=torch.int32)
    ends = torch.tensor([10, 24])
    syn0 = torch.tensor(rng.random((V, D), dtype=np.float32) - 0.5)
    syn1neg = torch.zeros(V, D)
    runs = []
    for enter in (emulated_cuda, None):
        tables = [syn0.clone(), syn1neg.clone()]
        args = (tables[0], tables[1], tokens, ends, torch.tensor([0, 10]), torch.ones(V), prob,
                alias, 9, 0, 1, 1, 2, 3, True, 0.025, 0.001, 24.0, 4 if enter else 1)
        if enter:
            with enter():
                stats = ops.word2vec_train(*args, round_size=4)
        else:
            stats = ops.word2vec_train(*args, round_size=4)
        runs.append((tables, stats))
    (got, stats), (want, want_stats) = runs
    assert stats[1] == want_stats[1] > 0  # the same examples
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-5)
