"""How close each CPU kernel runs to this machine's ceilings, measured in one run.

    python bench/roofline.py             # every kernel and its peers: 2-3 min quiet, ~10 loaded
    python bench/roofline.py --quick     # fewer repeats, smaller word2vec corpus and full softmax
    python bench/roofline.py --cases alias,neg --no-peers

First the ceilings (bench/roofline_measure.py: copy bandwidth, random 8-byte gathers at each
kernel's table size, SGEMM at each kernel's product shapes, Philox blocks), then every kernel
(bench/roofline_kernels.py) with its bound from bench/bound_model.py: the bound is the largest
of its terms (streamed and table bytes, random accesses, dense products, Philox blocks), and
achieved / bound = bound seconds / measured seconds (1.0 = at the ceiling). Peers are printed
as our speed-up over them (rates, so peers may run smaller sizes). Memory: the resident-set
high-water mark of the last timed call above the resident set before it.

Rows go to bench/results/roofline-cpu.csv (bench/common.py's schema) with the commit, the load
average and the torch version as `run` rows. Case names and metric names are stable: `make
bench-check` (bench/bench_check.py) reads fraction_of_bound from this file.
"""

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bound_model import limiting_term  # noqa: E402
from common import _proc_status_kib, device_name, result_path, write_results  # noqa: E402
import roofline_kernels as rk  # noqa: E402
import roofline_measure  # noqa: E402

ALL_CASES = "alias,neg,sampled,hs,full,word2vec"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def commit() -> str:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def time_provider(p: rk.Provider, repeats: int, warmup: int):
    """(median s, min s, max s, peak extra bytes of the last timed call)."""
    if p.once:
        repeats, warmup = 1, 0
    elif p.max_repeats:
        repeats, warmup = min(repeats, p.max_repeats), 0
    for _ in range(warmup):
        p.fn()
    times, peak = [], 0
    for i in range(repeats):
        last = i == repeats - 1
        if last:
            getattr(p.fn, "reset", lambda: None)()
            gc.collect()
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # VmHWM := VmRSS
            base = _proc_status_kib("VmRSS")
        t0 = time.perf_counter()
        p.fn()
        times.append(time.perf_counter() - t0)
        if last:
            peak = (_proc_status_kib("VmHWM") - base) * 1024
    return statistics.median(times), min(times), max(times), peak


def run_case(case: rk.Case, ceilings, args):
    """Times every provider; returns (result dict of ours, [peer result dicts])."""
    results = []
    for p in case.providers:
        if p.name != "ours" and not args.peers:
            continue
        med, lo, hi, peak = time_provider(p, args.repeat, args.warmup)
        results.append(dict(provider=p.name, median_s=med, min_s=lo, max_s=hi, peak=peak,
                            rate=p.items / med, items=p.items))
    ours = results[0]
    terms = ceilings.terms(case.bound)
    ours["bound_s"] = max(terms.values())
    ours["terms"] = terms
    ours["fraction"] = ours["bound_s"] / ours["median_s"]
    for r in results[1:]:
        ours[f"speedup_vs_{r['provider']}"] = ours["rate"] / r["rate"]
    return ours, results[1:]


def case_rows(case: rk.Case, ours, peers):
    rows = []
    for r in [ours] + peers:
        base = dict(case=case.name, provider=r["provider"], shape=case.shape)
        metrics = dict(median_ms=1e3 * r["median_s"], min_ms=1e3 * r["min_s"],
                       max_ms=1e3 * r["max_s"], **{f"{case.unit}_per_s": r["rate"]},
                       peak_extra_mb=r["peak"] / 2**20)
        if r is ours:
            metrics.update(bound_ms=1e3 * r["bound_s"], fraction_of_bound=r["fraction"],
                           bound_term=limiting_term(r["terms"]),
                           **{f"bound_{case.unit}_per_s": r["items"] / r["bound_s"]})
            metrics.update({f"bound_{k}_ms": 1e3 * v for k, v in r["terms"].items()})
            metrics.update({k: v for k, v in r.items() if k.startswith("speedup_vs_")})
        rows += [dict(base, metric=k, value=v) for k, v in metrics.items()]
    return rows


def print_table(summary):
    print(f"\n{'case':22s} {'shape':34s} {'bound ms':>9s} {'term':7s} {'ours ms':>9s} "
          f"{'bound/s':>9s} {'rate/s':>9s} {'÷bound':>6s} {'peak MiB':>8s}  "
          "peers (our speed-up, their peak)")
    for case, ours, peers in summary:
        peer_text = ", ".join(f"{r['provider']} {ours['speedup_vs_' + r['provider']]:.2f}x "
                              f"(+{r['peak'] / 2**20:.0f} MiB)" for r in peers)
        print(f"{case.name:22s} {case.shape:34s} {1e3 * ours['bound_s']:9.2f} "
              f"{limiting_term(ours['terms']):7s} {1e3 * ours['median_s']:9.2f} "
              f"{ours['items'] / ours['bound_s']:9.3g} {ours['rate']:9.3g} {ours['fraction']:6.2f} {ours['peak'] / 2**20:8.0f}  "
              f"{peer_text}")


def measure_all(cases, quick: bool, log=print):
    tables = [c.bound.table for c in cases]
    gemms = [s for c in cases for s in c.bound.gemms]
    log("ceilings (1 thread and all threads; the better is the ceiling):")
    return roofline_measure.measure(tables, gemms, quick=quick, log=log)


def run(args, log=print):
    """Ceilings then kernels; returns (summary, rows) without writing anything."""
    at_start = commit()  # before the minutes of measuring, in which the tree may change
    cases = rk.build(args.cases.split(","), args.quick, gensim=args.peers and args.gensim)
    ceilings, raw = measure_all(cases, args.quick, log)
    rows = [dict(case="run", provider="git", shape="", metric="commit", value=at_start),
            dict(case="run", provider="os", shape="", metric="load_avg_1m",
                 value=os.getloadavg()[0]),
            dict(case="run", provider="torch", shape="", metric="version",
                 value=torch.__version__),
            dict(case="run", provider="roofline", shape="", metric="mode",
                 value="quick" if args.quick else "full")]
    for key, value in raw.items():
        metric, _, shape = key.partition(" ")
        rows.append(dict(case="ceiling", provider="torch", shape=shape, metric=metric,
                         value=value))
    summary = []
    for case in cases:
        log(f"timing {case.name} {case.shape} ...")
        ours, peers = run_case(case, ceilings, args)
        summary.append((case, ours, peers))
        rows += case_rows(case, ours, peers)
    return summary, rows


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="3 repeats, 0.3M-word word2vec corpus (1M in full), full softmax at N=256, "
                         "2M draws, 512 MiB DRAM buffers")
    ap.add_argument("--cases", default=ALL_CASES, help=f"comma-separated subset of {ALL_CASES}")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per provider")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (and word2vec workers) for the whole run; on a loaded "
                         "machine 1 thread is the steadier comparison")
    ap.add_argument("--no-peers", dest="peers", action="store_false",
                    help="time our kernels only")
    ap.add_argument("--no-gensim", dest="gensim", action="store_false")
    ap.add_argument("--out", default=None, help="CSV to append to (default: "
                    "bench/results/roofline-cpu.csv)")
    ap.add_argument("--no-write", dest="write", action="store_false")
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.repeat is None:
        args.repeat = 3 if args.quick else 5
    print(f"device: {device_name('cpu')}, torch {torch.__version__}, commit {commit()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    summary, rows = run(args)
    print_table(summary)
    if args.write:
        out = write_results("roofline", "cpu", rows, args.out or result_path("roofline", "cpu"))
        print(f"wrote {len(rows)} rows to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
