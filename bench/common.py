"""The only home of benchmark plumbing: device naming, synchronised timing, result rows.

Every benchmark appends rows of one schema to bench/results/<name>-<cpu|cuda>.csv:

    time     UTC time of the run (ISO 8601)
    device   device_name(): the GPU's name, or "<CPU model> (<threads> threads)"
    command  the command line that produced the row
    case     what was measured (e.g. "sampled_softmax", "speed/wikitext-2")
    provider whose implementation or which configuration (e.g. "ours", "torch.multinomial")
    shape    the sizes, as "N=... D=... V=..." or a short setting
    metric   the quantity (unit in the name: median_ms, draws_per_s, test_ppl, ...)
    value    its value
    commit   the checkout's commit, where $FASTSOFTMAX_COMMIT gives it (bench/gpu_run.sh does:
             its rows run from a copy without .git); a file without the column gains it, blank
             in its older rows
"""

import csv
import datetime
import gc
import os
import shlex
import statistics
import sys
import time

import torch

from fastsoftmax.atomic import atomic_open

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
SCHEMA = ["time", "device", "command", "case", "provider", "shape", "metric", "value"]


# The corpora (../shared/data beside the checkout, or $FASTSOFTMAX_DATA): every script's data.
DATA = os.environ.get("FASTSOFTMAX_DATA", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"))


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "cpu"


def device_name(device) -> str:
    """One spelling for every benchmark: the CUDA device's name, or the CPU model with the
    number of torch threads in use."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_model()} ({torch.get_num_threads()} threads)"


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def randn_on(device, *size, generator: torch.Generator) -> torch.Tensor:
    """torch.randn(*size) made on `device`. On the CPU it is drawn from `generator` as
    before; elsewhere it is drawn on the device itself, from a device generator seeded by
    `generator`: a [8e5, 1024] weight drawn on the CPU and copied took tens of seconds of a
    GPU case's setup."""
    if torch.device(device).type == "cpu":
        return torch.randn(*size, generator=generator)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return torch.randn(*size, device=device,
                       generator=torch.Generator(device=device).manual_seed(seed))


def time_it(fn, device, repeats: int = 5, warmup: int = 1, budget_s: float = 30.0):
    """Median, min and max seconds of fn() over `repeats` runs (fewer if `budget_s` runs out),
    after `warmup` untimed runs. CUDA: timed with events on the current stream; CPU: a wall
    clock."""
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    sync(device)
    times, start = [], time.perf_counter()
    for _ in range(repeats):
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(begin.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget_s:
            break
    return statistics.median(times), min(times), max(times)


def _proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_extra_bytes(fn, device) -> int:
    """Extra memory one call of fn() allocates beyond what exists before it. CUDA: the caching
    allocator's peak. CPU (Linux): the resident-set high-water mark, reset first through
    /proc/self/clear_refs, minus the resident set before the call: everything the call touches,
    native buffers included (large blocks go back to the OS when freed)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident set
    base = _proc_status_kib("VmRSS")
    fn()
    return (_proc_status_kib("VmHWM") - base) * 1024


def command_line() -> str:
    """The command that ran this benchmark, as a shell would take it back."""
    return " ".join(["python"] + [shlex.quote(a) for a in sys.argv])


def append_rows(path: str, rows: list, fields=None) -> str:
    """Append `rows` (dicts) to the CSV at `path`, writing the header when the file is new.
    Columns are `fields` (default: the first row's keys); a missing value is left blank.
    The file is rewritten atomically (old rows, then the new ones), so a killed benchmark
    never leaves a half-written row."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    new = not os.path.exists(path)
    old = b""
    if not new:
        with open(path, "rb") as f:
            old = f.read()
    fields = list(fields or rows[0])
    if not new:
        # The file's own columns, in its order, so that new rows line up with old ones; a
        # column it lacks (commit) is added at the end, blank in the older rows.
        with open(path, newline="", encoding="utf8") as f:
            header = next(csv.reader(f), [])
        wider = header + [k for k in fields if k not in header]
        if wider != header:
            with open(path, newline="", encoding="utf8") as f:
                old_rows = list(csv.DictReader(f))
            new, old = True, b""
            rows = old_rows + list(rows)
        fields = wider
    with atomic_open(path, "w", newline="") as f:
        f.buffer.write(old)
        writer = csv.DictWriter(f, fieldnames=fields, restval="")
        if new:
            writer.writeheader()
        writer.writerows(rows)
    return path


def result_path(name: str, device) -> str:
    return os.path.join(RESULTS, f"{name}-{torch.device(device).type}.csv")


def mean_sd(values, fmt: str = "{:.2f}") -> str:
    """"mean ± sample standard deviation" of repeated runs (± 0 for a single run)."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{fmt.format(statistics.mean(values))} ± {fmt.format(sd)}"


def format_value(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def write_results(name: str, device, rows: list, path=None) -> str:
    """Append `rows` (dicts of case, provider, shape, metric, value) to
    bench/results/<name>-<device type>.csv (or `path`), stamped with the time, the device and
    the command line. A key outside the schema is an error, so no figure is silently lost."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    extra = dict(time=stamp, device=device_name(device), command=command_line())
    schema = SCHEMA
    if os.environ.get("FASTSOFTMAX_COMMIT"):
        extra["commit"], schema = os.environ["FASTSOFTMAX_COMMIT"], SCHEMA + ["commit"]
    out = []
    for row in rows:
        unknown = set(row) - set(SCHEMA)
        if unknown:
            raise ValueError(f"result row has keys outside the schema: {sorted(unknown)}")
        out.append(dict({k: format_value(v) for k, v in row.items()}, **extra))
    return append_rows(path or result_path(name, device), out, schema)
