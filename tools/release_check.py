"""Checks that what `make dist` built can be released (make release-check).

    python tools/release_check.py --twine TWINE DIST_DIR [DIST_DIR ...]

Each check prints "release: ok <check>" or "release: FAIL <check>: <why>"; the exit status
is 1 if any failed.
  version    pyproject.toml's version, fastsoftmax.__version__ in the checkout and the
             CHANGELOG's top entry agree, and the CHANGELOG has an entry for it
  files      the DIRs hold one sdist and at least one wheel, each of that version (a CUDA
             wheel with a local tag, 0.1.0+cu130), and nothing else
  tags       every wheel is cp310-abi3 and manylinux, in its file name and its WHEEL file
  twine      `twine check --strict` passes on every file (the README renders as the
             long description)
  readme     the README's Install section's first command is `pip install fastsoftmax`
Needs no torch: fastsoftmax/_version.py is loaded on its own.
"""

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAILED = []


def check(name, fn):
    try:
        detail = fn()
    except Exception as exc:  # each failure is one line; the run goes on
        FAILED.append(name)
        print(f"release: FAIL {name}: {exc}")
        return None
    print(f"release: ok {name}" + (f": {detail}" if detail else ""))
    return detail


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def declared_version():
    project = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", read("pyproject.toml"),
                        re.MULTILINE | re.DOTALL).group(1)
    return re.search(r'^version\s*=\s*"([^"]+)"', project, re.MULTILINE).group(1)


def checkout_version():
    """fastsoftmax.__version__ as the checkout computes it, without importing torch."""
    spec = importlib.util.spec_from_file_location(
        "fastsoftmax_version", os.path.join(ROOT, "fastsoftmax", "_version.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.version()


def versions():
    declared = declared_version()
    top = re.search(r"^## (\S+)", read("CHANGELOG.md"), re.MULTILINE)
    found = {"pyproject.toml": declared, "fastsoftmax.__version__": checkout_version(),
             "CHANGELOG.md's top entry": top.group(1) if top else None}
    if len(set(found.values())) != 1:
        raise ValueError(", ".join(f"{k} {v}" for k, v in found.items()))
    return declared


def files(dirs, version):
    names = sorted(f for d in dirs for f in os.listdir(d))
    sdists = [f for f in names if f.endswith(".tar.gz")]
    wheels = [f for f in names if f.endswith(".whl")]
    other = sorted(set(names) - set(sdists) - set(wheels))
    if other or len(sdists) != 1 or not wheels:
        raise ValueError(f"want one sdist and wheels only, have {names}")
    if sdists[0] != f"fastsoftmax-{version}.tar.gz":
        raise ValueError(f"sdist {sdists[0]}, want fastsoftmax-{version}.tar.gz")
    for w in wheels:
        if not re.fullmatch(rf"fastsoftmax-{re.escape(version)}(\+cu\d+)?-.+\.whl", w):
            raise ValueError(f"wheel {w} is not version {version} (or {version}+cuXYZ)")
    return ", ".join(names)


def tags(paths):
    for path in paths:
        name = os.path.basename(path)
        platform = name[:-4].split("-")[-1]
        if not name.endswith("-cp310-abi3-" + platform + ".whl") or not all(
                p.startswith("manylinux") for p in platform.split(".")):
            raise ValueError(f"{name}: want cp310-abi3 and manylinux tags")
        with zipfile.ZipFile(path) as z:
            wheel = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL")))
        inside = re.findall(r"^Tag: (\S+)$", wheel.decode(), re.MULTILINE)
        if not inside or not all(t.split("-")[2].startswith("manylinux") for t in inside):
            raise ValueError(f"{name}: its WHEEL file says {inside}")
    return ", ".join(sorted({os.path.basename(p)[:-4].split("-")[-1] for p in paths}))


def twine(executable, paths):
    run = subprocess.run([executable, "check", "--strict", *paths], capture_output=True,
                         text=True)
    if run.returncode:
        raise ValueError((run.stdout + run.stderr).strip())
    return f"{len(paths)} files"


def readme():
    section = re.search(r"^## Install\n(.*?)(?=^## )", read("README.md"),
                        re.MULTILINE | re.DOTALL)
    if not section:
        raise ValueError("README.md has no '## Install' section")
    commands = re.findall(r"^pip install .*$", section.group(1), re.MULTILINE)
    if not commands or commands[0].split("#")[0].strip() != "pip install fastsoftmax":
        raise ValueError(f"its first pip command is {commands[:1]}, want "
                         "`pip install fastsoftmax`")
    return commands[0].split("#")[0].strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--twine", required=True, help="the twine executable")
    parser.add_argument("dirs", nargs="+", help="folders of built distributions")
    args = parser.parse_args()
    version = check("version", versions)
    if version:
        check("files", lambda: files(args.dirs, version))
    paths = [os.path.join(d, f) for d in args.dirs for f in sorted(os.listdir(d))]
    check("tags", lambda: tags([p for p in paths if p.endswith(".whl")]))
    check("twine", lambda: twine(args.twine, paths))
    check("readme", readme)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
