"""Value checks of ids on a device without a host synchronisation.

Checking that a batch's targets lie in [0, V) on a GPU means reading a flag back, which waits
for the device: one such read per step keeps the host from running ahead and a CUDA graph
from being captured. Within `deferred_checks()`, the checks of device ids are kept instead:

- each check's flag, and its smallest and largest offending id, accumulate on the device;
- the ids a kernel would index with have their bad entries replaced by 0, so that a bad
  batch computes a meaningless loss but never reads or writes out of bounds;
- `DeferredChecks.raise_pending()` reads every flag back in one copy and raises the error
  the immediate check would have raised (a ValueError naming the offending ids).

The training loop (fastsoftmax.models.trainer.run_epoch) holds the checks over an epoch and
raises where it reads the loss back anyway: every `log_every` steps, before a checkpoint is
written and at the epoch's end. Leaving the block raises what is still pending, so no bad
batch goes unreported. CPU tensors are checked at once as before (a CPU read costs no
synchronisation); under torch.compile a check is an asynchronous device assert. `checked_ids` is the one
entry point of the Python side.

The switch is process-wide, as the native ops' is (csrc/common/stable.h).
"""

import contextlib
from typing import Dict, List, Optional

import torch
from torch import Tensor

from ._registry import DEFAULT_NAMESPACE, current_namespace

_INT64_MAX = torch.iinfo(torch.int64).max
_INT64_MIN = torch.iinfo(torch.int64).min


class DeferredChecks:
    """The pending checks of a `deferred_checks()` block: per kind of check, a device flag and
    the smallest and largest offending id seen since the last read."""

    def __init__(self) -> None:
        self._ranges: Dict[tuple, List[Tensor]] = {}  # (name, V, ignore) -> [lo, hi]
        self._flags: Dict[str, Tensor] = {}  # message -> bad

    def ids(self, ids: Tensor, num_classes: int, name: str,
            ignore_index: Optional[int] = None) -> Tensor:
        """`ids` with every id outside [0, num_classes) (ignore_index aside) replaced by 0;
        the check of `name` ids is kept on the device."""
        bad = _outside(ids, num_classes, ignore_index)
        lo = torch.where(bad, ids, _INT64_MAX).amin() if ids.numel() else ids.new_tensor(
            _INT64_MAX)
        hi = torch.where(bad, ids, _INT64_MIN).amax() if ids.numel() else ids.new_tensor(
            _INT64_MIN)
        key = (name, int(num_classes), ignore_index)
        kept = self._ranges.get(key)
        if kept is None:
            self._ranges[key] = [lo, hi]
        else:
            kept[0], kept[1] = torch.minimum(kept[0], lo), torch.maximum(kept[1], hi)
        if ignore_index is not None and ids.dim() == 2 and ids.shape[1] > 1:
            ignored = ids == ignore_index
            mixed = ignored.any(1) != ignored.all(1)
            self.flag(mixed.any(), f"a target row mixes ignore_index ({ignore_index}) with "
                      f"class ids: with num_true > 1 a row is ignored only when all its "
                      f"targets equal ignore_index")
            bad = bad | (ignored & mixed[:, None])
        return ids.masked_fill(bad, 0)

    def flag(self, failed: Tensor, message: str) -> None:
        """Keep `failed` (a bool tensor of one element) until the next read; `message` is
        the error raised if any was true."""
        kept = self._flags.get(message)
        self._flags[message] = failed.reshape(()) if kept is None else kept | failed.reshape(())

    def raise_pending(self) -> None:
        """Read every pending check back (one copy) and raise the first that failed."""
        ranges, flags = list(self._ranges.items()), list(self._flags.items())
        if not ranges and not flags:
            return
        values = torch.stack([v for _, (lo, hi) in ranges for v in (lo, hi)]
                             + [f.long() for _, f in flags]).tolist()
        self._ranges, self._flags = {}, {}
        for i, ((name, num_classes, ignore_index), _) in enumerate(ranges):
            lo, hi = values[2 * i], values[2 * i + 1]
            if lo <= hi:
                raise _range_error(name, num_classes, ignore_index, lo, hi)
        for j, (message, _) in enumerate(flags):
            if values[2 * len(ranges) + j]:
                raise ValueError(message)


class _State:
    """The open block's checks (an attribute of one object: torch.compile guards on it)."""

    checks: Optional[DeferredChecks] = None


_STATE = _State()


@contextlib.contextmanager
def deferred_checks():
    """Within the block, checks of device ids read nothing back (see the module's text);
    yields the DeferredChecks to read with raise_pending(). A nested block shares the outer
    one's checks. Leaving the block raises any check still pending."""
    if _STATE.checks is not None:
        yield _STATE.checks
        return
    checks = _STATE.checks = DeferredChecks()
    defer_native_checks(True)
    failed = False
    try:
        yield checks
    except BaseException:
        failed = True
        raise
    finally:
        _STATE.checks = None
        defer_native_checks(False)
        if not failed:
            checks.raise_pending()


def pending() -> Optional[DeferredChecks]:
    """The open block's checks (None outside one, and while torch.compile traces)."""
    return None if torch.compiler.is_compiling() else _STATE.checks


def on_device(t: Tensor) -> bool:
    """Whether `t` is read by a device kernel (a GPU tensor, or any tensor while the tests
    route the ops to the emulated CUDA build)."""
    return t.device.type != "cpu" or current_namespace() != DEFAULT_NAMESPACE


def _outside(ids: Tensor, num_classes: int, ignore_index: Optional[int]) -> Tensor:
    bad = (ids < 0) | (ids >= num_classes)
    return bad if ignore_index is None else bad & (ids != ignore_index)


def _range_error(name: str, num_classes: int, ignore_index: Optional[int], lo: int,
                 hi: int) -> ValueError:
    tail = " or equal ignore_index" if ignore_index is not None else ""
    return ValueError(f"{name} ids must lie in [0, {num_classes}){tail}; found {lo} (min "
                      f"offending) and {hi} (max offending)")


def checked_ids(ids: Tensor, num_classes: int, name: str, ignore_index: Optional[int] = None,
                *, at_once: bool = True) -> Tensor:
    """`ids` as a kernel may index with them, every id in [0, num_classes) or ignore_index:
    - under torch.compile, an asynchronous assert (on a device, or whenever `at_once`);
    - on a device within deferred checks, checked there and made safe (bad ids become 0);
    - otherwise, with `at_once`, checked now (a ValueError naming the offending ids; a host
      read on a device); without it, returned unchanged: the native op checks them."""
    device = on_device(ids)
    if torch.compiler.is_compiling():
        if at_once or device:  # the native op may not check (deferred), or comes too late
            ok = ~_outside(ids, num_classes, ignore_index)
            torch._assert_async(ok.all(), f"{name} ids must lie in [0, {num_classes})")
        return ids
    if device and _STATE.checks is not None:
        return _STATE.checks.ids(ids, num_classes, name, ignore_index)
    if at_once and ids.numel():
        bad = _outside(ids, num_classes, ignore_index)
        if bool(bad.any()):
            raise _range_error(name, num_classes, ignore_index, int(ids[bad].min()),
                               int(ids[bad].max()))
    return ids


def defer_native_checks(defer: bool) -> None:
    """Set the native ops' deferred-checks switch (op device_reads) in the product's library
    and in the namespace in use."""
    for name in {DEFAULT_NAMESPACE, current_namespace()}:
        getattr(torch.ops, name).device_reads.default(torch.empty(0), int(bool(defer)))
