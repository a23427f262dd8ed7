"""Builds the emulated CUDA extension used by the tests: every csrc/cuda/*.cu compiled by the
host compiler against csrc/emu/cuda_emu.h (FASTSOFTMAX_EMULATE_CUDA), with the one schema
file, into build/cuda_emu/fastsoftmax_emu.so. The ops register as fastsoftmax_emu::* on CPU
tensors; tests/cuda_emulator.py loads them. Never part of the wheel.

Two libraries, because they are compiled differently:
  - the emulator's runtime (csrc/emu/*.cpp but the self-test kernels), plain, into
    build/cuda_emu/runtime/fastsoftmax_emu_rt.so;
  - the kernels (csrc/cuda, the self-test kernels, ops.cpp) with GCC's -fsanitize=thread
    instrumentation but no TSan runtime: the runtime library defines the hooks it calls, so
    the emulator sees every load and store of kernel code (csrc/emu/hooks.cpp). Linked
    against the runtime, which the loader finds by rpath.
Under AddressSanitizer (EMU_CFLAGS with -fsanitize=address, tools/sanitize.sh) the kernels
are not instrumented (GCC cannot do both): blocks then run one after another, unchecked.

Each .cu is included by a one-line generated .cpp (the host compiler does not take .cu
files through torch's build), so there is one copy of every kernel body.
"""

import glob
import os
import sys

from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "build", "cuda_emu")
RUNTIME_OUT = os.path.join(OUT, "runtime")
LIBRARY = os.path.join(OUT, "fastsoftmax_emu.so")
INSTRUMENT = ["-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0", "-Wno-tsan"]


def _wrapper(cu: str) -> str:
    os.makedirs(os.path.join(OUT, "src"), exist_ok=True)
    path = os.path.join(OUT, "src", os.path.basename(cu) + ".cpp")
    text = f'#include "{cu}"\n'
    if not os.path.exists(path) or open(path).read() != text:  # keep ninja incremental
        with open(path, "w") as f:
            f.write(text)
    return path


def main() -> int:
    emu = sorted(glob.glob(os.path.join(ROOT, "csrc", "emu", "*.cpp")))
    selftests = [p for p in emu if os.path.basename(p).startswith("emu_selftest")]
    runtime = [p for p in emu if p not in selftests]
    kernels = [os.path.join(ROOT, "csrc", "ops.cpp")] + selftests
    kernels += [_wrapper(cu) for cu in sorted(glob.glob(os.path.join(ROOT, "csrc", "cuda", "*.cu")))]
    # Unique sampling gives up after 2^20 draws instead of 2^32, so that a test reaches it.
    flags = ["-O2", "-std=c++20", "-DFASTSOFTMAX_EMULATE_CUDA", "-Wno-unknown-pragmas",
             "-DFASTSOFTMAX_MAX_UNIQUE_TRIES=1048576"]
    flags += os.environ.get("EMU_CFLAGS", "").split()
    ldflags = os.environ.get("EMU_LDFLAGS", "").split()
    instrument = [] if "address" in " ".join(flags) else INSTRUMENT
    os.makedirs(RUNTIME_OUT, exist_ok=True)
    verbose = "-v" in sys.argv
    cpp_extension.load(name="fastsoftmax_emu_rt", sources=runtime, extra_cflags=flags,
                       extra_ldflags=ldflags, build_directory=RUNTIME_OUT,
                       is_python_module=False, verbose=verbose)
    cpp_extension.load(
        name="fastsoftmax_emu",
        sources=kernels,
        extra_cflags=flags + instrument,
        extra_ldflags=ldflags + [f"-L{RUNTIME_OUT}", "-l:fastsoftmax_emu_rt.so",
                                 f"-Wl,-rpath,{RUNTIME_OUT}"],
        build_directory=OUT,
        is_python_module=False,
        verbose=verbose,
    )
    print("built", os.path.relpath(LIBRARY, ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
