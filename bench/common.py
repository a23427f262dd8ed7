"""Shared benchmark plumbing: device naming, synchronised timing, result rows."""

import csv
import os
import platform
import shlex
import statistics
import sys
import time

import torch

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model} ({torch.get_num_threads()} threads)"


def sync(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_it(fn, device: torch.device, repeats: int = 5, warmup: int = 1, budget_s: float = 30.0):
    """Median, min and max wall seconds of fn() over `repeats` runs (fewer if the budget runs
    out), after `warmup` untimed runs; synchronised on CUDA."""
    for _ in range(warmup):
        fn()
    sync(device)
    times, start = [], time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget_s and len(times) >= 1:
            break
    return statistics.median(times), min(times), max(times)


def command_line() -> str:
    """The command that ran this benchmark, as a shell would take it back."""
    return " ".join(["python"] + [shlex.quote(a) for a in sys.argv])


def append_rows(path: str, rows: list, fields=None) -> str:
    """Append `rows` (dicts) to the CSV at `path`, writing the header when the file is new.
    Columns are `fields` (default: the first row's keys); a missing value is left blank."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields or rows[0]), restval="")
        if new:
            writer.writeheader()
        writer.writerows(rows)
    return path


def write_rows(name: str, rows: list):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path
