"""Unique sampling on CUDA over many blocks (csrc/cuda/sample_unique.cu, unique_rounds.cuh)
against the CPU's rejection loop: the same ids in the same order and the same num_tries, for
every kind, when the set completes in the first round, in a later one, or in the single block
that finishes the rounds' work; the give-up; and no read back to the host when the checks are
deferred. The small sets of the single block are in test_cuda_kernels.py.

The rounds start at num_sampled = 4096 and take 4 S, 16 S and 64 S draws (constants below,
mirroring kMultiBlockFrom and plan_rounds): each case's num_tries says which it reached. They
are not the default until a GPU has run them (test_unique_sampling_default.py): every test
here asks for them with FASTSOFTMAX_UNIQUE_ROUNDS=1.
"""

import pytest
import torch

from cuda_emulator import AVAILABLE as CUDA_EMU, emulated_cuda
from fastsoftmax import deferred_checks, ops
from sync_counter import count_host_reads

MULTI_BLOCK_FROM = 4096
ROUND_ENDS = (4, 4 + 16, 4 + 16 + 64)  # cumulative draws per candidate after each round
KINDS = {"alias": ops.KIND_ALIAS, "uniform": ops.KIND_UNIFORM, "log_uniform": ops.KIND_LOG_UNIFORM}
needs_emu = pytest.mark.skipif(not CUDA_EMU, reason="the emulated CUDA build is missing")


@pytest.fixture(autouse=True)
def rounds_asked_for(monkeypatch):
    monkeypatch.setenv("FASTSOFTMAX_UNIQUE_ROUNDS", "1")


def zipf_table(num_classes: int):
    return ops.alias_build(1.0 / torch.arange(1, num_classes + 1, dtype=torch.float64) ** 1.1)


def both(cuda_backend, table, seed, num_classes, kind, num_sampled):
    """(CPU result, CUDA result on the CPU) of sample_unique."""
    prob, alias = table
    seed = torch.tensor([seed])
    cpu = ops.sample_unique(prob, alias, seed, num_classes, kind, num_sampled)
    device, enter = cuda_backend
    with enter():
        ids, tries = ops.sample_unique(prob.to(device), alias.to(device), seed.to(device),
                                       num_classes, kind, num_sampled)
    return cpu, (ids.cpu(), tries.cpu())


def round_reached(num_tries: int, num_sampled: int) -> int:
    """1, 2, 3 for the rounds, 4 for the single block after them."""
    return 1 + sum(num_tries > end * num_sampled for end in ROUND_ENDS)


# (V, S, seed) -> round each kind completes in, as the CPU's num_tries says (checked, so
# that a change of the stream cannot leave a path untested). V = S = 5000: every class, and
# 78.125 tiles of 256 draws in round 1, 1250 tiles (more than the 1024 blocks) in round 3.
CASES = {
    "first_round": (50_000, MULTI_BLOCK_FROM, 123456789012345,
                    {"alias": 1, "uniform": 1, "log_uniform": 1}),
    "every_class": (5000, 5000, 987654321, {"alias": 3, "uniform": 2, "log_uniform": 3}),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES)
def test_rounds_draw_the_cpu_candidates_and_num_tries(case, kind, cuda_backend):
    num_classes, num_sampled, seed, rounds = CASES[case]
    cpu, gpu = both(cuda_backend, zipf_table(num_classes), seed, num_classes, KINDS[kind],
                    num_sampled)
    assert round_reached(int(cpu[1]), num_sampled) == rounds[kind]
    assert torch.equal(cpu[0], gpu[0]) and torch.equal(cpu[1], gpu[1])
    if num_sampled == num_classes:
        assert torch.equal(cpu[0].sort().values, torch.arange(num_classes))


def test_the_single_block_finishes_what_the_rounds_leave(cuda_backend):
    # One class of probability ~2.4e-6 among 4096: the rounds' 84 S draws miss it with this
    # seed, and the single block takes over from their state.
    weights = torch.ones(4096, dtype=torch.float64)
    weights[0] = 0.01
    cpu, gpu = both(cuda_backend, ops.alias_build(weights), 3, 4096, ops.KIND_ALIAS, 4096)
    assert round_reached(int(cpu[1]), 4096) == 4
    assert torch.equal(cpu[0], gpu[0]) and torch.equal(cpu[1], gpu[1])


def test_the_crossover_gives_the_same_draws_on_both_sides(cuda_backend):
    # S = 4095 is the single block's, 4096 the rounds': the first 4095 ids agree.
    table = zipf_table(50_000)
    one, below = both(cuda_backend, table, 7, 50_000, ops.KIND_LOG_UNIFORM, MULTI_BLOCK_FROM - 1)
    _, at = both(cuda_backend, table, 7, 50_000, ops.KIND_LOG_UNIFORM, MULTI_BLOCK_FROM)
    assert torch.equal(one[0], below[0]) and torch.equal(below[0], at[0][:-1])


@needs_emu
def test_rounds_read_nothing_back_when_the_checks_are_deferred():
    prob, alias = zipf_table(50_000)
    seed = torch.tensor([11])
    with emulated_cuda():
        with deferred_checks() as checks:
            with count_host_reads() as counter:
                ids, tries = ops.sample_unique(prob, alias, seed, 50_000, ops.KIND_ALIAS,
                                               MULTI_BLOCK_FROM)
            assert counter.total == 0
            checks.raise_pending()
        before = ops.device_reads()
        ops.sample_unique(prob, alias, seed, 50_000, ops.KIND_ALIAS, MULTI_BLOCK_FROM)
        assert ops.device_reads() == before + 1  # the immediate give-up check
    assert torch.equal(ids, ops.sample_unique(prob, alias, seed, 50_000, ops.KIND_ALIAS,
                                              MULTI_BLOCK_FROM)[0])


@needs_emu
def test_rounds_give_up_with_the_cpu_error_or_a_device_flag():
    # 4096 classes, one of probability ~1e-34: 4095 are found, the last never (the emulated
    # build gives up after 2^20 draws, the rounds' 84 S of them included; the CPU's 2^32
    # would take minutes here).
    weights = torch.ones(4096, dtype=torch.float64)
    weights[9] = 1e-30
    prob, alias = ops.alias_build(weights)
    seed = torch.tensor([5])
    found = ops.sample_unique(prob, alias, seed, 4096, ops.KIND_ALIAS, 4095)[0]  # the CPU's
    with emulated_cuda():
        with pytest.raises(ValueError, match="could not find 4096 distinct candidates"):
            ops.sample_unique(prob, alias, seed, 4096, ops.KIND_ALIAS, 4096)
        with deferred_checks() as checks:
            with count_host_reads() as counter:
                ids, tries = ops.sample_unique(prob, alias, seed, 4096, ops.KIND_ALIAS, 4096)
                raw_ids, raw_tries = torch.ops.fastsoftmax_emu.sample_unique(
                    prob, alias, seed, 4096, ops.KIND_ALIAS, 4096)
            assert counter.total == 0
            assert int(tries) == int(raw_tries) == -1
            assert torch.equal(raw_ids[:-1], found) and int(raw_ids[-1]) == -1
            assert bool((ids >= 0).all())  # the wrapper hands no id -1 to a kernel
            with pytest.raises(ValueError, match="could not find 4096 distinct candidates"):
                checks.raise_pending()
