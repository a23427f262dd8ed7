"""Build of fastsoftmax._C with torch.utils.cpp_extension.

CPU sources are always compiled; CUDA sources when the installed torch was built with CUDA
and the CUDA toolkit is found. Overrides: FORCE_CUDA=1 (build CUDA even without a visible
GPU, e.g. in a wheel-building container; a toolkit that cannot be found is then an error)
and FORCE_ONLY_CPU=1. TORCH_CUDA_ARCH_LIST defaults to Ampere and Hopper (8.0;8.6;9.0+PTX).
CUDA_HOME (or CUDA_PATH) names the toolkit; unset, it is found from nvcc (tools/find_cuda.py).

The extension targets LibTorch's stable ABI (TORCH_TARGET_VERSION, torch 2.11) and Python's
limited API (abi3, 3.9), so one wheel serves every later torch and Python. While a source
still includes a classic ATen/c10/torch header (the port is under way) the target version
cannot be set, since those headers refuse it: the build then says which files hold it back,
and the wheel only works with the torch it was built against (fastsoftmax/_loader.py
checks). Build isolation must be off: the extension is built with the installed torch.
"""

import glob
import os
import re
import sys

import torch
from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import find_cuda  # noqa: E402

DEFAULT_ARCH_LIST = "8.0;8.6;9.0+PTX"
PY_LIMITED_API = "0x03090000"  # abi3 from Python 3.9: the wheel is tagged cp39-abi3
TORCH_TARGET = "0x020b000000000000"  # torch 2.11, the oldest torch the wheel loads under
# Headers that refuse TORCH_TARGET_VERSION (or pull in ones that do).
CLASSIC_INCLUDE = re.compile(r"#\s*include\s*<(ATen/|c10/|torch/library\.h|torch/extension\.h)")
LOCAL_INCLUDE = re.compile(r'#\s*include\s*"([^"]+)"')


def with_cuda() -> bool:
    """Whether to build the CUDA sources. Sets CUDA_HOME in the environment when it finds
    the toolkit: torch.utils.cpp_extension reads it once, at import, so this runs first."""
    if os.environ.get("FORCE_ONLY_CPU", "0") == "1":
        return False
    forced = os.environ.get("FORCE_CUDA", "0") == "1"
    if not forced and torch.version.cuda is None:
        return False
    home, tried = find_cuda.cuda_home()
    if home is None:
        message = "fastsoftmax: " + find_cuda.not_found(tried)
        if forced:
            sys.exit(message + " FORCE_CUDA=1 asks for a CUDA build: set CUDA_HOME.")
        print(message + " Building the CPU extension only.", file=sys.stderr)
        return False
    os.environ["CUDA_HOME"] = home
    return True


CUDA = with_cuda()
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension  # noqa: E402


def sources(pattern: str) -> list:
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


def classic_sources(files: list) -> list:
    """The sources that reach a classic (non-stable) torch header, through csrc's own
    headers too."""
    seen = {}

    def classic(path: str) -> bool:
        if path not in seen:
            seen[path] = False
            with open(path, encoding="utf-8") as f:
                text = f.read()
            here = os.path.dirname(path)
            seen[path] = bool(CLASSIC_INCLUDE.search(text)) or any(
                classic(os.path.normpath(os.path.join(here, inc)))
                for inc in LOCAL_INCLUDE.findall(text)
                if os.path.exists(os.path.join(here, inc))
            )
        return seen[path]

    return [f for f in files if classic(os.path.join(ROOT, f))]


def extension():
    arch_list = ""
    if CUDA:
        arch_list = os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_LIST)
    files = sources("csrc/*.cpp") + sources("csrc/cpu/*.cpp")
    if CUDA:
        files += sources("csrc/cuda/*.cu")
    held_back = classic_sources(files)
    defines = [("Py_LIMITED_API", PY_LIMITED_API)]
    if held_back:
        print("fastsoftmax: building without TORCH_TARGET_VERSION (the wheel is tied to torch "
              f"{torch.__version__}): classic torch headers remain in " + ", ".join(held_back),
              file=sys.stderr)
    else:
        defines.append(("TORCH_TARGET_VERSION", TORCH_TARGET))
    # Read by BuildInfoExtension below, written next to the .so as fastsoftmax/_build_info.py.
    BuildInfoExtension.info = {
        "cuda": CUDA,
        "cuda_version": find_cuda.cuda_version(os.environ["CUDA_HOME"]) if CUDA else None,
        "cuda_arch_list": arch_list,
        "torch_version": torch.__version__,
        "stable_abi": not held_back,
        "torch_target_version": "2.11" if not held_back else None,
    }
    # at::parallel_for is a header template over OpenMP: without -fopenmp it runs serially.
    cxx_flags = ["-O3", "-fopenmp"]
    link_flags = ["-fopenmp"]
    if not CUDA:
        return CppExtension(
            "fastsoftmax._C",
            files,
            define_macros=defines,
            extra_compile_args={"cxx": cxx_flags},
            extra_link_args=link_flags,
            py_limited_api=True,
        )
    nvcc_flags = ["-O3", "--expt-relaxed-constexpr", "-lineinfo"]
    return CUDAExtension(
        "fastsoftmax._C",
        files,
        define_macros=defines + [("WITH_CUDA", None), ("USE_CUDA", None)],
        extra_compile_args={"cxx": cxx_flags, "nvcc": nvcc_flags},
        extra_link_args=link_flags,
        py_limited_api=True,
    )


class BuildInfoExtension(BuildExtension):
    """torch's build, plus fastsoftmax/_build_info.py next to the built .so: how it was
    built, readable before the library is loaded (see fastsoftmax/_loader.py)."""

    info: dict = {}

    def _add_compile_flag(self, extension, flag):
        # torch adds its own Py_LIMITED_API (3.10) for py_limited_api extensions; the wheel
        # promises 3.9 (cp39-abi3), so the define above stands.
        if flag.startswith("-DPy_LIMITED_API="):
            return
        super()._add_compile_flag(extension, flag)

    def run(self):
        super().run()
        package = os.path.dirname(self.get_ext_fullpath("fastsoftmax._C"))
        os.makedirs(package, exist_ok=True)
        text = ('"""How fastsoftmax._C was built (written by setup.py; not in git)."""\n\n'
                f"BUILD_INFO = {self.info!r}\n")
        with open(os.path.join(package, "_build_info.py"), "w", encoding="utf-8") as f:
            f.write(text)


setup(
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildInfoExtension.with_options(use_ninja=True)},
    # FASTSOFTMAX_BUILD_BASE keeps a second build's objects apart (make cuda-wheel); given as
    # `setup.py build -b DIR bdist_wheel` instead, bdist_wheel reinitializes build and
    # compiles everything twice.
    options={"bdist_wheel": {"py_limited_api": "cp39"},
             "build": {"build_base": os.environ.get("FASTSOFTMAX_BUILD_BASE", "build")}},
)
