"""What each kernel must move and compute, and the time that takes on a device's ceilings.

One model for both devices. A kernel's Bound counts, from first principles, the bytes it
cannot avoid moving (reads, writes, gradient writes), its FLOPs and dense products, its random
accesses and the Philox blocks it draws. A device's ceilings turn that into seconds:

* GPU (GpuCeilings): bytes over the device's measured copy bandwidth (a large device-to-device
  copy in the same run; 3.0 TB/s, an H100 SXM's order, when there is no GPU), and FLOPs over a
  matmul rate; the larger of the two is the bound.
* CPU (CpuCeilings, measured by bench/roofline_measure.py in the same run as the kernels):
  streamed bytes at the DRAM copy rate, bytes of the gathered table at the copy rate measured
  at that table's size, random accesses at the gather rate measured at that size, dense
  products at torch.mm's measured time for each shape, Philox blocks at the measured
  generator rate. The bound is the largest of these terms (a roofline: a kernel that
  overlapped everything perfectly would reach it), and the terms are printed too.

    python bench/bound_model.py            # the model of every GPU row in docs/benchmarks.md
    python bench/bound_model.py --bandwidth 3.35e12 --flops 4.9e14

Shapes: V vocabulary, D vector size, N rows, T true classes per row, K negatives per row,
S shared candidates, e bytes per element of the input dtype.
"""

import argparse
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

DEFAULT_BANDWIDTH = 3.0e12  # bytes/s
DEFAULT_FLOPS = 4.9e14  # TF32 tensor-core matmul, dense, an H100 SXM's order


@dataclass
class Bound:
    case: str
    bytes: float  # everything moved through memory, table rows included
    flops: float = 0.0
    # Used by the CPU ceilings (the GPU model reads bytes and flops only):
    table: float = 0.0  # size in bytes of the table the random accesses fall into
    table_bytes: float = 0.0  # the part of `bytes` that moves rows of that table
    gathers: float = 0.0  # random accesses into the table (one per row visited)
    philox: float = 0.0  # Philox-4x32-10 blocks drawn
    gemms: Tuple[Tuple[int, int, int], ...] = ()  # (m, n, k) of each dense product
    # Share of table_bytes and gathers that revisit a row already touched in the same call:
    # at best those come from the nearest cache (the CPU model costs them at the smallest
    # working set's rates), the first touches at the table's own size.
    reuse: float = 0.0

    def seconds(self, bandwidth: float = DEFAULT_BANDWIDTH, flops: float = DEFAULT_FLOPS) -> float:
        return max(self.bytes / bandwidth, self.flops / flops if flops else 0.0)


def _at_size(table: Dict[int, float], size: float) -> float:
    """The value measured at the smallest size >= `size` (the largest size beyond them)."""
    sizes = sorted(table)
    for s in sizes:
        if s >= size:
            return table[s]
    return table[sizes[-1]]


@dataclass
class GpuCeilings:
    bandwidth: float = DEFAULT_BANDWIDTH
    flops: float = DEFAULT_FLOPS

    def terms(self, bound: Bound) -> Dict[str, float]:
        out = {"memory": bound.bytes / self.bandwidth}
        if bound.flops:
            out["flops"] = bound.flops / self.flops
        return out

    def seconds(self, bound: Bound) -> float:
        return bound.seconds(self.bandwidth, self.flops)


@dataclass
class CpuCeilings:
    stream_bw: float  # bytes/s (read + write) of a DRAM-sized copy, all threads
    level_bw: Dict[int, float] = field(default_factory=dict)  # working set -> copy bytes/s
    gather: Dict[int, float] = field(default_factory=dict)  # table bytes -> 8-byte reads/s
    philox_rate: float = 0.0  # Philox-4x32-10 blocks/s
    gemm: Dict[Tuple[int, int, int], float] = field(default_factory=dict)  # shape -> seconds
    stream_bw_1t: float = 0.0  # the same copy on one thread (reported, not used)

    def bandwidth_at(self, size: float) -> float:
        return _at_size(self.level_bw, size) if self.level_bw else self.stream_bw

    def gemm_seconds(self, shape: Tuple[int, int, int]) -> float:
        if shape in self.gemm:
            return self.gemm[shape]
        m, n, k = shape
        return 2.0 * m * n * k / self.peak_flops

    @property
    def peak_flops(self) -> float:
        rates = [2.0 * m * n * k / t for (m, n, k), t in self.gemm.items()]
        return max(rates) if rates else float("inf")

    def terms(self, bound: Bound) -> Dict[str, float]:
        """Seconds of each resource the kernel needs, alone."""
        table_bytes = min(bound.table_bytes, bound.bytes)
        near = min(self.level_bw) if self.level_bw else 0
        first, again = 1.0 - bound.reuse, bound.reuse
        out = {"memory": (bound.bytes - table_bytes) / self.stream_bw}
        if table_bytes:
            out["memory"] += table_bytes * (first / self.bandwidth_at(bound.table)
                                            + again / self.bandwidth_at(near))
        if bound.gathers:
            near = min(self.gather)
            out["gather"] = bound.gathers * (first / _at_size(self.gather, bound.table)
                                             + again / _at_size(self.gather, near))
        if bound.gemms:
            out["sgemm"] = sum(self.gemm_seconds(s) for s in bound.gemms)
        elif bound.flops:
            out["flops"] = bound.flops / self.peak_flops
        if bound.philox:
            out["philox"] = bound.philox / self.philox_rate
        return out

    def seconds(self, bound: Bound) -> float:
        return max(self.terms(bound).values())


def reuse_of(visits: float, distinct: Optional[float]) -> float:
    """Share of `visits` row touches that revisit one of `distinct` rows (0 when unknown)."""
    if not distinct or not visits:
        return 0.0
    return max(0.0, 1.0 - distinct / visits)


def limiting_term(terms: Dict[str, float]) -> str:
    return max(terms, key=terms.get)


def fraction_of_bound(bound_s: float, achieved_s: float) -> float:
    """Achieved rate over the bound's rate: 1.0 is at the ceiling, 0.5 twice as slow."""
    return bound_s / achieved_s


def dense_grad_bytes(V: int, D: int, e: int, distinct: Optional[int] = None) -> float:
    """Zero fill and write of a dense [V, D] weight gradient. When the rows touched are known
    (`distinct`), only those: a fresh buffer's untouched rows need never be written (the OS
    hands out zero pages), so the floor is the touched rows. Unknown (the GPU rows): all V."""
    return 2 * (min(distinct, V) if distinct else V) * D * e


def sample_draws(V: int, n: int) -> Bound:
    # Write n int64 ids; the table (float32 prob + int32 alias) is read at random, once
    # from memory when it fits in L2 (taken as read once). One random access into the table
    # per draw (its bucket) and one Philox block per draw (bucket and coin).
    return Bound(f"sample alias V={V:.0e} n={n:.0e}", 8 * n + 8 * V, table=8 * V, gathers=n,
                 philox=n)


def alias_build(V: int) -> Bound:
    # Read the float64 weights for the total, again for the two prefix scans, and write the
    # float32/int32 table: the minimum of any two-pass construction.
    return Bound(f"alias build V={V:.0e}", 8 * V + 8 * V + 8 * V)


def negative_sampling(N: int, K: int, D: int, V: int, T: int = 1, e: int = 4,
                      shared: bool = False, distinct: Optional[int] = None) -> Bound:
    rows = T + (0 if shared else K)
    visits = N * rows + (K if shared else 0)  # distinct (row, class) reads of the weight
    gathered = visits * D * e
    forward = N * D * e + gathered
    # Backward: read h and the rows again, write grad_h, zero and write the dense grad_W (its
    # touched rows when known), and read-modify-write each touched float32 row once per pair
    # (atomics).
    rmw = 2 * N * rows * D * 4
    backward = N * D * e + gathered + N * D * e + dense_grad_bytes(V, D, e, distinct) + rmw
    kind = "shared" if shared else "per-row"
    # Random accesses: each row visit in the forward, again in the backward, and the
    # gradient row's read-modify-write.
    return Bound(f"negative sampling ({kind} negatives) N={N} K={K} D={D} V={V:.0e}",
                 forward + backward, flops=3 * 2 * visits * D, table=V * D * e,
                 table_bytes=2 * gathered + rmw, gathers=2 * visits + N * rows,
                 reuse=reuse_of(visits, distinct))


def sampled_softmax(N: int, S: int, D: int, V: int, T: int = 1, e: int = 4,
                    distinct: Optional[int] = None) -> Bound:
    gemm_bytes = N * D * e + S * D * e + N * S * e  # one product: read both sides, write
    logits = 3 * N * S * e  # epilogue reads and rewrites L, the backward reads G
    true_rows = 2 * N * T * D * e
    dense_grad = dense_grad_bytes(V, D, e, distinct)
    flops = 3 * 2 * N * S * D  # L = H Ws^T, grad_H = G Ws, grad_Ws = G^T H
    # Random rows: the S candidates gathered and their gradient scattered, the true rows
    # read in the forward and their gradient added in the backward.
    return Bound(f"sampled softmax N={N} S={S} D={D} V={V:.0e}",
                 3 * gemm_bytes + logits + true_rows + dense_grad, flops,
                 table=V * D * e, table_bytes=true_rows + 2 * S * D * e,
                 gathers=2 * S + 2 * N * T, gemms=((N, S, D), (N, D, S), (S, D, N)),
                 reuse=reuse_of(S + N * T, distinct))


def full_softmax(N: int, D: int, V: int, e: int = 4) -> Bound:
    # linear_cross_entropy's floor: read H and W, write grad_H and grad_W; 3 products
    # (logits H W^T, grad_H = G W, grad_W = G^T H), the logits kept in cache, never stored.
    return Bound(f"full softmax N={N} D={D} V={V:.0e}",
                 2 * N * D * e + 2 * V * D * e, 3 * 2 * N * V * D,
                 gemms=((N, V, D), (N, D, V), (V, D, N)))


def hierarchical_softmax(N: int, D: int, V: int, depth: float, e: int = 4,
                         distinct: Optional[int] = None) -> Bound:
    # Each row walks `depth` inner nodes on average: read each node's row in the forward and
    # again in the backward, read-modify-write its gradient row; read h twice, write grad_h,
    # zero and write the dense [V - 1, D] grad_W (its touched rows when known).
    visits = N * depth
    table_bytes = visits * D * e * 2 + visits * D * 4 * 2
    return Bound(f"hierarchical softmax N={N} D={D} V={V:.0e} depth={depth:.1f}",
                 3 * N * D * e + dense_grad_bytes(V - 1, D, e, distinct) + table_bytes,
                 3 * 2 * visits * D,
                 table=(V - 1) * D * e, table_bytes=table_bytes, gathers=3 * visits,
                 reuse=reuse_of(visits, distinct))


def word2vec_row_visits(window: int, negative: int, sg: bool, group: int = 0) -> float:
    """Rows of syn0 and syn1neg one kept centre reads and writes back (the shrinking window
    averages (W + 1) / 2 a side, so W + 1 contexts).
    Pairs order (group 0, word2vec.c's): skip-gram predicts each context from its row
    against the centre's and K fresh negatives' rows; CBOW predicts once, from each context
    row, against K + 1 output rows.
    Shared negatives (group G, csrc/cpu/word2vec_batched.cpp): G consecutive centres share K
    negatives and every output row is written once per group, so a centre moves its inputs
    (its contexts' rows) plus its own output row plus K / G negatives' rows."""
    contexts = window + 1
    if group:
        return contexts + 1 + negative / group
    return contexts * (1 + negative + 1) if sg else contexts + negative + 1


def lines_per_row(D: int, e: int = 4, line: int = 64) -> float:
    """Cache lines a row of D elements spans, averaged over where rows start in a line (rows
    of a [V, D] table start at multiples of D e bytes)."""
    step = math.gcd(D * e, line)
    starts = range(0, line, step)
    return sum(-(-(o + D * e) // line) for o in starts) / len(starts)


def word2vec_hot_share(kept_counts, noise, D: int, window: int, negative: int, sg: bool,
                       group: int = 0, cache_bytes: float = 2 ** 20) -> float:
    """Share of word2vec's row visits that fall on the rows a cache of `cache_bytes` can
    hold (the most visited rows of syn0 and syn1neg together): kept_counts are the words'
    counts after subsampling, noise their negative-sampling probabilities. Inputs and
    positive outputs follow the kept counts, negatives the noise; a row off that hot set
    was last touched many thousands of rows ago, so it comes from the table's own level."""
    contexts = window + 1
    total = float(sum(kept_counts))
    positives = (contexts if sg and not group else 1) / total
    negatives = negative / group if group else (contexts * negative if sg else negative)
    weights = [contexts * c / total for c in kept_counts]
    weights += [positives * c + negatives * q for c, q in zip(kept_counts, noise)]
    weights.sort(reverse=True)
    hot_rows = int(cache_bytes // (D * 4))
    return sum(weights[:hot_rows]) / sum(weights)


def word2vec(words: float, D: int, window: int = 5, negative: int = 5, sg: bool = True,
             sample_keep: float = 1.0, vocab: int = 0, group: int = 0,
             hot: Optional[float] = None) -> Bound:
    # Per kept centre: word2vec_row_visits rows of D float32, each read and written. The
    # predictions and so the flops (a dot product and two row updates of D per output row
    # and prediction) are the same in either order. Philox: one block per raw token
    # (subsampling) and one per negative drawn.
    # Random accesses are counted in cache lines: a visit to a row off the cache misses on
    # every line of it, and each miss holds a fill buffer for a whole memory latency, so
    # the measured random-read rate at the table's size costs them (a latency bound, not a
    # bandwidth one). Revisits: `hot` (word2vec_hot_share) when known, the share of visits
    # that find their row in the nearest cache; otherwise every visit after the first touch
    # of a row, as if every revisit were a cache hit.
    contexts = window + 1
    row = 4 * D * 2
    kept = words * sample_keep
    visits = word2vec_row_visits(window, negative, sg, group)
    preds = contexts if sg else 1
    draws = negative / group if group else (contexts * negative if sg else negative)
    order = f" G={group}" if group else ""
    reuse = hot if hot is not None else reuse_of(kept * visits, 2 * vocab)
    return Bound(f"word2vec {'sg' if sg else 'cbow'} D={D} W={window} K={negative}{order}",
                 kept * visits * row, flops=kept * preds * (negative + 1) * 3 * 2 * D,
                 table=2 * vocab * D * 4, table_bytes=kept * visits * row,
                 gathers=kept * visits * (lines_per_row(D) if hot is not None else 1),
                 philox=words + kept * draws, reuse=reuse)


def readme_rows() -> List[Bound]:
    """The GPU rows the targets of docs/benchmarks.md name."""
    return [
        sample_draws(10**6, 10**8),
        alias_build(10**7),
        negative_sampling(2**20, 5, 300, 10**5),
        negative_sampling(2**20, 5, 300, 10**5, shared=True),
        sampled_softmax(8192, 1024, 1024, 8 * 10**5),
        full_softmax(8192, 1024, 8 * 10**5),
        word2vec(2 * 10**7, 100),
    ]


def copy_bandwidth(device) -> float:
    """Bytes/s of a 256 MiB device-to-device copy (read + write), median of 10."""
    import torch

    x = torch.empty(2**28, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        y.copy_(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * x.numel() / sorted(times)[len(times) // 2]


def add_flag(parser) -> None:
    parser.add_argument("--bound-model", action="store_true",
                        help="print the bytes each GPU row must move and the time that takes "
                             "at 3.0 TB/s, then exit (no GPU needed)")


def print_model(bounds: List[Bound], bandwidth: float = DEFAULT_BANDWIDTH,
                flops: float = DEFAULT_FLOPS) -> None:
    print(f"bound model at {bandwidth / 1e12:.2f} TB/s and {flops / 1e12:.0f} TFLOP/s")
    for bound in bounds:
        print(" ", describe(bound, bandwidth, flops))


def describe(bound: Bound, bandwidth: float, flops: float,
             measured: Optional[float] = None) -> str:
    line = (f"{bound.case}: {bound.bytes / 1e9:.3f} GB"
            + (f", {bound.flops / 1e12:.2f} TFLOP" if bound.flops else "")
            + f", bound {bound.seconds(bandwidth, flops) * 1e3:.3f} ms")
    if measured is not None:
        ratio = measured / bound.seconds(bandwidth, flops)
        line += f", measured {measured * 1e3:.3f} ms ({ratio:.2f}x bound)"
    return line


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--bandwidth", type=float, default=DEFAULT_BANDWIDTH, help="bytes/s")
    p.add_argument("--flops", type=float, default=DEFAULT_FLOPS, help="matmul FLOP/s")
    p.add_argument("--measure", action="store_true",
                   help="measure the bandwidth of this machine's GPU and use it")
    args = p.parse_args(argv)
    if args.measure:
        args.bandwidth = copy_bandwidth("cuda")
        print(f"measured device-to-device copy: {args.bandwidth / 1e12:.3f} TB/s")
    print_model(readme_rows(), args.bandwidth, args.flops)
    w2v = word2vec(1, 100)
    print(f"  word2vec at the bound: {args.bandwidth / w2v.bytes:.3g} words/s (no L2 reuse)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
