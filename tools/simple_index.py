"""A PEP 503 "simple" package index in a folder, from built distributions, for pip to install
from as it would from a real index (make wheel-check, make dist).

    python tools/simple_index.py OUT DIR [DIR ...]
        copies every sdist and wheel of the DIRs to OUT/simple/<project>/ and writes
        OUT/simple/index.html and OUT/simple/<project>/index.html: each link with the file's
        sha256 and its Requires-Python (PEP 503 and 345), read from the file's own metadata.
        pip then installs with `--index-url file://OUT/simple`.

    python tools/simple_index.py --usual-indexes
        prints this machine's configured indexes as pip arguments (`--extra-index-url URL`
        each; https://pypi.org/simple when pip's configuration names no index-url): a
        command-line --index-url and --extra-index-url replace the configured ones, so a
        command that puts the folder first names the usual indexes again with these.
"""

import hashlib
import html
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import HeaderParser


def project(filename: str) -> str:
    """The PEP 503 normalized project name of an sdist or wheel file name."""
    name = re.match(r"(.+?)-\d", filename).group(1)
    return re.sub(r"[-_.]+", "-", name).lower()


def requires_python(path: str):
    """Requires-Python of a wheel's METADATA or an sdist's PKG-INFO, or None."""
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as z:
            name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            text = z.read(name).decode()
    else:
        with tarfile.open(path) as t:
            member = next(m for m in t.getmembers() if m.name.count("/") == 1
                          and m.name.endswith("/PKG-INFO"))
            text = t.extractfile(member).read().decode()
    return HeaderParser().parsestr(text).get("Requires-Python")


def page(title: str, links: list) -> str:
    body = "\n".join(links)
    return (f"<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" "
            f"content=\"1.0\"><title>{html.escape(title)}</title></head>\n<body>\n"
            f"{body}\n</body></html>\n")


def build(out: str, dirs: list) -> None:
    files = sorted(os.path.join(d, f) for d in dirs for f in os.listdir(d)
                   if f.endswith((".whl", ".tar.gz")))
    if not files:
        sys.exit(f"simple_index: no .whl or .tar.gz in {', '.join(dirs)}")
    simple = os.path.join(out, "simple")
    shutil.rmtree(out, ignore_errors=True)  # a file no longer in the DIRs must not be served
    projects = {}
    for path in files:
        projects.setdefault(project(os.path.basename(path)), []).append(path)
    for name, paths in projects.items():
        folder = os.path.join(simple, name)
        os.makedirs(folder)
        links = []
        for path in paths:
            base = os.path.basename(path)
            shutil.copy2(path, os.path.join(folder, base))
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            needs = requires_python(path)
            attr = f' data-requires-python="{html.escape(needs)}"' if needs else ""
            links.append(f'<a href="{html.escape(base)}#sha256={digest}"{attr}>'
                         f"{html.escape(base)}</a><br>")
            print(f"simple_index: {name}: {base}")
        with open(os.path.join(folder, "index.html"), "w", encoding="utf-8") as f:
            f.write(page(f"Links for {name}", links))
    with open(os.path.join(simple, "index.html"), "w", encoding="utf-8") as f:
        f.write(page("Simple index", [f'<a href="{n}/">{n}</a><br>' for n in projects]))


def usual_indexes() -> list:
    """pip's configured index-url (PyPI when none) and extra-index-urls, from every scope
    `pip config list` shows (files and PIP_* variables)."""
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                             capture_output=True, text=True, check=True).stdout
    index, extra = [], []
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        urls = value.strip().strip("'\"").split()
        option = key.rsplit(".", 1)[-1]
        if option == "index-url":
            index = urls
        elif option == "extra-index-url":
            extra += [u for u in urls if u not in extra]
    return (index or ["https://pypi.org/simple"]) + extra


def main(argv: list) -> None:
    if argv == ["--usual-indexes"]:
        print(" ".join(f"--extra-index-url {u}" for u in usual_indexes()))
    elif len(argv) >= 2 and not argv[0].startswith("-"):
        build(argv[0], argv[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
