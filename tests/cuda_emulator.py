"""The emulated CUDA build (tools/build_cuda_emu.py): the CUDA sources of csrc/cuda run on the
CPU by an emulator of CUDA's execution model, registered as fastsoftmax_emu::* ops on CPU
tensors. `emulated_cuda()` routes fastsoftmax's op wrappers to them (fastsoftmax.ops.namespace),
so every test that goes through fastsoftmax.ops (op-level, functional, modules, models) runs
the CUDA code path. The emulated ops get their fake kernels and autograd from
fastsoftmax.ops.register, held by a torch.library.Library of their own (`PARTS`).

`make test` and `make cuda-emu-test` build it; FASTSOFTMAX_CUDA_EMU=0 leaves it out.
"""

import contextlib
import os

import torch

from fastsoftmax import ops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = os.path.join(ROOT, "build", "cuda_emu", "fastsoftmax_emu.so")
LIB = "fastsoftmax_emu"
POLICIES = ("rotate", "forward", "reverse", "random")


def _load():
    """The library of the emulated ops' Python parts, or None without the emulated build."""
    if os.environ.get("FASTSOFTMAX_CUDA_EMU", "1") == "0" or not os.path.exists(LIBRARY):
        return None
    torch.ops.load_library(LIBRARY)
    parts = torch.library.Library(LIB, "FRAGMENT")
    ops.register(LIB, lib=parts)
    return parts


PARTS = _load()
AVAILABLE = PARTS is not None


@contextlib.contextmanager
def emulated_cuda(policy: str = "rotate", seed: int = 0):
    """Within the block, fastsoftmax's ops run the emulated CUDA kernels. `policy` orders the
    threads and blocks of each launch between synchronisation points: forward, reverse,
    seeded random, or (rotate) those three in turn, launch after launch."""
    if not AVAILABLE:
        raise RuntimeError(f"the emulated CUDA build is missing ({LIBRARY}): run make cuda-emu")
    torch.ops.fastsoftmax_emu.set_schedule(policy, seed)
    with ops.namespace(LIB):
        yield
