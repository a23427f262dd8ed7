"""make fuzz-files: runs every file fuzz target under atheris (libFuzzer), one process per
target, and prints per target the executions, the rate and the crashes; exits non-zero when
a target crashed, found a wrong result, exceeded its memory or time per input, or did not
run.

    python tools/fuzz_files/run.py [--runs N] [--max-seconds S] [--asan] [--rows CSV] [TARGET ...]

--asan runs the targets against the ASan+UBSan build of the extension under build/sanitize
(tools/sanitize.sh --build-ext), with the GCC sanitizer runtimes preloaded into the
uninstrumented Python, as tools/sanitize.sh does for the tests. Each target keeps its corpus
in build/fuzz-files/TARGET/corpus (seeded on the first run, grown by later ones) and writes
a failing input to build/fuzz-files/TARGET/crash-* (replay: run the target script on it).
atheris comes from build/fuzz-deps (the Makefile installs it there) or the environment.
--rows appends one row per target and figure to a CSV in the benchmarks' schema (make
fuzz-files: bench/results/fuzz-files-cpu.csv), from which docs/reliability.md's table is
rendered.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import shlex
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEPS = os.path.join(ROOT, "build", "fuzz-deps")
# Target -> the longest input libFuzzer makes: long enough for several lines, chunks and
# vectors (a saved model is about 3 KB), short enough to keep the rate up.
TARGETS = {"corpus_encode": 1024, "corpus_file": 512, "vectors": 1024, "model": 8192}
FINDINGS = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


def libfuzzer_preload() -> str:
    """A shared libFuzzer made from the static one atheris ships (as its docs do for a
    sanitized extension). GCC's libasan defines the coverage callbacks
    (__sanitizer_cov_8bit_counters_init, ...) as empty weak stubs, and a preloaded libasan
    comes first in symbol lookup, so atheris' Python coverage went to the stubs and the
    fuzzer ran blind ("no interesting inputs were found"). Preloaded before libasan, this
    library's callbacks win."""
    sys.path.insert(0, DEPS)
    import atheris

    lib = os.path.join(DEPS, "libfuzzer_preload.so")
    archive = os.path.join(atheris.path(), "libclang_rt.fuzzer_no_main.a")
    if not os.path.exists(lib) or os.path.getmtime(lib) < os.path.getmtime(archive):
        subprocess.run(["g++", "-shared", "-o", lib, "-Wl,--whole-archive", archive,
                        "-Wl,--no-whole-archive", "-lpthread"], check=True)
    return lib


def sanitizer_env() -> dict:
    lib = {name: subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True,
                                text=True, check=True).stdout.strip()
           for name in ("libasan.so", "libubsan.so")}
    ext = os.path.join(ROOT, "build", "sanitize")
    if not any(f.startswith("_C") for f in os.listdir(os.path.join(ext, "fastsoftmax"))):
        sys.exit("fuzz-files: no ASan build in build/sanitize (tools/sanitize.sh --build-ext)")
    # The copy's Python sources are those of its build: bring the tree's (a C++ change
    # needs tools/sanitize.sh --build-ext, which make fuzz-files runs first).
    shutil.copytree(os.path.join(ROOT, "fastsoftmax"), os.path.join(ext, "fastsoftmax"),
                    dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.so", "__pycache__",
                                                                      "_build_info.py"))
    # verify_asan_link_order=0: libasan is not the first preloaded library (see
    # libfuzzer_preload); it is still loaded before Python and every instrumented library.
    # allocator_may_return_null: an allocation past ASan's maximum becomes Python's
    # MemoryError, which the targets report with the input, rather than an abort.
    # detect_leaks=0: see tools/sanitize.sh (CPython and torch never free their heap).
    return {"LD_PRELOAD": f"{libfuzzer_preload()} {lib['libasan.so']} {lib['libubsan.so']}",
            "ASAN_OPTIONS": "halt_on_error=1:detect_leaks=0:allocator_may_return_null=1:"
                            "verify_asan_link_order=0",
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
            "_EXT": ext}


def run_target(name: str, runs: int, env_extra: dict, out_dir: str, seconds: int = 0) -> dict:
    work = os.path.join(out_dir, name)
    os.makedirs(os.path.join(work, "corpus"), exist_ok=True)
    before = set(os.listdir(work))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    paths = [DEPS, ROOT]
    if "_EXT" in env_extra:
        paths.insert(0, env_extra["_EXT"])
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update({k: v for k, v in env_extra.items() if not k.startswith("_")})
    cmd = [sys.executable, os.path.join(HERE, f"target_{name}.py"), f"-runs={runs}",
           f"-max_len={TARGETS[name]}", "-print_final_stats=1", "-timeout=60",
           "-rss_limit_mb=4096", "-malloc_limit_mb=1024", f"-artifact_prefix={work}/",
           f"-max_total_time={seconds}", os.path.join(work, "corpus")]
    log = os.path.join(work, "last.log")
    start = time.time()
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=work)
    end = time.time()
    wall = end - start
    text = open(log, errors="replace").read()
    executed = re.findall(r"stat::number_of_executed_units: (\d+)", text)
    began = re.search(r"fuzzing from ([\d.]+)", text)
    fuzzing = end - float(began.group(1)) if began else wall
    found = sorted(f for f in set(os.listdir(work)) - before if f.startswith(FINDINGS))
    module = re.search(r"Testing (\S+)", text)
    return {"name": name, "rc": rc, "runs": int(executed[-1]) if executed else 0,
            "wall": wall, "found": found, "log": log, "fuzzing": fuzzing,
            "extension": module.group(1) if module else "?"}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine() or "cpu"


def append_rows(path: str, results: list, args, argv) -> None:
    """One row per target and figure, in bench/common.py's schema."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = shlex.join(["python", "tools/fuzz_files/run.py", *argv])
    new = not os.path.exists(path)
    with open(path, "a", newline="", encoding="utf8") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(["time", "device", "command", "case", "provider", "shape",
                             "metric", "value"])
        for r in results:
            figures = {"executions": r["runs"], "exec_per_s": round(r["runs"] / max(
                r["fuzzing"], 1e-3)), "seconds": round(r["wall"]), "crashes": len(r["found"])}
            for metric, value in figures.items():
                writer.writerow([stamp, f"{cpu_model()} ({os.cpu_count()} cores)", command,
                                 r["name"], "asan+ubsan" if args.asan else "plain",
                                 f"runs={args.runs} max_seconds={args.max_seconds}", metric,
                                 value])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("targets", nargs="*", help=f"some of {list(TARGETS)} (default: all)")
    ap.add_argument("--runs", type=int, default=int(os.environ.get("FUZZ_RUNS", 10**6)))
    ap.add_argument("--max-seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", 0)),
                    help="stop a target after this long even short of --runs (0: no limit); "
                         "it then reports the executions it made, not a failure")
    ap.add_argument("--asan", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "fuzz-files"))
    ap.add_argument("--rows", default="", help="append the results to this CSV")
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    unknown = set(args.targets) - set(TARGETS)
    if unknown:
        ap.error(f"unknown targets {sorted(unknown)}; known: {list(TARGETS)}")
    env_extra = sanitizer_env() if args.asan else {}
    results = []
    for name in args.targets or list(TARGETS):
        print(f"fuzz-files: {name}: {args.runs} runs{' under ASan+UBSan' if args.asan else ''}"
              "...", flush=True)
        r = run_target(name, args.runs, env_extra, args.out, args.max_seconds)
        results.append(r)
        print(f"fuzz-files: {name}: {r['runs']} executions in {r['wall']:.0f} s, "
              f"{len(r['found'])} crashes, exit {r['rc']} ({r['extension']})", flush=True)
    failed = False
    # exec/s: from the start of fuzzing (seeds included) to the end; seconds: the whole
    # process, with Python's, torch's and the instrumentation's start.
    print(f"\n{'target':<15}{'executions':>12}{'exec/s':>9}{'seconds':>9}{'crashes':>9}  result")
    for r in results:
        ok = r["rc"] == 0 and not r["found"] and r["runs"] > 0
        failed |= not ok
        note = "ok" if r["runs"] >= args.runs else "ok, stopped by the time limit"
        rate = r["runs"] / max(r["fuzzing"], 1e-3)
        print(f"{r['name']:<15}{r['runs']:>12}{rate:>9.0f}{r['wall']:>9.0f}{len(r['found']):>9}  "
              f"{note if ok else 'FAILED (log: ' + r['log'] + ')'}")
        for f in r["found"]:
            print(f"    {os.path.join(args.out, r['name'], f)}")
    if args.rows:
        append_rows(args.rows, results, args, argv)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
