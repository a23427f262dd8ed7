"""Draws per second and table build time of fastsoftmax's samplers against the usual ways
of drawing from a categorical distribution in PyTorch and numpy.

    python bench/bench_sampler.py [--device cpu|cuda] [--draws 10000000] [--vocab 1e4,1e5,1e6,1e7]
    python bench/bench_sampler.py --device cuda --unique 8192 --vocab 1e6

Every provider's draws are checked against the target distribution before it is timed.
--unique S times unique sampling instead (TensorFlow's rejection loop, ops.sample_unique) of
S candidates for each kind, as a training step runs it: checks deferred, nothing read back.
Rows are appended to bench/results/sampler-<cpu|cuda>.csv (schema: bench/common.py).
"""

import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import fastsoftmax as fs  # noqa: E402
import bound_model  # noqa: E402
from common import device_name, peak_extra_bytes, sync, time_it, write_results  # noqa: E402


def zipf_weights(v: int) -> torch.Tensor:
    """unigram^0.75 of Zipfian counts, in shuffled order (as a real vocabulary's table)."""
    g = torch.Generator().manual_seed(0)
    counts = 1e9 / torch.arange(1, v + 1, dtype=torch.float64) ** 1.1
    return (counts[torch.randperm(v, generator=g)] ** 0.75).float()


def check(draws: torch.Tensor, p: torch.Tensor, name: str):
    """Coarse fit check: the 100 most likely classes' frequencies within 5 sigma + 1e-4."""
    draws = draws.flatten()[:2_000_000].cpu()
    n = draws.numel()
    assert int(draws.min()) >= 0 and int(draws.max()) < p.numel(), name
    top = torch.topk(p.double().cpu(), min(100, p.numel())).indices
    freq = torch.bincount(draws, minlength=p.numel()).double()[top] / n
    expect = p.double().cpu()[top]
    sigma = torch.sqrt(expect * (1 - expect) / n)
    bad = (freq - expect).abs() > 5 * sigma + 1e-4
    assert not bool(bad.any()), f"{name}: draws do not follow the target distribution"


def providers(p: torch.Tensor, device: torch.device):
    """name -> (build(), draw(table, n)); build time is measured separately."""
    out = {
        "fastsoftmax.AliasSampler": (
            lambda: fs.AliasSampler(p, device=device),
            lambda t, n: t.sample(n),
        ),
        "torch.multinomial": (
            lambda: p,
            lambda t, n: torch.multinomial(t, n, replacement=True),
        ),
        "torch.searchsorted(cumsum)": (
            lambda: torch.cumsum(p.double(), 0) / p.double().sum(),
            lambda t, n: torch.searchsorted(t, torch.rand(n, device=device, dtype=torch.float64))
            .clamp_max_(t.numel() - 1),
        ),
    }
    if device.type == "cpu":
        rng = np.random.default_rng(0)
        out["numpy.Generator.choice"] = (
            lambda: (p.double() / p.double().sum()).numpy(),
            lambda t, n: torch.from_numpy(rng.choice(t.size, size=n, p=t)),
        )
    return out


UNIQUE_KINDS = {"alias(unigram^0.75)": fs.ops.KIND_ALIAS, "log_uniform": fs.ops.KIND_LOG_UNIFORM,
                "uniform": fs.ops.KIND_UNIFORM}


def unique_rows(v: int, num_sampled: int, device: torch.device, args) -> list:
    """Times one call of sample_unique per kind inside deferred_checks (a training step's
    setting: on CUDA the op reads nothing back, so the time is the device's)."""
    table = fs.ops.alias_build(zipf_weights(v).double()) if device.type == "cpu" else \
        tuple(t.to(device) for t in fs.ops.alias_build(zipf_weights(v).double()))
    seed = torch.tensor([12345], device=device)
    rows = []
    for kname, kind in UNIQUE_KINDS.items():
        with fs.deferred_checks() as checks:
            def call():
                return fs.ops.sample_unique(table[0], table[1], seed, v, kind, num_sampled)
            ids, tries = call()
            med, lo, hi = time_it(call, device, args.repeats, budget_s=args.budget)
            checks.raise_pending()
        assert ids.unique().numel() == num_sampled, kname
        tries = int(tries)
        shape = f"V={v} S={num_sampled}"
        metrics = dict(time_us_median=round(1e6 * med, 1), time_us_min=round(1e6 * lo, 1),
                       time_us_max=round(1e6 * hi, 1), num_tries=tries)
        rows += [dict(case="unique", provider=f"fastsoftmax.sample_unique[{kname}]", shape=shape,
                      metric=k, value=val) for k, val in metrics.items()]
        print(f"{kname:22s} {v:9d} {num_sampled:7d} {1e6 * med:11.1f} {1e6 * lo:9.1f} "
              f"{tries:9d} {tries / num_sampled:8.2f}")
    return rows


def main_unique(args, device: torch.device) -> None:
    print(f"device: {device_name(device)}; unique sampling, medians of up to {args.repeats} "
          "calls (checks deferred)")
    print(f"{'kind':22s} {'V':>9s} {'S':>7s} {'median us':>11s} {'min us':>9s} "
          f"{'num_tries':>9s} {'tries/S':>8s}")
    rows = []
    for v in [int(float(x)) for x in args.vocab.split(",")]:
        rows += unique_rows(v, args.unique, device, args)
    print("wrote", write_results("sampler", device, rows, args.out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--draws", type=int, default=10_000_000)
    ap.add_argument("--vocab", default="1e4,1e5,1e6,1e7")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per timing at most")
    ap.add_argument("--out", default=None, help="CSV to append to (default: bench/results/)")
    ap.add_argument("--unique", type=int, default=0, metavar="S",
                    help="time unique sampling of S candidates instead of the draws")
    bound_model.add_flag(ap)
    args = ap.parse_args()
    if args.bound_model:
        vocab = [int(float(v)) for v in args.vocab.split(",")]
        bound_model.print_model([bound_model.sample_draws(v, args.draws) for v in vocab]
                                + [bound_model.alias_build(v) for v in vocab])
        return
    device = torch.device(args.device)
    if args.unique:
        return main_unique(args, device)
    name = device_name(device)
    rows = []
    print(f"device: {name}; {args.draws:.0e} draws per call; medians of up to {args.repeats} runs")
    print(f"{'provider':28s} {'V':>9s} {'build ms':>10s} {'draw s':>9s} {'draws/s':>10s} {'vs multinomial':>15s}")
    for v in [int(float(x)) for x in args.vocab.split(",")]:
        p = zipf_weights(v).to(device)
        timings = {}
        for pname, (build, draw) in providers(p, device).items():
            build_s, _, _ = time_it(build, device, repeats=3, warmup=0, budget_s=args.budget)
            table = build()
            sync(device)
            torch.manual_seed(0)
            check(draw(table, min(args.draws, 2_000_000)), p, pname)
            med, lo, hi = time_it(lambda: draw(table, args.draws), device, args.repeats,
                                  budget_s=args.budget)
            timings[pname] = (build_s, med, lo, hi)
            if pname == "fastsoftmax.AliasSampler":
                del table
                build_bytes = peak_extra_bytes(build, device)
        base = timings.get("torch.multinomial", (None, None))[1]
        for pname, (build_s, med, lo, hi) in timings.items():
            shape = f"V={v} draws={args.draws}"
            metrics = dict(build_ms=round(1e3 * build_s, 3), draw_s_median=round(med, 6),
                           draw_s_min=round(lo, 6), draw_s_max=round(hi, 6),
                           draws_per_s=round(args.draws / med))
            if base:
                metrics["speedup_vs_multinomial"] = round(base / med, 2)
            if pname == "fastsoftmax.AliasSampler":  # the table (8 B/class) included
                metrics["build_peak_bytes_per_class"] = round(build_bytes / v, 1)
            rows += [dict(case="draw", provider=pname, shape=shape, metric=k, value=val)
                     for k, val in metrics.items()]
            print(f"{pname:28s} {v:9d} {1e3 * build_s:10.2f} {med:9.4f} "
                  f"{args.draws / med:10.3g} {(base or math.nan) / med:14.2f}x")
        print(f"fastsoftmax alias build at V={v}: peak {build_bytes / v:.1f} bytes per class "
              "(the 8-byte table included)")
    print("wrote", write_results("sampler", device, rows, args.out))


if __name__ == "__main__":
    main()
