"""Finds the CUDA toolkit for setup.py (and prints it when run: `python tools/find_cuda.py`).

torch.utils.cpp_extension guesses CUDA_HOME as the directory above the `nvcc` on PATH; when
that nvcc is a wrapper script or a symlink outside the toolkit, the guess has no
include/cuda.h and the build fails late with "cuda.h: No such file or directory". Here a
directory counts only if it holds include/cuda.h. Order: CUDA_HOME or CUDA_PATH (taken as
given: the user's override), the nvcc on PATH with its symlinks resolved, the toolkit nvcc
itself reports (`nvcc --dryrun` prints its TOP, which sees through wrapper scripts), and
/usr/local/cuda.
"""

import os
import re
import shutil
import subprocess
import sys

DEFAULT = "/usr/local/cuda"


def _is_toolkit(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "include", "cuda.h"))


def _nvcc_top(nvcc: str) -> str:
    """The toolkit directory nvcc reports for itself, or "" when it reports none."""
    try:
        run = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    found = re.search(r"^#\$ TOP=(.+)$", run.stdout + run.stderr, re.MULTILINE)
    return os.path.realpath(found.group(1).strip()) if found else ""


def cuda_home():
    """(toolkit directory or None, the places tried, each with how it was found)."""
    given = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if given:
        return given, [f"{given} (CUDA_HOME/CUDA_PATH)"]
    tried = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates = [
            (os.path.dirname(os.path.dirname(os.path.realpath(nvcc))),
             f"the nvcc on PATH, {nvcc}, with symlinks resolved"),
            (_nvcc_top(nvcc), f"the TOP that `{nvcc} --dryrun` reports"),
        ]
    else:
        candidates = []
        tried.append("nvcc (not on PATH)")
    candidates.append((DEFAULT, "the default location"))
    for path, how in candidates:
        if not path:
            tried.append(f"{how} (none reported)")
            continue
        tried.append(f"{path} ({how})")
        if _is_toolkit(path):
            return os.path.realpath(path), tried
    return None, tried


def not_found(tried) -> str:
    return ("the CUDA toolkit (a directory with include/cuda.h) was not found; tried: "
            + "; ".join(tried) + ".")


def cuda_version(home: str):
    """"13.0" from the toolkit's cuda.h (CUDA_VERSION 13000), or None."""
    try:
        with open(os.path.join(home, "include", "cuda.h"), encoding="utf-8") as f:
            found = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", f.read())
    except OSError:
        return None
    if not found:
        return None
    number = int(found.group(1))
    return f"{number // 1000}.{number % 1000 // 10}"


if __name__ == "__main__":
    home, tried = cuda_home()
    if home is None:
        sys.exit(not_found(tried))
    print(home, cuda_version(home))
