"""A training step makes no host synchronisation (issue: the GPU training step).

Counted on the CPU (tests/sync_counter.py): the native ops' reads of device data, which the
emulated CUDA build counts as a GPU would make them, and every value read back by
fastsoftmax's Python. A steady-state step of every LM head, run through the one training
loop (fastsoftmax.models.trainer.run_epoch), reads nothing: the loop's reads (the loss and the
deferred id checks) happen once per epoch, so 2 and 6 steps read the same, with dense
gradients and with the row-sparse ones the LM trains with by default (clipped without
coalescing them: fastsoftmax.optim.sparse_grad_norm). Deferred checks still raise the
immediate checks' errors, at the loop's read-back points.
"""

import contextlib

import pytest
import torch

from cuda_emulator import AVAILABLE as CUDA_EMU, emulated_cuda
from fastsoftmax import deferred_checks, ops
from fastsoftmax.models.heads import has_sparse_gradient
from fastsoftmax.models.lm.model import RNNLanguageModel
from fastsoftmax.models.trainer import run_epoch
from fastsoftmax.nn import HEADS
from fastsoftmax.optim import clip_grad_norm
from sync_counter import Counter, count_host_reads

needs_emu = pytest.mark.skipif(not CUDA_EMU, reason="the emulated CUDA build is missing")
V = 40


def layouts() -> list:
    """(head, sparse): every head dense; sparse for 'full' (its embedding only) and for every
    head with sparse gradients. A device's sparse output-layer gradient has one row per pair
    (csrc/cuda/loss_cuda.cuh, scatter_pairs_sorted_cuda), so its size reads nothing back; the
    emulated build counts a data-sized op such as masked_select as a read."""
    out = [(h, False) for h in sorted(HEADS)] + [("full", True)]
    return out + [(h, True) for h in sorted(h for h in HEADS if has_sparse_gradient(h))]


def lm_and_step(head: str, sparse: bool = False):
    torch.manual_seed(0)
    model = RNNLanguageModel(V, embed_dim=8, hidden_size=8, num_layers=1, output=head,
                             num_sampled=8, counts=torch.arange(1.0, V + 1), sparse=sparse)

    def step(batch):
        loss, _ = model(batch[:, :-1], batch[:, 1:], None)
        return loss, batch[:, 1:].numel()
    return model, step


def epoch_reads(model, step, batches) -> Counter:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with count_host_reads() as counter:
        run_epoch(step, batches, optimizer, parameters=list(model.parameters()), clip=1.0)
    return counter


def batches(n: int, bad_at=None):
    data = torch.randint(0, V, (n, 4, 7), generator=torch.Generator().manual_seed(1))
    if bad_at is not None:
        data[bad_at, 2, -1] = V + 5  # a target only (the inputs are [:, :-1])
    return list(data)


@needs_emu
@pytest.mark.parametrize("head, sparse", layouts())
def test_a_steady_state_lm_step_reads_nothing_back(head, sparse):
    model, step = lm_and_step(head, sparse)
    with emulated_cuda():
        epoch_reads(model, step, batches(2))  # warm-up
        short, long = (epoch_reads(model, step, batches(n)) for n in (2, 6))
    assert model.embedding.weight.grad.is_sparse == sparse
    # The epoch's reads (the deferred checks, the loss) happen once, whatever its length.
    assert long.total == short.total, (short, long)
    assert short.native == 0 and len(short.python) <= 2, short


@needs_emu
@pytest.mark.parametrize("head", ["full", "sampled", "neg", "hs", "warp"])
def test_the_same_step_outside_the_loop_checks_at_once(head):
    # The counter can fail: a step outside the loop's deferred checks reads its checks back.
    model, _ = lm_and_step(head)
    x = batches(1)[0]
    with emulated_cuda(), count_host_reads() as counter:
        loss, _ = model(x[:, :-1], x[:, 1:], None)
        loss.backward()
    assert counter.total >= 1


@pytest.mark.parametrize("device", ["cpu"] + (["cuda_emu"] if CUDA_EMU else []))
@pytest.mark.parametrize("head", ["full", "sampled", "neg", "hs", "warp"])
def test_a_bad_target_in_the_loop_raises_the_immediate_error(head, device):
    model, step = lm_and_step(head)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    saved = []

    def on_step(steps, totals):
        if steps == 4:  # a checkpoint reads the totals before it writes anything
            totals()
            saved.append(steps)

    with emulated_cuda() if device == "cuda_emu" else contextlib.nullcontext():
        with pytest.raises(ValueError, match=rf"target ids must lie in \[0, {V}\).*"
                                             rf"{V + 5} \(min offending\)"):
            run_epoch(step, batches(6, bad_at=2), optimizer, on_step=on_step)
    assert saved == []


@needs_emu
def test_deferred_checks_outside_the_loop():
    weight, h = torch.randn(V, 4), torch.randn(3, 4)
    target = torch.tensor([[1], [V + 2], [-7]])
    negatives = torch.tensor([0, 1, 2])
    with emulated_cuda():
        with deferred_checks() as checks:
            loss, _ = ops.negative_sampling_forward(h, weight, target, negatives, -100, False)
            assert loss.shape == (3,)  # computed on safe ids, nothing read back
            with pytest.raises(ValueError, match=r"found -7 \(min offending\) and "
                                                 rf"{V + 2} \(max offending\)"):
                checks.raise_pending()
            checks.raise_pending()  # read: nothing left
        with pytest.raises(ValueError, match="target ids must lie"):
            with deferred_checks():  # leaving the block raises what is pending
                ops.negative_sampling_forward(h, weight, target, negatives, -100, False)


@needs_emu
def test_unique_sampling_gives_up_with_a_device_flag():
    # Two classes of non-zero probability, one of them 1e-30: the set of 2 is never found
    # (the emulated build gives up after 2^20 draws).
    prob, alias = ops.alias_build(torch.tensor([1.0, 1e-30, 0.0], dtype=torch.float64))
    seed = torch.tensor([5])
    with emulated_cuda():
        with pytest.raises(ValueError, match="could not find 2 distinct candidates"):
            ops.sample_unique(prob, alias, seed, 3, 0, 2)  # immediate, as before
        with deferred_checks() as checks:
            with count_host_reads() as counter:
                sampled, tries = ops.sample_unique(prob, alias, seed, 3, 0, 2)
            assert counter.total == 0
            assert int(tries) == -1 and bool((sampled >= 0).all())  # no id -1 for a kernel
            with pytest.raises(ValueError, match="could not find 2 distinct candidates"):
                checks.raise_pending()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("head, sparse", layouts())
def test_steady_state_steps_on_a_gpu_make_no_sync(head, sparse):
    # torch's own view on a real device: any synchronising call in the steps (the clip and
    # SGD's sparse update included) is an error.
    model, step = lm_and_step(head, sparse)
    model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [b.cuda() for b in batches(4)]
    run_epoch(step, data[:1], optimizer, parameters=list(model.parameters()), clip=1.0)
    with deferred_checks() as checks:
        torch.cuda.set_sync_debug_mode("error")
        try:
            for batch in data[1:]:
                optimizer.zero_grad(set_to_none=True)
                loss, _ = step(batch)
                loss.backward()
                clip_grad_norm(model.parameters(), 1.0)
                optimizer.step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        checks.raise_pending()
