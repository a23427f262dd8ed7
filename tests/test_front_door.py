"""The README stays a front door: at most 250 lines, no docs page over 400, and its quick
start prints what the README says it prints (pytest-markdown-docs, run by `make test`, only
checks that the README's blocks run)."""

import contextlib
import io
import os
import re

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf8") as f:
        return f.read()


def test_readme_and_docs_stay_short():
    assert len(read("README.md").splitlines()) <= 250
    long = []
    for folder, _, files in os.walk(os.path.join(ROOT, "docs")):
        if "_build" in folder:
            continue
        for name in files:
            if name.endswith(".md"):
                path = os.path.join(folder, name)
                lines = len(read(path).splitlines())
                if lines > 400:
                    long.append(f"{os.path.relpath(path, ROOT)} ({lines} lines)")
    assert not long, "docs pages over 400 lines: " + ", ".join(long)


@pytest.mark.skipif(not torch.__version__.startswith("2.13.0"),
                    reason="the README gives the output of torch 2.13.0's generator")
def test_quick_start_prints_what_the_readme_says():
    text = read("README.md")
    section = text[text.index("## Quick start"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    expected = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue() == expected
