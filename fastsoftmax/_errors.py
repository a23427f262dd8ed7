"""The error types of the native ops.

Kernels built on LibTorch's stable ABI can raise only RuntimeError; a check that promises
another type tags its message (csrc/common/stable.h, FS_CHECK_VALUE / FS_CHECK_TYPE), and
fastsoftmax.ops re-raises it as that type through `raising_promised_types`.
"""

import functools

_TAGGED_ERRORS = {"ValueError: ": ValueError, "TypeError: ": TypeError}


# The dispatcher's words when an op has no kernel for a device: with a CPU-only build (the
# plain wheel) under torch's CUDA build, a CUDA tensor reaches no kernel at all.
_NO_KERNEL = "with arguments from the 'CUDA' backend"
_NO_CUDA_KERNELS = (
    "this fastsoftmax build has no CUDA kernels (fastsoftmax.build_info()['cuda'] is False), "
    "so its ops take CPU tensors only: for CUDA tensors install the CUDA wheel, fastsoftmax "
    "with the +cu130 tag from the cu130 index (docs/building.md)")


def _translated(error: RuntimeError) -> Exception:
    text = str(error)
    if isinstance(error, NotImplementedError) and _NO_KERNEL in text:
        return NotImplementedError(f"{_NO_CUDA_KERNELS}. ({text.splitlines()[0]})")
    for tag, kind in _TAGGED_ERRORS.items():
        at = text.find(tag)
        if at >= 0:
            return kind(text[at + len(tag):])
    return error


def raising_promised_types(op):
    """`op` with a tagged RuntimeError re-raised as the type its tag names."""
    @functools.wraps(op)
    def call(*args):
        try:
            return op(*args)
        except RuntimeError as error:
            translated = _translated(error)
            if translated is error:
                raise
            raise translated from None

    return call
