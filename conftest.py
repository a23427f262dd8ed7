"""Shell blocks of the README and docs/ that CI runs beside their Python blocks.

pytest-markdown-docs (`pytest --markdown-docs README.md docs`) runs every ```python block; it
has no shell runner. A shell block opts in with the fence ```bash runnable: with
--markdown-docs, each such block runs under `bash -euo pipefail` from the repository's root,
with this interpreter's folder first on PATH (its console scripts and torchrun), and fails
with its output when any line fails. Blocks without the word are shown, not run: they need
data, a GPU or minutes.
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 300


def runnable_shell_blocks(path):
    """(first line number, source) of each ```bash runnable block of a markdown file."""
    blocks, source, start = [], None, 0
    with open(path, encoding="utf8") as f:
        for number, line in enumerate(f, 1):
            fence = line.strip()
            if source is None and fence.startswith("```") and fence[3:].split() == [
                    "bash", "runnable"]:
                source, start = [], number + 1
            elif source is not None and fence == "```":
                blocks.append((start, "".join(source)))
                source = None
            elif source is not None:
                source.append(line)
    return blocks


class ShellBlock(pytest.Item):
    def __init__(self, *, source, **kwargs):
        super().__init__(**kwargs)
        self.source = source

    def runtest(self):
        env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
                   + os.environ.get("PATH", ""))
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", self.source], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        if done.returncode:
            raise AssertionError(f"exit {done.returncode}\n{self.source}\n--- stdout\n"
                                 f"{done.stdout}\n--- stderr\n{done.stderr}")

    def repr_failure(self, excinfo, style=None):
        return str(excinfo.value)

    def reportinfo(self):
        return self.path, None, self.name


class ShellBlocks(pytest.File):
    def collect(self):
        for line, source in runnable_shell_blocks(self.path):
            yield ShellBlock.from_parent(self, name=f"[bash runnable][line:{line}]",
                                         source=source)


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".md" and getattr(parent.config.option, "markdowndocs", False):
        return ShellBlocks.from_parent(parent, path=file_path)
    return None
