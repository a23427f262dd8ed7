"""The CUDA emulator itself: barriers, warp collectives and their misuse, shared memory,
atomics and the varied interleavings, on purpose-built kernels (csrc/emu/emu_selftest.cpp)."""

import pytest
import torch

from cuda_emulator import AVAILABLE, POLICIES, emulated_cuda

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="emulated CUDA build not built")
FULL = 0xFFFFFFFF


def selftest(which, *, x=None, threads=32, mask=FULL, kind=0, src=0, policy="forward", seed=0):
    x = torch.empty(0, dtype=torch.int32) if x is None else x
    with emulated_cuda(policy, seed):
        return torch.ops.fastsoftmax_emu.selftest(which, x, threads, mask, kind, src)


@pytest.mark.parametrize("policy", POLICIES)
def test_block_scan_with_barriers_is_exact_in_every_order(policy):
    x = torch.randint(-50, 50, (256,), dtype=torch.int32, generator=torch.Generator().manual_seed(1))
    out = selftest("scan", x=x, policy=policy, seed=3)
    assert torch.equal(out, torch.cumsum(x, 0).int())


def test_missing_barrier_changes_the_result():
    x = torch.arange(1, 129, dtype=torch.int32)
    want = torch.cumsum(x, 0).int()
    results = [selftest("scan_without_barrier", x=x, policy=p, seed=s)
               for p, s in (("forward", 0), ("reverse", 0), ("random", 1), ("random", 2))]
    assert any(not torch.equal(r, want) for r in results)
    assert len({tuple(r.tolist()) for r in results}) > 1  # the order decides the outcome


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("threads", [32, 64, 1024])
def test_product_block_scan_and_warp_sum(policy, threads):
    out = selftest("helpers", threads=threads, policy=policy, seed=5)
    t = torch.arange(threads)
    assert torch.equal(out[:, 0], (t.cumsum(0) - t).int())  # exclusive scan
    assert (out[:, 1] == t.sum()).all()
    warp_sums = t.reshape(-1, 32).sum(1).repeat_interleave(32)
    assert torch.equal(out[:, 2], warp_sums.int())


def test_shuffles_votes_and_their_lane_arithmetic():
    lane = torch.arange(64) % 32
    assert torch.equal(selftest("shuffle", threads=64, kind=0), (lane ^ 1).int())
    assert (selftest("shuffle", threads=64, kind=1, src=7) == 7).all()
    up = torch.where(lane == 0, lane, lane - 1).int()
    assert torch.equal(selftest("shuffle", threads=64, kind=2), up)
    assert (selftest("shuffle", threads=32, kind=3) == -1431655766).all()  # 0xAAAAAAAA
    # A partial warp may shuffle among the lanes that exist.
    assert (selftest("shuffle", threads=16, mask=0x0000FFFF, kind=1, src=4) == 4).all()


@pytest.mark.parametrize("threads,mask,kind,src,message", [
    (32, 0x0000FFFF, 0, 0, "does not include the calling lane"),
    (48, FULL, 0, 0, "on a partial warp"),
    (32, FULL, 1, 40, None),  # src wraps modulo the width: lane 8, fine
    (16, 0x0000FFFF, 1, 20, "reading lane 20, which is not in mask"),
    (32, FULL, 4, 0, "have exited"),
    (64, FULL, 5, 0, "wait at __syncthreads"),
])
def test_misused_warp_collectives_are_reported(threads, mask, kind, src, message):
    if message is None:
        assert (selftest("shuffle", threads=threads, mask=mask, kind=kind, src=src) == 8).all()
        return
    with pytest.raises(RuntimeError, match=message):
        selftest("shuffle", threads=threads, mask=mask, kind=kind, src=src)


@pytest.mark.parametrize("policy", POLICIES)
def test_atomics_shared_memory_per_block_and_poisoned_dynamic_memory(policy):
    blocks, threads = 7, 96
    out = selftest("memory", threads=threads, kind=blocks, policy=policy, seed=2)
    assert out[0] == blocks * threads
    assert out[1] == -842150451  # 0xCDCDCDCD: dynamic shared memory starts undefined
    assert (out[2:] == 1).all()  # every block saw its own static __shared__ copy


def test_bad_launch_configuration_is_an_error():
    with pytest.raises(RuntimeError, match="invalid launch"):
        selftest("shuffle", threads=2048)


def test_schedule_policy_is_checked():
    with pytest.raises(ValueError, match="rotate, forward, reverse or random"):
        torch.ops.fastsoftmax_emu.set_schedule("sideways", 0)
