import contextlib
import sys

import pytest
import torch

from cuda_emulator import AVAILABLE as CUDA_EMU, emulated_cuda

# "cuda_emu": CPU tensors, ops routed to the CUDA kernels run by the emulator.
DEVICES = ["cpu"] + (["cuda_emu"] if CUDA_EMU else []) + (
    ["cuda"] if torch.cuda.is_available() else [])
CUDA_BACKENDS = (["cuda_emu"] if CUDA_EMU else []) + (
    ["cuda"] if torch.cuda.is_available() else [])


def backend_context(name):
    """(device, a function making the context manager that enters it) of a test device."""
    if name == "cuda_emu":
        return torch.device("cpu"), emulated_cuda
    return torch.device(name), contextlib.nullcontext


@pytest.fixture(params=DEVICES)
def device(request):
    dev, enter = backend_context(request.param)
    with enter():
        yield dev


@pytest.fixture(params=CUDA_BACKENDS or [pytest.param("none", marks=pytest.mark.skip(
    reason="neither a CUDA device nor the emulated CUDA build"))])
def cuda_backend(request):
    """A CUDA implementation to compare with the CPU: the real device or the emulator.
    Returns (device, a function making the context manager that enters it)."""
    return backend_context(request.param)


requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def pytest_terminal_summary(terminalreporter):
    """The number of examples each op passed in the property-based tests (tests/fuzz)."""
    fuzz = sys.modules.get("fuzz_support")
    if fuzz is not None:
        fuzz.report(terminalreporter)


@pytest.fixture(scope="session")
def bad_input_files(tmp_path_factory):
    """The input files of the bad-input matrix (tests/bad_input_harness.py), built once:
    (their folder, a folder this process cannot write to, or None)."""
    from bad_input_harness import make_inputs  # here: it imports every command line

    yield from make_inputs(tmp_path_factory)


def random_batch(device, features, classes, shape=(3, 5), seed=0):
    """Seeded inputs [*shape, features] and targets in [0, classes) of shape `shape`."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, features, generator=g).to(device)
    t = torch.randint(0, classes, shape, generator=g).to(device)
    return x, t
