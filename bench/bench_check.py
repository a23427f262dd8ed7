"""Regression guard for the CPU kernels: rerun a small fixed subset of bench/roofline.py and
compare each kernel's achieved / bound against the last committed roofline CSV.

    make bench-check                       # or: python bench/bench_check.py
    python bench/bench_check.py --ref main --max-drop 0.25
    python bench/bench_check.py --write    # also append this run to the CSV (a new baseline)

Fails (exit 1) when a kernel's fraction of its bound drops by more than --max-drop (25 %)
against the newest committed row of the same case and shape (on one thread by default; rows of
another thread count are not compared); a case with no committed row is reported, not
failed. Timings are not tests: this runs outside `make test` and CI. The
ceilings are measured in the same run as the kernels, so a loaded machine slows both; still,
run it on a machine as quiet as you can, before and after a change.
"""

import argparse
import csv
import io
import os
import statistics
import subprocess
import sys
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSV = os.path.join("bench", "results", "roofline-cpu.csv")
SUBSET = "alias,neg,sampled,hs"
MAX_DROP = 0.25
Key = Tuple[str, str]  # (case, shape)


def read_rows(text: str) -> List[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def latest_fractions(rows: List[dict], provider: str = "ours",
                     threads: int = 0) -> Dict[Key, float]:
    """fraction_of_bound of `provider` per (case, shape), from the newest row of each (rows
    without a time count as oldest; ties go to the later row in the file); with `threads`,
    only rows whose device names that many threads."""
    best: Dict[Key, Tuple[str, float]] = {}
    for row in rows:
        if row.get("metric") != "fraction_of_bound" or row.get("provider") != provider:
            continue
        if threads and not row.get("device", "").endswith(f"({threads} threads)"):
            continue
        key = (row["case"], row["shape"])
        stamp = row.get("time") or ""
        if key not in best or stamp >= best[key][0]:
            best[key] = (stamp, float(row["value"]))
    return {k: v for k, (_, v) in best.items()}


def median_fractions(runs: List[Dict[Key, float]]) -> Dict[Key, float]:
    """Per key, the median over the runs that have it (several reruns damp a loaded machine)."""
    keys = {k for run in runs for k in run}
    return {k: statistics.median([run[k] for run in runs if k in run]) for k in keys}


def compare(baseline: Dict[Key, float], current: Dict[Key, float],
            max_drop: float = MAX_DROP) -> Tuple[List[dict], bool]:
    """One row per current case: old and new fraction, relative change and status; failed
    when any new fraction is below (1 - max_drop) x its baseline."""
    out, failed = [], False
    for key, new in sorted(current.items()):
        old = baseline.get(key)
        if old is None:
            out.append(dict(case=key[0], shape=key[1], old=None, new=new, change=None,
                            status="no baseline"))
            continue
        change = new / old - 1.0 if old else 0.0
        # (a hair of slack so that exactly max_drop, in floating point, passes)
        drop = old > 0 and new < (1.0 - max_drop) * old * (1 - 1e-9)
        failed |= drop
        out.append(dict(case=key[0], shape=key[1], old=old, new=new, change=change,
                        status="DROP" if drop else "ok"))
    return out, failed


def format_table(rows: List[dict]) -> str:
    lines = [f"{'case':22s} {'shape':34s} {'committed':>9s} {'now':>6s} {'change':>7s}  status"]
    for r in rows:
        old = f"{r['old']:.3f}" if r["old"] is not None else "-"
        change = f"{100 * r['change']:+.0f}%" if r["change"] is not None else "-"
        lines.append(f"{r['case']:22s} {r['shape']:34s} {old:>9s} {r['new']:6.3f} "
                     f"{change:>7s}  {r['status']}")
    return "\n".join(lines)


def committed_csv(ref: str, path: str = CSV) -> str:
    """The CSV as committed at `ref` ("" when it is not there)."""
    res = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, capture_output=True,
                         text=True)
    return res.stdout if res.returncode == 0 else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default="HEAD", help="git revision of the baseline CSV")
    ap.add_argument("--max-drop", type=float, default=MAX_DROP)
    ap.add_argument("--cases", default=SUBSET)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--runs", type=int, default=1,
                    help="rerun the subset this many times and compare the median fraction "
                         "(on a shared machine one run can move a fraction by 40 %%)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: a parallel region on a shared machine can wait "
                         "milliseconds for its second thread, which swamps the kernels)")
    ap.add_argument("--write", action="store_true",
                    help="append this run to bench/results/roofline-cpu.csv")
    args = ap.parse_args(argv)
    baseline = latest_fractions(read_rows(committed_csv(args.ref)), threads=args.threads)
    if not baseline:
        print(f"no committed {CSV} at {args.ref}: nothing to compare against")
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import roofline
    from common import write_results

    run_args = roofline.parser().parse_args(
        ["--quick", "--no-peers", "--cases", args.cases, "--repeat", str(args.repeat),
         "--threads", str(args.threads)])
    if run_args.threads:
        import torch
        torch.set_num_threads(run_args.threads)
    fractions, all_rows = [], []
    for _ in range(args.runs):
        summary, rows = roofline.run(run_args)
        roofline.print_table(summary)
        fractions.append(latest_fractions(rows_as_text(rows)))
        all_rows.append(rows)
    current = median_fractions(fractions)
    table, failed = compare(baseline, current, args.max_drop)
    print(f"\nachieved / bound against {CSV} at {args.ref} (fails below "
          f"{100 * (1 - args.max_drop):.0f}% of the committed value):")
    print(format_table(table))
    if args.write:
        for rows in all_rows:  # one call per run: each keeps its own time stamp
            print("wrote", write_results("roofline", "cpu", rows))
    print("bench-check:", "FAILED" if failed else "passed")
    return 1 if failed else 0


def rows_as_text(rows: List[dict]) -> List[dict]:
    """roofline.run's rows as read_rows would give them back (strings, no time)."""
    return [{k: str(v) for k, v in row.items()} for row in rows]


if __name__ == "__main__":
    raise SystemExit(main())
