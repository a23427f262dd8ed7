"""What eval saves now that the loss forwards skip their gradient pieces (need_grad=False):
negative sampling's coef [N, T + K] and sampled softmax's grad_logits [N, S] / grad_true
[N, T]. Both variants run in one process, alternating, through the same op wrapper, under
torch.no_grad():

    python bench/bench_eval_no_grad.py [--device cpu] [--rounds 15]
    python bench/bench_eval_no_grad.py --checkout /work/main   # also: that checkout vs this

`--checkout DIR` also times the public functional loss under no_grad in subprocesses that
import fastsoftmax from DIR and from this checkout, alternating (rounds of --repeat runs).
Prints medians over rounds and the ratio; correctness (equal losses) is checked first.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (N, D, V, K) of negative sampling and (N, D, V, S) of sampled softmax.
NS_SHAPE, SS_SHAPE = (2**16, 100, 10**5, 5), (2048, 256, 10**5, 1024)


def make_cases(device):
    """(name, loss-of-functional, op call with need_grad) of both losses, fixed seed."""
    import fastsoftmax as fs
    from fastsoftmax import functional as FF
    g = torch.Generator().manual_seed(0)
    n, d, v, k = NS_SHAPE
    h = torch.randn(n, d, generator=g).to(device)
    w = (0.1 * torch.randn(v, d, generator=g)).to(device)
    t = torch.randint(0, v, (n,), generator=g).to(device)
    neg = torch.randint(0, v, (n, k), generator=g).to(device)
    n2, d2, v2, s = SS_SHAPE
    h2 = torch.randn(n2, d2, generator=g).to(device)
    w2 = (0.1 * torch.randn(v2, d2, generator=g)).to(device)
    t2 = torch.randint(0, v2, (n2,), generator=g).to(device)
    sampled = fs.LogUniformSampler(v2, device=device).candidates(t2[:, None], s, generator=g)
    cases = [
        ("negative_sampling N=2^16 D=100 K=5",
         lambda: FF.negative_sampling_loss(h, w, t, negatives=neg)),
        ("sampled_softmax N=2048 D=256 S=1024",
         lambda: FF.sampled_softmax_loss(h2, w2, t2, sampled=sampled)),
    ]
    ops = fs.ops
    if hasattr(ops, "needs_grad"):  # this checkout: the op with need_grad either way
        cand, tq, sq = sampled
        z = torch.zeros((), dtype=torch.float64, device=device)
        cases[0] += (lambda keep: ops.negative_sampling_forward(
            h, w, t[:, None], neg, -100, False, keep),)
        cases[1] += (lambda keep: ops.sampled_logits_forward(
            h2, w2, None, t2[:, None], cand, tq.reshape(-1, 1), sq, z, 0, True, -100, False, keep),)
    return cases


def median_time(fn, device, repeat):
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def in_process(device, rounds, repeat):
    for case in make_cases(device):
        name, _, op = case
        with torch.no_grad():
            assert torch.equal(op(True)[0], op(False)[0]), name
            kept, skipped = [], []
            for _ in range(rounds):
                kept.append(median_time(lambda: op(True), device, repeat))
                skipped.append(median_time(lambda: op(False), device, repeat))
        a, b = statistics.median(kept), statistics.median(skipped)
        print(f"op {name}: gradient pieces kept {a * 1e3:.2f} ms, skipped {b * 1e3:.2f} ms, "
              f"ratio {b / a:.3f}")


def child(root, device, repeat):
    """Runs in a subprocess: median seconds of each functional loss under no_grad."""
    sys.path.insert(0, root)
    with torch.no_grad():
        for case in make_cases(torch.device(device)):
            print(case[0], "|", case[1]().item(), "|", median_time(case[1], torch.device(device),
                                                                    repeat))


def across_checkouts(other, device, rounds, repeat):
    results = {}
    for _ in range(rounds):
        for label, root in (("other", other), ("this", ROOT)):
            out = subprocess.run(
                [sys.executable, __file__, "--child", root, "--device", str(device),
                 "--repeat", str(repeat)], check=True, capture_output=True, text=True,
                cwd=root).stdout
            for line in out.strip().splitlines():
                name, loss, seconds = (part.strip() for part in line.split("|"))
                results.setdefault(name, {}).setdefault(label, []).append(
                    (float(loss), float(seconds)))
    for name, by in results.items():
        assert by["other"][0][0] == by["this"][0][0], f"{name}: the losses differ"
        a = statistics.median(s for _, s in by["other"])
        b = statistics.median(s for _, s in by["this"])
        print(f"functional {name} under no_grad: {other} {a * 1e3:.2f} ms, this checkout "
              f"{b * 1e3:.2f} ms, ratio {b / a:.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--checkout", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.device, args.repeat)
    sys.path.insert(0, ROOT)
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {device}, {torch.get_num_threads()} threads")
    in_process(device, args.rounds, args.repeat)
    if args.checkout:
        across_checkouts(args.checkout, device, args.rounds, args.repeat)


if __name__ == "__main__":
    main()
