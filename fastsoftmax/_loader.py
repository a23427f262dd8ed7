"""Loads the compiled extension and refuses a build that does not match this torch."""

import torch

_HOW_TO_BUILD = (
    "Build it against the torch you run with: `pip install --no-build-isolation .` "
    "(or `python setup.py build_ext --inplace` in a source checkout; `make build` does that)."
)


def load():
    try:
        from fastsoftmax import _C
    except ImportError as exc:
        raise ImportError(
            f"fastsoftmax's compiled extension fastsoftmax._C could not be imported ({exc}). "
            + _HOW_TO_BUILD
        ) from exc
    built = _C.build_info()["torch_version"]
    if built != torch.__version__:
        raise ImportError(
            f"fastsoftmax._C was built against torch {built} but torch {torch.__version__} is "
            "installed; the extension only works with the torch it was compiled with. "
            + _HOW_TO_BUILD
        )
    return _C
