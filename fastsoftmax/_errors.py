"""The error types of the native ops.

Kernels built on LibTorch's stable ABI can raise only RuntimeError; a check that promises
another type tags its message (csrc/common/stable.h, FS_CHECK_VALUE / FS_CHECK_TYPE), and
fastsoftmax.ops re-raises it as that type through `raising_promised_types`.
"""

import functools

_TAGGED_ERRORS = {"ValueError: ": ValueError, "TypeError: ": TypeError}


def _translated(error: RuntimeError) -> Exception:
    text = str(error)
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
