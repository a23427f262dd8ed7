"""What every result table is made of: the rows of bench/results/*.csv (bench/common.py's
schema), picked by run, case, provider, shape and metric; figures formatted one way
everywhere; and the line under a table that names its rows' file, command, machine and date.

A table is a function registered with @table(name) that returns markdown lines. It draws
every figure from rows; a figure typed into a page by hand could drift from its rows.
"""

import csv
import math
import os
import statistics
from collections import OrderedDict

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")
TABLES = OrderedDict()
_CACHE = {}


def table(name):
    """Registers a builder under `name`: the name its markers carry in a page."""
    def register(build):
        TABLES[name] = build
        return build
    return register


def rows_of(csv_name):
    """The rows of bench/results/<csv_name>.csv (cached), each tagged with its file."""
    if csv_name not in _CACHE:
        with open(os.path.join(RESULTS, csv_name + ".csv"), newline="", encoding="utf8") as f:
            _CACHE[csv_name] = [dict(r, file=csv_name + ".csv") for r in csv.DictReader(f)]
    return _CACHE[csv_name]


def pick(rows, **where):
    """The rows whose columns equal `where`'s values (a tuple or set: any of them; a callable:
    true of the value)."""
    def ok(row, key, want):
        value = row.get(key, "")
        if callable(want):
            return want(value)
        if isinstance(want, (tuple, set, frozenset, list)):
            return value in want
        return value == want
    return [r for r in rows if all(ok(r, k, v) for k, v in where.items())]


def latest_run(rows, **where):
    """The rows of the most recent run (time stamp) among those matching `where`."""
    matching = pick(rows, **where)
    if not matching:
        raise LookupError(f"no rows match {where}")
    stamp = max(r["time"] for r in matching)
    return [r for r in matching if r["time"] == stamp]


def runs_in_file(rows):
    """The rows cut into runs, in file order: a run ends where the time or the command
    changes, or where a (case, provider, shape, metric) repeats. That separates two runs of
    one command written before rows carried a time."""
    runs, seen = [], set()
    for r in rows:
        key = (r.get("case"), r.get("provider"), r.get("shape"), r.get("metric"))
        last = runs[-1][0] if runs else {}
        same_run = (r.get("time"), r["command"]) == (last.get("time"), last.get("command"))
        if not same_run or key in seen:
            runs.append([])
            seen = set()
        runs[-1].append(r)
        seen.add(key)
    return runs


def one(rows, **where):
    """The one row matching `where`; a LookupError naming the problem otherwise."""
    found = pick(rows, **where)
    if len(found) != 1:
        raise LookupError(f"{len(found)} rows match {where}, expected 1")
    return found[0]


def value(rows, **where) -> float:
    return float(one(rows, **where)["value"])


class Sources:
    """The runs a table drew from, for the line under it."""

    def __init__(self):
        self.runs = OrderedDict()

    def add(self, rows):
        for r in rows:
            key = (r["file"], r["command"], r["device"], r.get("time", "")[:10])
            self.runs[key] = True
        return rows

    def line(self, note=""):
        parts = []
        for (file, command, device, day) in self.runs:
            parts.append(f"`{command}` on {device}, {day or 'undated'} (`bench/results/{file}`)")
        text = "Rows: " + "; ".join(parts) + "."
        return text + (" " + note if note else "")


def markdown(headers, body):
    """A markdown table."""
    out = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    return out


# ---- figures, one format each --------------------------------------------------------------
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sci(x: float, digits: int = 2) -> str:
    """1.9·10⁸ (digits significant figures)."""
    if x == 0:
        return "0"
    exponent = int(math.floor(math.log10(abs(x))))
    mantissa = round(x / 10 ** exponent, digits - 1)
    if abs(mantissa) >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:.{digits - 1}f}·10{str(exponent).translate(_SUPERSCRIPT)}"


def count(x: float) -> str:
    """1,563,035."""
    return f"{x:,.0f}"


def ms(x: float) -> str:
    """A time in milliseconds, three significant figures below 100, whole above."""
    return f"{x:,.0f} ms" if x >= 100 else f"{x:.3g} ms"


def ratio(x: float) -> str:
    """11.8×."""
    return f"{x:,.0f}×" if x >= 100 else f"{x:.3g}×"


def signed(x: float, digits: int = 3) -> str:
    """+0.003, −0.007 (a typographic minus)."""
    return f"{x:+.{digits}f}".replace("-", "−")


def mib(x: float) -> str:
    return f"+{x:,.0f} MiB"


def mean_sd(values, digits: int) -> str:
    """mean ± sample standard deviation (n − 1)."""
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def score(x: float) -> str:
    return f"{x:.3f}"


def power(n: float) -> str:
    """A size as a reader reads it: 10⁶, 2¹⁸ (powers of two from 2¹⁶ on), 8·10⁵, 14,639."""
    x = float(n)
    if x != int(x):
        return f"{x:g}"
    x = int(x)
    if x >= 1000:
        e10 = round(math.log10(x))
        if 10 ** e10 == x:
            return f"10{str(e10).translate(_SUPERSCRIPT)}"
        e2 = round(math.log2(x))
        if e2 >= 16 and 2 ** e2 == x:
            return f"2{str(e2).translate(_SUPERSCRIPT)}"
        e = int(math.floor(math.log10(x)))
        if x % 10 ** e == 0 and e >= 4:
            return f"{x // 10 ** e}·10{str(e).translate(_SUPERSCRIPT)}"
    return f"{x:,}"


def shape(text: str) -> str:
    """A shape column made readable: 'N=262144 K=5 V=1e+05' -> 'N = 2¹⁸, K = 5, V = 10⁵'."""
    parts = []
    for token in text.split():
        key, sep, raw = token.partition("=")
        if not sep:
            parts.append(token)
            continue
        try:
            parts.append(f"{key} = {power(float(raw))}")
        except ValueError:
            parts.append(f"{key} = {raw}")
    return ", ".join(parts)
