"""Build of fastsoftmax._C with torch.utils.cpp_extension.

CPU sources are always compiled; CUDA sources when the installed torch was built with CUDA
and the CUDA toolkit is found. Overrides: FORCE_CUDA=1 (build CUDA even without a visible
GPU, e.g. in a wheel-building container; a toolkit that cannot be found is then an error)
and FORCE_ONLY_CPU=1. TORCH_CUDA_ARCH_LIST defaults to Ampere and Hopper (8.0;8.6;9.0+PTX).
CUDA_HOME (or CUDA_PATH) names the toolkit; unset, it is found from nvcc (tools/find_cuda.py).

The extension targets LibTorch's stable ABI (TORCH_TARGET_VERSION, torch 2.11) and Python's
limited API (abi3 from 3.10, the oldest Python torch 2.11 supports), so one wheel serves
every later torch and Python. csrc/ includes no classic ATen/c10/torch header (those refuse
TORCH_TARGET_VERSION, so the build fails if one comes back); tools/abi_check.sh checks the
built library's symbols. Build isolation must be off: the extension is built with the
installed torch.
"""

import glob
import os
import sys

try:
    import torch
except ImportError:
    # pip's default build isolation builds in a fresh environment without torch (pyproject's
    # build requires leave torch out so that pip does not download one there): stop at once.
    sys.exit("fastsoftmax builds against the torch installed in your environment: install "
             "torch, then build with `pip install --no-build-isolation fastsoftmax` (or "
             "`pip install --no-build-isolation fastsoftmax-<version>.tar.gz`).")
from setuptools import setup
from setuptools.command.egg_info import egg_info

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import find_cuda  # noqa: E402

DEFAULT_ARCH_LIST = "8.0;8.6;9.0+PTX"
TORCH_TARGET = (2, 11)  # the oldest torch whose stable ABI the wheel targets, and loads under


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


def extension():
    arch_list = ""
    if CUDA:
        arch_list = os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_LIST)
    files = sources("csrc/*.cpp") + sources("csrc/cpu/*.cpp")
    if CUDA:
        files += sources("csrc/cuda/*.cu")
    # Py_LIMITED_API comes from torch's build (3.10, with py_limited_api=True below).
    defines = [("TORCH_TARGET_VERSION", "0x%02x%02x000000000000" % TORCH_TARGET)]
    # Read by BuildInfoExtension below, written next to the .so as fastsoftmax/_build_info.py.
    BuildInfoExtension.info = {
        "cuda": CUDA,
        "cuda_version": find_cuda.cuda_version(os.environ["CUDA_HOME"]) if CUDA else None,
        "cuda_arch_list": arch_list,
        "torch_version": torch.__version__,
        "torch_target_version": "%d.%d" % TORCH_TARGET,
    }
    cxx_flags = ["-O3"]
    if not CUDA:
        return CppExtension(
            "fastsoftmax._C",
            files,
            define_macros=defines,
            extra_compile_args={"cxx": cxx_flags},
            py_limited_api=True,
        )
    nvcc_flags = ["-O3", "--expt-relaxed-constexpr", "-lineinfo"]
    return CUDAExtension(
        "fastsoftmax._C",
        files,
        define_macros=defines + [("WITH_CUDA", None), ("USE_CUDA", None)],
        extra_compile_args={"cxx": cxx_flags, "nvcc": nvcc_flags},
        py_limited_api=True,
    )


class BuildInfoExtension(BuildExtension):
    """torch's build, plus fastsoftmax/_build_info.py next to the built .so: how it was
    built, readable before the library is loaded (see fastsoftmax/_loader.py)."""

    info: dict = {}

    def run(self):
        super().run()
        package = os.path.dirname(self.get_ext_fullpath("fastsoftmax._C"))
        os.makedirs(package, exist_ok=True)
        text = ('"""How fastsoftmax._C was built (written by setup.py; not in git)."""\n\n'
                f"BUILD_INFO = {self.info!r}\n")
        with open(os.path.join(package, "_build_info.py"), "w", encoding="utf-8") as f:
            f.write(text)


def cuda_tag() -> str:
    """The CUDA build's local version tag, as torch's wheels have it: "+cu130" for a torch
    built for CUDA 13.0, whose runtime libraries the extension links. The version itself stays
    pyproject.toml's; the CPU build has no tag."""
    return "+cu" + torch.version.cuda.replace(".", "") if CUDA and torch.version.cuda else ""


class TaggedEggInfo(egg_info):
    """The metadata's version is pyproject.toml's plus cuda_tag(). Set here rather than as an
    option: an sdist's setup.cfg says `tag_build =` and would override the option."""

    def finalize_options(self):
        self.tag_build = cuda_tag()
        super().finalize_options()


setup(
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildInfoExtension.with_options(use_ninja=True),
              "egg_info": TaggedEggInfo},
    # FASTSOFTMAX_BUILD_BASE keeps a second build's objects apart (make cuda-wheel); given as
    # `setup.py build -b DIR bdist_wheel` instead, bdist_wheel reinitializes build and
    # compiles everything twice.
    options={"bdist_wheel": {"py_limited_api": "cp310"},
             "build": {"build_base": os.environ.get("FASTSOFTMAX_BUILD_BASE", "build")}},
)
