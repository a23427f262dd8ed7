"""Builds the emulated CUDA extension used by the tests: every csrc/cuda/*.cu compiled by the
host compiler against csrc/emu/cuda_emu.h (FASTSOFTMAX_EMULATE_CUDA), with the one schema
file, into build/cuda_emu/fastsoftmax_emu.so. The ops register as fastsoftmax_emu::* on CPU
tensors; tests/cuda_emulator.py loads them. Never part of the wheel.

Each .cu is included by a one-line generated .cpp (the host compiler does not take .cu
files through torch's build), so there is one copy of every kernel body.
"""

import glob
import os
import sys

from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "build", "cuda_emu")
LIBRARY = os.path.join(OUT, "fastsoftmax_emu.so")


def _wrapper(cu: str) -> str:
    os.makedirs(os.path.join(OUT, "src"), exist_ok=True)
    path = os.path.join(OUT, "src", os.path.basename(cu) + ".cpp")
    text = f'#include "{cu}"\n'
    if not os.path.exists(path) or open(path).read() != text:  # keep ninja incremental
        with open(path, "w") as f:
            f.write(text)
    return path


def main() -> int:
    sources = [os.path.join(ROOT, "csrc", "ops.cpp")]
    sources += sorted(glob.glob(os.path.join(ROOT, "csrc", "emu", "*.cpp")))
    sources += [_wrapper(cu) for cu in sorted(glob.glob(os.path.join(ROOT, "csrc", "cuda", "*.cu")))]
    # Unique sampling gives up after 2^20 draws instead of 2^32, so that a test reaches it.
    flags = ["-O2", "-std=c++20", "-DFASTSOFTMAX_EMULATE_CUDA", "-Wno-unknown-pragmas",
             "-DFASTSOFTMAX_MAX_UNIQUE_TRIES=1048576"]
    flags += os.environ.get("EMU_CFLAGS", "").split()
    cpp_extension.load(
        name="fastsoftmax_emu",
        sources=sources,
        extra_cflags=flags,
        extra_ldflags=os.environ.get("EMU_LDFLAGS", "").split(),
        build_directory=OUT,
        is_python_module=False,
        verbose="-v" in sys.argv,
    )
    print("built", os.path.relpath(LIBRARY, ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
