"""Which namespace the op wrappers call, and each op family's Python parts.

Every native op is declared once in csrc/ops.cpp, in the namespace "fastsoftmax". The tests
load the same schemas a second time, implemented by the CUDA sources running on the CPU
through an emulator (namespace "fastsoftmax_emu", tests/cuda_emulator.py), and route the
wrappers there for the length of a `with fastsoftmax.ops.namespace(...)` block.

`OpParts` collects, beside each op's wrapper, its fake kernel and its autograd formula, and
registers them for any namespace holding the same schemas.
"""

import contextlib
import functools
from typing import Callable, Dict, Optional, Tuple

import torch

from .._errors import raising_promised_types

DEFAULT_NAMESPACE = "fastsoftmax"


class _Route:
    """The namespace the wrappers call. An attribute of one object, not a ContextVar, so
    that torch.compile reads (and guards on) it inside a compiled graph."""

    name = DEFAULT_NAMESPACE


_ROUTE = _Route()


@contextlib.contextmanager
def namespace(name: str):
    """Within the block, fastsoftmax's op wrappers call the ops of namespace `name` (which
    must hold csrc/ops.cpp's schemas and have been given `register(name)`)."""
    previous, _ROUTE.name = _ROUTE.name, name
    try:
        yield
    finally:
        _ROUTE.name = previous


def current_namespace() -> str:
    """The namespace the op wrappers call now: DEFAULT_NAMESPACE ("fastsoftmax"), or the one
    a `namespace(name)` block routes them to."""
    return _ROUTE.name


def _overload(name: str):
    """The OpOverload of `name` in the current namespace (what torch.library.opcheck takes)."""
    return getattr(getattr(torch.ops, _ROUTE.name), name).default


@functools.lru_cache(maxsize=None)
def _translating(lib: str, name: str):  # made once per op: _op runs on every call
    return raising_promised_types(getattr(getattr(torch.ops, lib), name).default)


def _op(name: str):
    # Dynamo cannot trace the wrapper: a compiled graph calls the op (errors stay RuntimeError).
    return _overload(name) if torch.compiler.is_compiling() else _translating(_ROUTE.name, name)


class OpParts:
    """The fake kernels and autograd formulas of one family of ops, written beside the ops'
    wrappers with the decorators `fake` and `autograd`, and applied to a namespace with
    `register`."""

    def __init__(self) -> None:
        self.fakes: Dict[str, Callable] = {}
        self.autograds: Dict[str, Tuple[str, Callable, Callable]] = {}

    def fake(self, name: str):
        def add(function: Callable) -> Callable:
            self.fakes[name] = function
            return function
        return add

    def autograd(self, name: str, backward_name: str, setup_context: Callable):
        """`backward(backward_op, ctx, *grads)` of forward op `name`: backward_op is the
        namespace's `backward_name` op, wrapped to raise fastsoftmax's error types."""
        def add(backward: Callable) -> Callable:
            self.autograds[name] = (backward_name, backward, setup_context)
            return backward
        return add

    def register(self, namespace: str, lib: Optional[torch.library.Library] = None) -> None:
        """Fake kernels, autograd and autocast rules of this family for the ops of
        `namespace`. With `lib` (a torch.library.Library of that namespace) the registrations
        live as long as it does, so a test can register and drop them."""
        for name, fake in self.fakes.items():
            torch.library.register_fake(f"{namespace}::{name}", fake, lib=lib)
        for name, (backward_name, backward, setup) in self.autograds.items():
            backward_op = getattr(getattr(torch.ops, namespace), backward_name).default
            torch.library.register_autograd(
                f"{namespace}::{name}",
                functools.partial(backward, raising_promised_types(backward_op)),
                setup_context=setup, lib=lib,
            )
            # Under autocast the losses run in float32, as F.cross_entropy does: low-precision
            # activations are upcast to meet the float32 weight (the backward casts them back).
            for device in ("cpu", "cuda"):
                torch.library.register_autocast(f"{namespace}::{name}", device, torch.float32,
                                                lib=lib)
