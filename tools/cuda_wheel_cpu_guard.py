"""The CUDA wheel installed under a CPU-only torch: `import fastsoftmax` must raise ImportError
with one sentence that names the CPU wheel, not crash and not print the loader's
"libtorch_cuda.so: cannot open shared object file" (make cuda-wheel-check runs it).

    cd /tmp && /path/venv/bin/python /path/to/checkout/tools/cuda_wheel_cpu_guard.py

Run as a script from outside the tree, so the installed copy is the one imported. The import
runs in a child process: a crash there (a signal) is a failure with its own line.
"""

import importlib.util
import os
import subprocess
import sys

import torch

CHILD = """
try:
    import fastsoftmax
except ImportError as exc:
    print(exc)
    raise SystemExit(3)
"""


def installed_build_info() -> dict:
    """fastsoftmax/_build_info.py of the installed copy, read without importing the package
    (which is the import under test)."""
    spec = importlib.util.find_spec("fastsoftmax")
    path = os.path.join(os.path.dirname(spec.origin), "_build_info.py")
    loaded = importlib.util.spec_from_file_location("build_info_of_wheel", path)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module.BUILD_INFO


def main() -> int:
    if torch.version.cuda is not None:
        print(f"cpu_guard: FAIL torch {torch.__version__} has CUDA; run under a CPU-only torch")
        return 1
    info = installed_build_info()
    print(f"cpu_guard: torch {torch.__version__}; the installed build: {info}")
    if not info["cuda"]:
        print("cpu_guard: FAIL the installed fastsoftmax is not a CUDA build")
        return 1
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    message = run.stdout.strip()
    print(f"cpu_guard: import fastsoftmax -> exit {run.returncode}: {message or run.stderr}")
    problems = []
    if run.returncode != 3:
        problems.append("the import did not raise ImportError"
                        + (f" (killed by signal {-run.returncode})" if run.returncode < 0 else ""))
    if "pip install --force-reinstall --no-deps fastsoftmax==" not in message:
        problems.append("the message does not name the CPU wheel")
    if "cannot open shared object file" in message or message.count(". ") or "\n" in message:
        problems.append("the message is not the one sentence of fastsoftmax/_loader.py")
    for p in problems:
        print(f"cpu_guard: FAIL {p}")
    if not problems:
        print("cpu_guard: ok the CUDA wheel under a CPU-only torch names the CPU wheel")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
