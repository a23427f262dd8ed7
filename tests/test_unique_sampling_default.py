"""Which scheme CUDA unique sampling takes by default (csrc/cuda/sample_unique.cu): the single
block, the one measured on a GPU, for every num_sampled; the many-block rounds, which have not
run on a GPU, only from 4096 candidates and when FASTSOFTMAX_UNIQUE_ROUNDS=1 asks for them
(docs/samplers.md says why). Both give the CPU's ids and num_tries, so the scheme is told
apart by what it allocates: the rounds fill a mark per class and a state, the single block
one bitmap (the ATen calls of the op, counted by torch's profiler on the emulated build)."""

from collections import Counter

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from cuda_emulator import AVAILABLE as CUDA_EMU, emulated_cuda
from fastsoftmax import ops

pytestmark = pytest.mark.skipif(not CUDA_EMU, reason="the emulated CUDA build is missing")
V = 8192


def aten_calls(num_sampled: int):
    """(the ATen ops the emulated op called, by name and count; its ids; its num_tries)."""
    prob, alias = ops.alias_build(torch.ones(V, dtype=torch.float64))
    with emulated_cuda(), profile(activities=[ProfilerActivity.CPU]) as prof:
        ids, tries = ops.sample_unique(prob, alias, torch.tensor([7]), V, ops.KIND_UNIFORM,
                                       num_sampled)
    calls = Counter({e.key: e.count for e in prof.key_averages()
                     if e.key.startswith("aten::") and e.key != "aten::item"})
    return calls, ids, int(tries)


@pytest.mark.parametrize("num_sampled", [4096, 8000])
def test_the_default_is_the_single_block(num_sampled, monkeypatch):
    monkeypatch.delenv("FASTSOFTMAX_UNIQUE_ROUNDS", raising=False)
    single = aten_calls(4095)[0]  # below the crossover: always the single block
    default, ids, tries = aten_calls(num_sampled)
    assert default == single, (default, single)
    monkeypatch.setenv("FASTSOFTMAX_UNIQUE_ROUNDS", "1")
    rounds, ids_rounds, tries_rounds = aten_calls(num_sampled)
    assert rounds != single  # the test can tell the schemes apart
    # The same candidates either way, as the CPU draws them.
    cpu = ops.sample_unique(*ops.alias_build(torch.ones(V, dtype=torch.float64)),
                            torch.tensor([7]), V, ops.KIND_UNIFORM, num_sampled)
    assert torch.equal(ids, cpu[0]) and torch.equal(ids_rounds, cpu[0])
    assert tries == tries_rounds == int(cpu[1])
