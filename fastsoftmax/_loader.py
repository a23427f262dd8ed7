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


def _check_cuda_torch(info: dict) -> None:
    """A CUDA build (the +cuXYZ wheel) links torch's CUDA libraries and the CUDA runtime of its
    major version, which a CPU-only torch or one of another CUDA major lacks: the loader would
    say "libtorch_cuda.so: cannot open shared object file". Say which wheel fits instead."""
    from fastsoftmax._version import version

    built = info["cuda_version"] or "?"
    have = torch.version.cuda
    if have is not None and have.split(".")[0] == built.split(".")[0]:
        return
    base, _, tag = version().partition("+")
    torch_is = "a CPU-only build" if have is None else f"built for CUDA {have}"
    # pip takes 0.1.0+cu130 over 0.1.0 whenever it sees both: the CUDA index must be left out.
    fits = (f"the CPU wheel with `pip install --force-reinstall --no-deps fastsoftmax=={base}` "
            f"from the main index, not the {tag or 'CUDA'} one"
            if have is None else
            f"the wheel for CUDA {have} (from the cu{have.replace('.', '')} index), or build from "
            f"source: `pip install --no-build-isolation fastsoftmax=={base} --no-binary "
            "fastsoftmax`")
    raise ImportError(
        f"fastsoftmax {version()} carries CUDA {built} kernels and needs torch's CUDA "
        f"{built.split('.')[0]} build, but torch {torch.__version__} is {torch_is}: install {fits}."
    )


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
    if info["cuda"]:
        _check_cuda_torch(info)
    try:
        from fastsoftmax import _C
    except ImportError as exc:
        raise ImportError(
            f"fastsoftmax's compiled extension fastsoftmax._C could not be imported ({exc}). "
            + _HOW_TO_BUILD
        ) from exc
    return _C
