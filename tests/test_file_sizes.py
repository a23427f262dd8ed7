"""Every source file stays readable in one sitting: at most 400 lines of Python, C++, CUDA or
shell in the package, the native code, the tests, the benchmarks and the tools (the docs pages
have their own limit in test_front_door.py)."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("fastsoftmax", "csrc", "tests", "bench", "tools", "docs")
SUFFIXES = (".py", ".cpp", ".h", ".cu", ".cuh", ".sh")
LIMIT = 400


def _sources():
    for folder in FOLDERS:
        for parent, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "_build", "__pycache__"))]
            for name in files:
                if name.endswith(SUFFIXES):
                    yield os.path.join(parent, name)


def test_no_source_file_is_over_400_lines():
    sources = list(_sources())
    assert len(sources) > 100  # the walk found the tree
    long = []
    for path in sources:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = sum(1 for _ in f)
        if lines > LIMIT:
            long.append(f"{os.path.relpath(path, ROOT)} ({lines})")
    assert not long, "source files over 400 lines: " + ", ".join(sorted(long))
