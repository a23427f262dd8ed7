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


def test_shell_blocks_opt_in_with_runnable(tmp_path):
    # The root conftest.py runs ```bash runnable blocks under --markdown-docs; plain ```bash
    # blocks are only shown. Its parser must find exactly the opted-in ones.
    import importlib.util
    spec = importlib.util.spec_from_file_location("root_conftest", os.path.join(ROOT,
                                                                               "conftest.py"))
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    page = tmp_path / "page.md"
    page.write_text("text\n```bash\nmake wheel\n```\n```bash runnable\necho one\necho two\n"
                    "```\n```python\nprint(1)\n```\n", encoding="utf8")
    assert root_conftest.runnable_shell_blocks(page) == [(6, "echo one\necho two\n")]
    assert root_conftest.runnable_shell_blocks(os.path.join(ROOT, "README.md"))
