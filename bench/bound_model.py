"""What each CUDA kernel must move, and the time that takes at a given copy bandwidth.

A GPU benchmark row is judged against its bound: bytes the kernel cannot avoid moving through
device memory, divided by the device's measured copy bandwidth (a large device-to-device copy
in the same run; 3.0 TB/s, an H100 SXM's order, when there is no GPU). Where the work is
dense maths, the row also carries a FLOP bound and the larger of the two is the bound.

    python bench/bound_model.py            # the model of every GPU row in docs/benchmarks.md
    python bench/bound_model.py --bandwidth 3.35e12 --flops 4.9e14

Shapes: V vocabulary, D vector size, N rows, T true classes per row, K negatives per row,
S shared candidates, e bytes per element of the input dtype.
"""

import argparse
from dataclasses import dataclass
from typing import List, Optional

DEFAULT_BANDWIDTH = 3.0e12  # bytes/s
DEFAULT_FLOPS = 4.9e14  # TF32 tensor-core matmul, dense, an H100 SXM's order


@dataclass
class Bound:
    case: str
    bytes: float
    flops: float = 0.0

    def seconds(self, bandwidth: float = DEFAULT_BANDWIDTH, flops: float = DEFAULT_FLOPS) -> float:
        return max(self.bytes / bandwidth, self.flops / flops if flops else 0.0)


def sample_draws(V: int, n: int) -> Bound:
    # Write n int64 ids; the table (float32 prob + int32 alias) is read at random, once
    # from memory when it fits in L2 (taken as read once).
    return Bound(f"sample alias V={V:.0e} n={n:.0e}", 8 * n + 8 * V)


def alias_build(V: int) -> Bound:
    # Read the float64 weights for the total, again for the two prefix scans, and write the
    # float32/int32 table: the minimum of any two-pass construction.
    return Bound(f"alias build V={V:.0e}", 8 * V + 8 * V + 8 * V)


def negative_sampling(N: int, K: int, D: int, V: int, T: int = 1, e: int = 4,
                      shared: bool = False) -> Bound:
    rows = T + (0 if shared else K)
    gathered = N * rows * D * e + (K * D * e if shared else 0)
    forward = N * D * e + gathered
    # Backward: read h and the rows again, write grad_h, zero and write the dense grad_W, and
    # read-modify-write each touched float32 row once per pair (atomics).
    backward = N * D * e + gathered + N * D * e + 2 * V * D * e + 2 * N * rows * D * 4
    kind = "shared" if shared else "per-row"
    return Bound(f"negative sampling ({kind} negatives) N={N} K={K} D={D} V={V:.0e}",
                 forward + backward)


def sampled_softmax(N: int, S: int, D: int, V: int, T: int = 1, e: int = 4) -> Bound:
    gemm_bytes = N * D * e + S * D * e + N * S * e  # one product: read both sides, write
    logits = 3 * N * S * e  # epilogue reads and rewrites L, the backward reads G
    true_rows = 2 * N * T * D * e
    dense_grad = 2 * V * D * e  # zero fill and write of the dense grad_W
    flops = 3 * 2 * N * S * D  # L = H Ws^T, grad_H = G Ws, grad_Ws = G^T H
    return Bound(f"sampled softmax N={N} S={S} D={D} V={V:.0e}",
                 3 * gemm_bytes + logits + true_rows + dense_grad, flops)


def full_softmax(N: int, D: int, V: int, e: int = 4) -> Bound:
    # linear_cross_entropy's floor: read H and W, write grad_H and grad_W; 3 products.
    return Bound(f"full softmax N={N} D={D} V={V:.0e}",
                 2 * N * D * e + 2 * V * D * e, 3 * 2 * N * V * D)


def word2vec(words: float, D: int, window: int = 5, negative: int = 5, sg: bool = True,
             sample_keep: float = 1.0) -> Bound:
    # Per kept centre (the shrinking window averages (W + 1) / 2 a side): skip-gram makes one
    # prediction per context, CBOW one per centre; a prediction reads and writes its input
    # row (or the window's rows for CBOW) and its K + 1 output rows, in float32.
    contexts = window + 1  # 2 * (W + 1) / 2
    row = 4 * D * 2
    per_word = contexts * (1 + negative + 1) * row if sg else (2 * contexts + negative + 1) * row
    return Bound(f"word2vec {'sg' if sg else 'cbow'} D={D} W={window} K={negative}",
                 words * sample_keep * per_word)


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
