"""The README's roofline table from bench/results/roofline-cpu.csv: per kernel, the medians
over the last --runs runs (of one mode) of the bound, our time, achieved / bound, the speed-up
over each peer and the peak memory.

    python bench/roofline_report.py --runs 3            # markdown table on stdout
    python bench/roofline_report.py --runs 3 --mode quick --threads 1
"""

import argparse
import csv
import os
import statistics
from collections import defaultdict
from typing import Dict, List

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "roofline-cpu.csv")
NAMES = {
    "alias_draws": "alias draws",
    "negative_sampling": "negative sampling fwd+bwd",
    "sampled_softmax": "sampled softmax fwd+bwd",
    "hierarchical_softmax": "hierarchical softmax fwd+bwd",
    "full_softmax": "exact full softmax fwd+bwd",
    "word2vec_sg": "word2vec skip-gram, 1 epoch",
    "word2vec_cbow": "word2vec CBOW, 1 epoch",
    "word2vec_sg_batched": "word2vec skip-gram, shared negatives, 1 epoch",
    "word2vec_cbow_batched": "word2vec CBOW, shared negatives, 1 epoch",
}


def runs_of(rows: List[dict], mode: str, threads: int = 0) -> Dict[str, List[dict]]:
    """Rows grouped by run (their time stamp), only the runs of `mode` (and, when given, of
    that many threads, as the device column names them), oldest first."""
    if threads:
        rows = [r for r in rows if r.get("device", "").endswith(f"({threads} threads)")]
    by_time = defaultdict(list)
    for row in rows:
        by_time[row["time"]].append(row)
    out = {}
    for stamp in sorted(by_time):
        modes = [r["value"] for r in by_time[stamp] if r["metric"] == "mode"]
        if modes and modes[0] == mode:
            out[stamp] = by_time[stamp]
    return out


def medians(runs: List[List[dict]]) -> Dict[tuple, float]:
    """(case, provider, shape, metric) -> median over the runs of the numeric values."""
    values = defaultdict(list)
    for rows in runs:
        for r in rows:
            try:
                value = float(r["value"])
            except ValueError:  # text (the bound's limiting term, the commit)
                continue
            values[(r["case"], r["provider"], r["shape"], r["metric"])].append(value)
    return {k: statistics.median(v) for k, v in values.items()}


def fmt(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def table(rows: List[dict], n_runs: int, mode: str = "full", threads: int = 0) -> str:
    runs = list(runs_of(rows, mode, threads).values())[-n_runs:]
    if not runs:
        return f"no {mode} run in the file"
    med = medians(runs)
    terms = {(r["case"], r["shape"]): r["value"] for r in runs[-1] if r["metric"] == "bound_term"}
    out = ["| kernel | shape | bound (limit) | fastsoftmax | achieved ÷ bound | "
           "peers: our speed-up (their peak) | our peak |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for (case, shape), term in terms.items():
        key = lambda p, m: med.get((case, p, shape, m))  # noqa: E731
        unit = next(m for (c, p, s, m) in med if c == case and s == shape and p == "ours"
                    and m.endswith("_per_s") and not m.startswith("bound_"))
        peers = sorted({p for (c, p, s, m) in med if c == case and s == shape and p != "ours"})
        peer_text = ", ".join(
            f"{p} {key('ours', 'speedup_vs_' + p):.2f}× (+{key(p, 'peak_extra_mb'):,.0f} MiB)"
            for p in peers if key("ours", "speedup_vs_" + p) is not None) or "–"
        out.append(
            f"| {NAMES.get(case, case)} | {shape} | {fmt(key('ours', 'bound_ms'))} ms ({term}) "
            f"| {fmt(key('ours', 'median_ms'))} ms, {fmt(key('ours', unit))} "
            f"{unit.replace('_per_s', '')}/s | **{key('ours', 'fraction_of_bound'):.2f}** "
            f"| {peer_text} | +{key('ours', 'peak_extra_mb'):,.0f} MiB |")
    loads = [r["value"] for rows_ in runs for r in rows_ if r["metric"] == "load_avg_1m"]
    commits = sorted({r["value"] for rows_ in runs for r in rows_ if r["metric"] == "commit"})
    note = (f"medians of {len(runs)} run(s) ({runs[0][0]['time']} to {runs[-1][0]['time']}, "
            f"commits {', '.join(commits)}, 1-minute load averages "
            f"{', '.join(f'{float(x):.1f}' for x in loads)})")
    return "\n".join(out) + "\n\n" + note + "\n\n" + ceilings_table(med)


CEILING_UNITS = {"copy_bytes_per_s": ("copy", 1e9, "GB/s"),
                 "gather_per_s": ("random 8-byte gather", 1e6, "M/s"),
                 "sgemm_flops": ("SGEMM (torch.mm)", 1e9, "GFLOP/s"),
                 "philox_blocks_per_s": ("Philox-4x32-10 blocks", 1e6, "M/s")}


def ceilings_table(med: Dict[tuple, float]) -> str:
    """| ceiling | size or shape | 1 thread | all threads | from the `ceiling` rows."""
    cells = defaultdict(dict)
    for (case, _, shape, metric), value in med.items():
        if case != "ceiling" or metric not in CEILING_UNITS:
            continue
        where, _, threads = shape.rpartition(" ")
        if not where and threads.endswith("t"):
            where = ""
        cells[(metric, where)][threads] = value
    lines = ["| ceiling | table / shape | 1 thread | all threads |", "| --- | --- | --- | --- |"]
    for (metric, where), by_threads in cells.items():
        name, scale, unit = CEILING_UNITS[metric]
        others = sorted(t for t in by_threads if t != "1t")
        many = f"{by_threads[others[-1]] / scale:.3g} {unit}" if others else "–"
        one = f"{by_threads['1t'] / scale:.3g} {unit}" if "1t" in by_threads else "–"
        lines.append(f"| {name} | {where or '–'} | {one} | {many} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", default=RESULTS)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mode", default="full", choices=("full", "quick"))
    ap.add_argument("--threads", type=int, default=0, help="only runs on this many threads")
    args = ap.parse_args(argv)
    with open(args.csv, newline="") as f:
        print(table(list(csv.DictReader(f)), args.runs, args.mode, args.threads))


if __name__ == "__main__":
    main()
