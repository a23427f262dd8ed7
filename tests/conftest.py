import collections
import contextlib
import os
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


# pytest-xdist (make test runs the suite on 2 processes with --dist loadgroup): each module is
# a group, so its tests run on one worker in file order and its module-scoped fixtures are built
# once; the modules that start groups of processes (torchrun, the killed and resumed training
# runs, the vocabulary-parallel ranks) share one group, so that no two of them run at once and
# oversubscribe the 2 cores further. TRITON_INTERPRET needs nothing here: every worker collects
# (imports) every test module, test_fused_softmax.py's switch included, before any test runs,
# as the single process does.
MULTIPROCESS = {"test_atomic_files.py", "test_lm_parallel.py", "test_lm_vocab_parallel.py",
                "test_trainer.py", "test_vocab_parallel.py"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        module = item.nodeid.split("::")[0]
        group = "multiprocess" if os.path.basename(module) in MULTIPROCESS else module
        item.add_marker(pytest.mark.xdist_group(group))


# The fuzz counts of xdist's workers, summed by the controlling process.
_WORKER_FUZZ = collections.Counter()


def pytest_sessionfinish(session):
    """On an xdist worker: hand its fuzz counts to the controlling process."""
    fuzz = sys.modules.get("fuzz_support")
    if fuzz is not None and hasattr(session.config, "workeroutput"):
        session.config.workeroutput["fuzz_passed"] = dict(fuzz.PASSED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _WORKER_FUZZ.update(getattr(node, "workeroutput", {}).get("fuzz_passed", {}))


def pytest_terminal_summary(terminalreporter):
    """The number of examples each op passed in the property-based tests (tests/fuzz), from
    this process or summed over xdist's workers."""
    fuzz = sys.modules.get("fuzz_support")
    if fuzz is None and _WORKER_FUZZ:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz"))
        import fuzz_support as fuzz
    if fuzz is not None:
        fuzz.PASSED.update(_WORKER_FUZZ)
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
