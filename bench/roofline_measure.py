"""This machine's CPU ceilings, measured with the same torch build and threads as the kernels:
the rates bench/bound_model.CpuCeilings turns a kernel's bound into seconds with.

* copy bandwidth: `y.copy_(x)` of float32 buffers; a working set of S bytes (source +
  destination) moves S bytes per copy (read + write). Measured at the L2 size, at each
  kernel's table size and DRAM-sized.
* random 8-byte gather: `torch.index_select` of an int64 table at 2^22 uniformly random
  positions; the rate counts the random reads (the index read and the output write are
  sequential and included in the time).
* SGEMM: `torch.mm` of float32 [m, k] x [k, n] at each kernel's product shapes.
* Philox-4x32-10: fastsoftmax's own uniform sampler (one Philox block per draw, a
  multiply-high to an index, an 8-byte write), in blocks/s. It runs the same AVX-512 code as
  the alias draws where the CPU has it (eight streams a register; before, its scalar loop
  put the ceiling under what the alias draws reached). torch's CPU generator is a Mersenne
  Twister and numpy's Philox is the 4x64 variant, so neither measures this one; the figure
  includes the write, so it is a floor under the generator's own rate.

Every rate is measured on one thread and on all threads, and the ceiling is the better of
the two: on a shared machine a parallel region can wait milliseconds for its second thread
(measured here: a 0.5 MiB copy took 14 us on one thread and 12 ms on two while other jobs
ran), and a ceiling is what the machine can do, not what one setting did.
"""

import os
import statistics
import sys
import time
from typing import Dict, Iterable, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bound_model import CpuCeilings  # noqa: E402

MiB = 1 << 20
GATHER_N = 1 << 22


def cache_bytes(level: int, default: int) -> int:
    """Size of the cpu0 cache of that level from sysfs (per core for L2)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            path = os.path.join(base, entry)
            with open(os.path.join(path, "level")) as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(path, "size")) as f:
                size = f.read().strip()
            mult = {"K": 1 << 10, "M": MiB, "G": 1 << 30}.get(size[-1], 1)
            return int(size.rstrip("KMG")) * mult
    except (OSError, ValueError):
        pass
    return default


def _median_rate(fn, work: float, repeats: int, min_s: float = 0.02) -> float:
    """work / seconds of fn(), median over repeats; fn is looped so that one timing lasts
    at least min_s (small working sets)."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(min_s / once))
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        rates.append(work * inner / (time.perf_counter() - t0))
    return statistics.median(rates)


class threads:
    """torch.set_num_threads for a block, restored after."""

    def __init__(self, n: int):
        self.n, self.old = n, torch.get_num_threads()

    def __enter__(self):
        torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        torch.set_num_threads(self.old)


def best_of_threads(measure_fn, figures: Dict[str, float], key: str) -> float:
    """max over 1 and all threads of measure_fn(); both go into figures."""
    n = torch.get_num_threads()
    best = 0.0
    for t in sorted({1, n}):
        with threads(t):
            value = measure_fn()
        figures[f"{key} {t}t"] = value
        best = max(best, value)
    return best


def copy_bandwidth(working_set: int, repeats: int = 5) -> float:
    """Bytes/s (read + write) of copying working_set / 2 bytes into another buffer."""
    half = max(working_set // 8, 1024)
    x = torch.ones(half)
    y = torch.empty_like(x)
    return _median_rate(lambda: y.copy_(x), 8 * half, repeats)


def gather_rate(table_bytes: int, repeats: int = 5, n: int = GATHER_N) -> float:
    """Random 8-byte reads/s from an int64 table of table_bytes."""
    size = max(table_bytes // 8, 1)
    table = torch.arange(size, dtype=torch.int64)
    idx = torch.randint(0, size, (n,), generator=torch.Generator().manual_seed(0))
    out = torch.empty(n, dtype=torch.int64)
    return _median_rate(lambda: torch.index_select(table, 0, idx, out=out), n, repeats)


def gemm_seconds(shape: Tuple[int, int, int], repeats: int = 5) -> float:
    """Median seconds of torch.mm [m, k] x [k, n] in float32."""
    m, n, k = shape
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    c = torch.empty(m, n)
    return 1.0 / _median_rate(lambda: torch.mm(a, b, out=c), 1.0, repeats)


def philox_rate(repeats: int = 5, n: int = 1 << 23) -> float:
    """Philox-4x32-10 blocks/s, as fastsoftmax's uniform sampler's draws/s."""
    import fastsoftmax as fs

    sampler = fs.UniformSampler(10**6)
    return _median_rate(lambda: sampler.sample(n), n, repeats)


def measure(tables: Iterable[float], gemms: Iterable[Tuple[int, int, int]], quick: bool = False,
            log=print) -> Tuple[CpuCeilings, Dict[str, float]]:
    """The ceilings at the given table sizes and product shapes, and a flat dict of every
    figure measured (for the printout and the CSV)."""
    repeats = 3 if quick else 7
    l2, l3 = cache_bytes(2, 2 * MiB), cache_bytes(3, 32 * MiB)
    dram = max(4 * l3, (512 if quick else 1024) * MiB)
    sizes = sorted({l2 // 2, dram} | {int(t) for t in tables if t})
    raw: Dict[str, float] = {}
    level_bw, gather = {}, {}
    for s in sizes:
        level_bw[s] = best_of_threads(lambda: copy_bandwidth(s, repeats), raw,
                                      f"copy_bytes_per_s {s / MiB:.1f}MiB")
        gather[s] = best_of_threads(lambda: gather_rate(s, repeats), raw,
                                    f"gather_per_s {s / MiB:.1f}MiB")
    gemm = {}
    for shape in sorted(set(gemms)):
        m, n, k = shape
        flops = best_of_threads(lambda: 2 * m * n * k / gemm_seconds(shape, repeats), raw,
                                f"sgemm_flops m={m} n={n} k={k}")
        gemm[shape] = 2 * m * n * k / flops
    rate = best_of_threads(lambda: philox_rate(repeats), raw, "philox_blocks_per_s")
    for key, value in raw.items():
        log(f"  {key:44s} {value:.4g}")
    one = raw[f"copy_bytes_per_s {dram / MiB:.1f}MiB 1t"]
    return CpuCeilings(stream_bw=level_bw[dram], level_bw=level_bw, gather=gather,
                       philox_rate=rate, gemm=gemm, stream_bw_1t=one), raw
