"""Counting the host synchronisations a training step would make on a GPU, on the CPU.

Two sources, added together:
- the native ops: every read of device data to the host that a CUDA op makes
  (fastsoftmax.ops.device_reads(); the emulated CUDA build counts each read a GPU would make,
  since its "device" tensors are CPU tensors);
- fastsoftmax's Python: every call, from a frame of the fastsoftmax package, of a tensor
  method that reads a value back or whose result's size depends on the data (bool(t),
  t.item(), int(t), t.tolist(), t.nonzero(), t[mask], ...). The methods are patched for the
  length of the block, so reads made in autograd's backward threads count too.

torch's own internals are not counted (an optimiser reading its CPU step counter is no
synchronisation); on a real GPU torch.cuda.set_sync_debug_mode("error") covers them.
"""

import contextlib
import os
import sys

import torch

import fastsoftmax
from fastsoftmax import ops

PACKAGE = os.path.dirname(os.path.abspath(fastsoftmax.__file__))
READS = ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "numpy", "cpu",
         "nonzero", "unique", "masked_select", "coalesce", "repeat_interleave")


class Counter:
    def __init__(self) -> None:
        self.python: list = []  # (method, file:line) of each read from fastsoftmax's code
        self.native_start = ops.device_reads()
        self.native_end = None

    @property
    def native(self) -> int:
        end = ops.device_reads() if self.native_end is None else self.native_end
        return end - self.native_start

    @property
    def total(self) -> int:
        return len(self.python) + self.native

    def __repr__(self) -> str:
        return f"{self.native} native reads, Python reads {self.python}"


def _is_mask(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


@contextlib.contextmanager
def count_host_reads():
    """Yields a Counter of the reads made within the block."""
    counter = Counter()
    saved = {}

    def note(name: str) -> None:
        frame = sys._getframe(2)
        if os.path.abspath(frame.f_code.co_filename).startswith(PACKAGE):
            counter.python.append((name, f"{os.path.basename(frame.f_code.co_filename)}:"
                                         f"{frame.f_lineno}"))

    def patched(name: str):
        original = saved[name] = getattr(torch.Tensor, name)

        def method(self, *args, **kwargs):
            note(name)
            return original(self, *args, **kwargs)
        return method

    def getitem(self, index):
        if _is_mask(index):
            note("__getitem__ with a mask")
        return saved["__getitem__"](self, index)

    for name in READS:
        setattr(torch.Tensor, name, patched(name))
    saved["__getitem__"] = torch.Tensor.__getitem__
    torch.Tensor.__getitem__ = getitem
    try:
        yield counter
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)
        counter.native_end = ops.device_reads()
