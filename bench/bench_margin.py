"""Forward+backward time and peak memory of the margin losses:

- multi_margin: fastsoftmax.functional.multi_margin_loss (native hinge reduction; the default
  256 MiB budget holds these scores in one block, and 16 MiB blocks made again in the
  backward show the memory bound) against torch.nn.functional.multi_margin_loss of the whole
  [N, V] logits;
- ranking: the sampled margin-ranking loss over K per-row negatives (native fused
  gather-dots) against the same loss in plain PyTorch (gather [N, K, D] + bmm + clamp), and
  against the exact ranking loss over all V classes.

    python bench/bench_margin.py            # CPU shapes
    python bench/bench_margin.py --threads 1
    python bench/bench_margin.py --smoke    # seconds, to check that the script runs

Correctness (loss and input gradient against the plain version) is checked before anything is
timed. Times are medians over --repeat runs after one warm-up (min and max as the spread);
peak memory is the extra resident memory of one forward+backward (bench/common.py). Rows are
appended to bench/results/margin-<cpu|cuda>.csv.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import fastsoftmax as fs  # noqa: E402
from common import peak_extra_bytes, time_it, write_results  # noqa: E402
from fastsoftmax import functional as FF  # noqa: E402

SHAPES = {"cpu": (1024, 128, 50_000, 64), "smoke": (64, 16, 2000, 8)}  # N, D, V, K


def plain_ranking(h, w, t, neg, margin=1.0):
    s_t = (h * w[t]).sum(1, keepdim=True)
    s = torch.bmm(w[neg], h.unsqueeze(2)).squeeze(2)
    return (torch.clamp(margin - s_t + s, min=0) * (neg != t[:, None])).sum(1).mean()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="torch.set_num_threads (1 gives steadier times on a loaded box)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    N, D, V, K = SHAPES["smoke" if args.smoke else "cpu"]
    g = torch.Generator().manual_seed(0)
    h = torch.randn(N, D, generator=g).requires_grad_()
    w = (torch.randn(V, D, generator=g) / D ** 0.5).requires_grad_()
    t = torch.randint(0, V, (N,), generator=g)
    neg = fs.UniformSampler(V).sample(N, K, generator=g)
    cases = {
        ("multi_margin", "fastsoftmax"): lambda: FF.multi_margin_loss(h, w, t),
        ("multi_margin", "fastsoftmax, 16 MiB blocks"):
            lambda: FF.multi_margin_loss(h, w, t, chunk_bytes=16 * 2**20),
        ("multi_margin", "torch F.multi_margin_loss"):
            lambda: F.multi_margin_loss(h @ w.T, t),
        ("ranking", "fastsoftmax sampled"):
            lambda: FF.sampled_margin_ranking_loss(h, w, t, sampled=neg),
        ("ranking", "plain PyTorch sampled"): lambda: plain_ranking(h, w, t, neg),
        ("ranking", "fastsoftmax exact"): lambda: FF.full_margin_ranking_loss(h, w, t),
    }
    pairs = [(("multi_margin", "fastsoftmax"), ("multi_margin", "torch F.multi_margin_loss")),
             (("ranking", "fastsoftmax sampled"), ("ranking", "plain PyTorch sampled"))]
    for ours, theirs in pairs:
        a, b = cases[ours](), cases[theirs]()
        ga, gb = (torch.autograd.grad(x, h)[0] for x in (a, b))
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-4)

    rows = []
    shape = f"N={N} D={D} V={V} K={K} threads={args.threads}"
    for (case, provider), fn in cases.items():
        def step():
            h.grad = w.grad = None
            fn().backward()
        median, low, high = time_it(step, device, repeats=args.repeat)
        peak = peak_extra_bytes(step, device)
        print(f"{case:13s} {provider:28s} {median * 1e3:9.1f} ms "
              f"[{low * 1e3:.1f}, {high * 1e3:.1f}]  +{peak / 2**20:.0f} MiB", flush=True)
        for metric, value in (("fwd+bwd median s", median), ("fwd+bwd min s", low),
                              ("fwd+bwd max s", high), ("peak extra MiB", peak / 2**20)):
            rows.append(dict(case=case, provider=provider, shape=shape, metric=metric,
                             value=value))
    if not args.smoke:
        print("wrote", write_results("margin", device, rows))


if __name__ == "__main__":
    main()
