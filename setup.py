"""Build of fastsoftmax._C with torch.utils.cpp_extension.

CPU sources are always compiled; CUDA sources when the installed torch was built with CUDA
and nvcc is found. Overrides: FORCE_CUDA=1 (build CUDA even without a visible GPU, e.g. in a
wheel-building container) and FORCE_ONLY_CPU=1. TORCH_CUDA_ARCH_LIST defaults to Ampere and
Hopper (8.0;8.6;9.0+PTX). Build isolation must be off: the extension links against the torch
it is built with, so it has to be the torch it will run with.
"""

import glob
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ARCH_LIST = "8.0;8.6;9.0+PTX"


def with_cuda() -> bool:
    if os.environ.get("FORCE_ONLY_CPU", "0") == "1":
        return False
    if os.environ.get("FORCE_CUDA", "0") == "1":
        return True
    return torch.version.cuda is not None and CUDA_HOME is not None


def sources(pattern: str) -> list:
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, pattern)))


def extension():
    cuda = with_cuda()
    arch_list = ""
    if cuda:
        arch_list = os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_LIST)
    defines = [
        ("FASTSOFTMAX_TORCH_VERSION", '"%s"' % torch.__version__),
        ("FASTSOFTMAX_CUDA_ARCH_LIST", '"%s"' % arch_list),
    ]
    # at::parallel_for is a header template over OpenMP: without -fopenmp it runs serially.
    cxx_flags = ["-O3", "-fopenmp"]
    link_flags = ["-fopenmp"]
    files = sources("csrc/*.cpp") + sources("csrc/cpu/*.cpp")
    if not cuda:
        return CppExtension(
            "fastsoftmax._C",
            files,
            define_macros=defines,
            extra_compile_args={"cxx": cxx_flags},
            extra_link_args=link_flags,
        )
    nvcc_flags = ["-O3", "--expt-relaxed-constexpr", "-lineinfo"]
    return CUDAExtension(
        "fastsoftmax._C",
        files + sources("csrc/cuda/*.cu"),
        define_macros=defines + [("WITH_CUDA", None), ("USE_CUDA", None)],
        extra_compile_args={"cxx": cxx_flags, "nvcc": nvcc_flags},
        extra_link_args=link_flags,
    )


setup(
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
