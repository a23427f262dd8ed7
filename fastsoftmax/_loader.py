"""Loads the compiled extension, refusing a torch it cannot work with."""

import re

import torch

_HOW_TO_BUILD = (
    "Build it against the installed torch: `pip install --no-build-isolation .` "
    "(or `python setup.py build_ext --inplace` in a source checkout; `make build` does that)."
)


def _release(version: str) -> tuple:
    """(major, minor) of a torch version string such as "2.14.1+cu130" or "2.12.0.dev20260101"."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def build_info() -> dict:
    """How the extension was built (fastsoftmax/_build_info.py, written by setup.py)."""
    try:
        from fastsoftmax._build_info import BUILD_INFO
    except ImportError as exc:
        raise ImportError(
            f"fastsoftmax's build record fastsoftmax/_build_info.py is missing ({exc}); "
            "setup.py writes it next to the compiled extension. " + _HOW_TO_BUILD
        ) from exc
    return dict(BUILD_INFO)


def load():
    info = build_info()  # a missing build record means a broken install: say how to build
    # The oldest torch whose stable ABI the build targets (TORCH_TARGET_VERSION in setup.py).
    target = info["torch_target_version"]
    if _release(torch.__version__) < _release(target):
        raise ImportError(
            f"fastsoftmax needs torch {target} or newer, but torch {torch.__version__} is "
            f"installed: its compiled extension is built on LibTorch's stable ABI as of torch "
            f"{target}. Upgrade torch (`pip install 'torch>={target}'`)."
        )
    try:
        from fastsoftmax import _C
    except ImportError as exc:
        raise ImportError(
            f"fastsoftmax's compiled extension fastsoftmax._C could not be imported ({exc}). "
            + _HOW_TO_BUILD
        ) from exc
    return _C
