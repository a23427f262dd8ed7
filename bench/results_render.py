"""Renders every result table of the README and docs/ from bench/results/*.csv.

    python bench/results_render.py            # rewrite the tables (make results)
    python bench/results_render.py --check    # exit 1 naming each table that differs

A page marks a generated table with two comments, and everything between them is the
builder's output (a table and the line naming its rows' command, machine and date):

    <!-- results: readme-cpu -->
    ...
    <!-- end results -->

The builders live in bench/tables/, one module a page. tests/test_results_tables.py runs the
check, so a table edited by hand, or rows changed without `make results`, fails CI.
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from tables import TABLES  # noqa: E402

MARKED = re.compile(r"(<!-- results: ([\w-]+) -->\n)(.*?)(<!-- end results -->)", re.S)


def pages():
    yield os.path.join(ROOT, "README.md")
    for folder, dirs, files in os.walk(os.path.join(ROOT, "docs")):
        dirs[:] = [d for d in dirs if d != "_build"]
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def render(text, used):
    """The page with every marked table rebuilt; `used` collects the names met."""
    def rebuild(m):
        name = m.group(2)
        if name not in TABLES:
            raise KeyError(f"no table builder named {name!r} (bench/tables/)")
        used.add(name)
        return m.group(1) + "\n".join(TABLES[name]()) + "\n" + m.group(4)
    return MARKED.sub(rebuild, text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="rewrite nothing; exit 1 if a page's tables differ from their rows")
    args = ap.parse_args(argv)
    used, drifted = set(), []
    for path in pages():
        with open(path, encoding="utf8") as f:
            text = f.read()
        new = render(text, used)
        if new != text:
            drifted.append(os.path.relpath(path, ROOT))
            if not args.check:
                with open(path, "w", encoding="utf8") as f:
                    f.write(new)
    unused = sorted(set(TABLES) - used)
    for path in drifted:
        print(("differs from its rows: " if args.check else "rewrote ") + path)
    if unused:
        print("builders no page uses: " + ", ".join(unused))
    return 1 if (args.check and drifted) or unused else 0


if __name__ == "__main__":
    sys.exit(main())
