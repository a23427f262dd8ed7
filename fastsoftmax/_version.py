"""fastsoftmax's version, from one source: the [project] version of pyproject.toml.

An installed fastsoftmax reports its package metadata's version (a CUDA wheel's carries its
local tag, as torch's do: "0.1.0+cu130"). A source checkout reads the pyproject.toml beside
it instead, even where metadata is found: a build leaves fastsoftmax.egg-info in the checkout
(its version that of the last build, +cu130 after make cuda-wheel), which importlib.metadata
finds whenever the checkout's root is on sys.path.
"""

import importlib.metadata
import os
import re

_HERE = os.path.dirname(os.path.realpath(__file__))


def _installed():
    """The metadata's version when this very copy is the installed one, else None: a checkout
    on sys.path must not report the version of another copy installed in the environment."""
    try:
        dist = importlib.metadata.distribution("fastsoftmax")
    except importlib.metadata.PackageNotFoundError:
        return None
    if os.path.realpath(str(dist.locate_file("fastsoftmax"))) != _HERE:
        return None
    return dist.version


def _checkout():
    """The version in the checkout's pyproject.toml (a regex: tomllib is Python 3.11+)."""
    try:
        with open(os.path.join(os.path.dirname(_HERE), "pyproject.toml"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    project = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    if not project or not re.search(r'^name\s*=\s*"fastsoftmax"', project.group(1), re.MULTILINE):
        return None  # not our checkout: a pyproject.toml that happens to sit above the package
    found = re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), re.MULTILINE)
    return found.group(1) if found else None


def version() -> str:
    return _checkout() or _installed() or "0+unknown"
