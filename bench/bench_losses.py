"""Forward+backward time and peak memory of the sampled losses and the hierarchical softmax
against full softmax (F.linear + F.cross_entropy; F.linear_cross_entropy unchunked and
chunked; torch.compile, Liger-Kernel and Cut Cross-Entropy from bench/fused_peers.py, the
last two CUDA-only, skipped with the reason elsewhere) and the same loss in plain PyTorch.

    python bench/bench_losses.py                 # CPU, shapes scaled down (see SHAPES)
    python bench/bench_losses.py --device cuda   # full-size shapes, CUDA events

Correctness is checked (ours vs plain PyTorch, linear_cross_entropy vs F.cross_entropy: loss
and gradients) before anything is timed. The chunked linear_cross_entropy is slow on CPU (its
automatic chunks are a few rows, each re-reading the [V, D] weight gradient), so both chunked
variants are timed once, without warm-up, their peak memory taken in that same run.
Times are medians over --repeat runs after a warm-up, with the min and max as the spread.
Peak memory is the extra memory a forward+backward allocates beyond its inputs: on CUDA from
the caching allocator's peak statistics, on the CPU from the resident-set high-water mark.
On CUDA the negative-sampling rows also give the memory-bandwidth bound: the bytes the
kernels must move divided by the measured device copy bandwidth.
Rows are appended to bench/results/losses-<cpu|cuda>.csv (schema: bench/common.py).
"""

import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import fastsoftmax as fs  # noqa: E402
from common import device_name, peak_extra_bytes, randn_on, sync, time_it, write_results  # noqa: E402
import bound_model  # noqa: E402
import fused_peers  # noqa: E402
from peers import check_lce, hs_ours, hs_plain, lce_loss, lce_variants, make_hs  # noqa: E402
from fastsoftmax import functional as FF  # noqa: E402

# (rows, D, V, K) for word2vec and (N, D, V, S) for the LM case. CPU shapes are scaled
# down so that a full-softmax step takes seconds, not minutes, on 2 cores.
SHAPES = {
    "cuda": {
        "word2vec": [(2**20, 100, 100_000, 5), (2**20, 300, 100_000, 5)],
        "lm": [(8192, 1024, 100_000, 8192), (8192, 1024, 800_000, 8192)],
        "hs": [(8192, 1024, 100_000), (8192, 1024, 800_000)],
        "dtypes": [torch.float32, torch.bfloat16],
    },
    "cpu": {
        # the 4,096-row case is small enough for linear_cross_entropy's [N, V] logits
        "word2vec": [(2**16, 100, 100_000, 5), (2**16, 300, 100_000, 5), (4096, 100, 100_000, 5)],
        "lm": [(2048, 256, 100_000, 1024)],
        "hs": [(2048, 256, 100_000)],
        "dtypes": [torch.float32],
    },
    "smoke": {  # --smoke: seconds, to check that the script runs
        "word2vec": [(4096, 64, 5000, 5)],
        "lm": [(256, 64, 5000, 256)],
        "hs": [(256, 64, 5000)],
        "dtypes": [torch.float32, torch.bfloat16],
    },
}


# Providers: each returns the summed loss; check_close compares their gradients.
def ns_ours(h, w, t, neg):
    return FF.negative_sampling_loss(h, w, t, negatives=neg, reduction="sum")


def ns_plain(h, w, t, neg):
    # gather [N, 1 + K, D] rows, batched dot, logsigmoid, autograd
    pos = (w[t].unsqueeze(1) @ h.unsqueeze(2)).squeeze(-1).squeeze(-1)  # [N]
    negs = torch.bmm(w[neg], h.unsqueeze(2)).squeeze(2)  # [N, K]
    return -(F.logsigmoid(pos).sum() + F.logsigmoid(-negs).sum())


def ss_ours(h, w, b, t, sampled):
    return FF.sampled_softmax_loss(h, w, t, linear_bias=b, sampled=sampled, reduction="sum")


def ss_smoothed(h, w, b, t, sampled, class_weight):
    # label smoothing over the candidates (and a per-class weight), composed around our op
    return FF.sampled_softmax_loss(h, w, t, linear_bias=b, sampled=sampled, reduction="sum",
                                   label_smoothing=0.1, weight=class_weight)


def ss_plain(h, w, b, t, sampled):
    cand, tq, sq = sampled
    true_logit = (h * w[t]).sum(1) + b[t] - tq.log().to(h.dtype)
    logits = torch.addmm(b[cand] - sq.log().to(h.dtype), h, w[cand].T)  # [N, S]
    logits = logits.masked_fill(cand[None, :] == t[:, None], float("-inf"))
    all_logits = torch.cat([true_logit[:, None], logits], 1)
    return (torch.logsumexp(all_logits, 1) - true_logit).sum()


def nce_ours(h, w, b, t, sampled):
    return FF.nce_loss(h, w, t, linear_bias=b, sampled=sampled, reduction="sum")


def nce_plain(h, w, b, t, sampled):
    # tf.nn.nce_loss: sigmoid cross entropy of the true and the sampled logits, each shifted by
    # -log Q (no accidental-hit removal, TensorFlow's default for NCE)
    cand, tq, sq = sampled
    true_logit = (h * w[t]).sum(1) + b[t] - tq.log().to(h.dtype)
    logits = torch.addmm(b[cand] - sq.log().to(h.dtype), h, w[cand].T)  # [N, S]
    return -(F.logsigmoid(true_logit).sum() + F.logsigmoid(-logits).sum())


def full_softmax(h, w, b, t):
    return F.cross_entropy(F.linear(h, w, b), t, reduction="sum")


def step(fn, args, params):
    for p in params:
        p.grad = None
    loss = fn(*args)
    loss.backward()
    return loss


def time_step(fn, args, params, device, repeat, warmup):
    """Median, min and max milliseconds of one forward+backward."""
    med, lo, hi = time_it(lambda: step(fn, args, params), device, repeat, warmup, budget_s=600)
    return 1e3 * med, 1e3 * lo, 1e3 * hi


def peak_extra_mb(fn, fargs, params, device):
    """Extra memory of one forward+backward beyond its inputs (common.peak_extra_bytes)."""
    for p in params:
        p.grad = None
    return peak_extra_bytes(lambda: step(fn, fargs, params), device) / 2**20


def measure(name, fn, fargs, params, device, args):
    """(median, min, max, peak extra MiB) of one provider. The chunked linear_cross_entropy
    runs once, its peak taken in the timed run."""
    if not name.startswith("lce_chunked"):
        repeat = args.repeat if not name.startswith(("full", "lce")) else max(3, args.repeat // 3)
        med, lo, hi = time_step(fn, fargs, params, device, repeat, args.warmup)
        return med, lo, hi, peak_extra_mb(fn, fargs, params, device)
    t0 = time.perf_counter()
    mem = peak_extra_mb(fn, fargs, params, device)
    sync(device)
    ms = (time.perf_counter() - t0) * 1e3
    return ms, ms, ms, mem


LCE_MAX_LOGIT_BYTES = 4 << 30

RATIOS = ("speedup_vs_plain", "speedup_vs_full", "speedup_vs_lce", "speedup_vs_lce_chunked_auto",
          "speedup_vs_lce_chunked", "speedup_vs_torch.compile", "speedup_vs_liger",
          "speedup_vs_cce")


def add_ratios(ours_row, results):
    for name in ("plain", "full_softmax", "lce", "lce_chunked_auto", "lce_chunked",
                 "torch.compile", "liger", "cce"):
        if name in results:
            key = "speedup_vs_full" if name == "full_softmax" else f"speedup_vs_{name}"
            ours_row[key] = results[name] / results["ours"]


def run_providers(case, shape, providers, device, dtype, args, rows):
    """Times each (name, fn, fargs, params) provider, appends a row per provider and the
    speed-ups to the first ("ours") row, which it returns."""
    results, first = {}, len(rows)
    for name, fn, fargs, params in providers:
        # On stderr as it happens: a run stopped at a time limit still says where it was.
        print(f"  timing {case} {name} {str(dtype)[6:]} {shape} ...", file=sys.stderr,
              flush=True)
        med, lo, hi, mem = measure(name, fn, fargs, params, device, args)
        results[name] = med
        rows.append(dict(case=case, provider=name, dtype=str(dtype)[6:], shape=shape,
                         median_ms=med, min_ms=lo, max_ms=hi, peak_extra_mb=mem))
    add_ratios(rows[first], results)
    return rows[first]


def lce_providers(h, w, b, t, device, args):
    return [(name, lce_loss(options), (h, w, b, t))
            for name, options in lce_variants(h.shape[0], w.shape[0], device, args.lce_rows)
            ] + [(name, fn, (h, w, b, t)) for name, fn in fused_peers.providers(
                device, h.dtype, b is not None, args.compile)]


def check_close(ours, plain, params, dtype, what):
    tol = dict(rtol=2e-3, atol=1e-3) if dtype == torch.float32 else dict(rtol=5e-2, atol=5e-2)
    lo = step(ours[0], ours[1], params)
    ga = [p.grad.clone() for p in params]
    lp = step(plain[0], plain[1], params)
    gb = [p.grad.clone() for p in params]
    torch.testing.assert_close(lo.float(), lp.float(), rtol=tol["rtol"],
                               atol=tol["atol"] * lp.numel())
    for a, b in zip(ga, gb):
        scale = b.float().abs().max().clamp_min(1e-12)
        err = float((a.float() - b.float()).abs().max() / scale)
        if err > tol["rtol"] * 10:
            raise AssertionError(
                f"{what}: gradient differs from plain PyTorch (rel. err {err:.2e})")
    for p in params:
        p.grad = None


# ---- cases ---------------------------------------------------------------------------------

def make_word2vec(device, dtype, shape):
    n, d, v, k = shape
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(v, d, generator=g) * 0.1).to(device, dtype).requires_grad_()
    h = (torch.randn(n, d, generator=g) * 0.1).to(device, dtype).requires_grad_()
    sampler = fs.UnigramSampler(torch.arange(v, 0, -1).double() ** -1.0 * 1e6).to(device)
    t = sampler.sample(n, generator=g)
    neg = sampler.sample(n, k, generator=g)
    return {"ours": (ns_ours, (h, w, t, neg)), "plain": (ns_plain, (h, w, t, neg))}, [h, w]


def make_lm(device, dtype, shape):
    n, d, v, s = shape
    g = torch.Generator().manual_seed(0)
    w = (randn_on(device, v, d, generator=g) * 0.05).to(dtype).requires_grad_()
    b = torch.zeros(v).to(device, dtype).requires_grad_()
    h = randn_on(device, n, d, generator=g).to(dtype).requires_grad_()
    sampler = fs.LogUniformSampler(v, device=device)
    t = sampler.sample(n, generator=g)
    sampled = sampler.candidates(t, s, generator=g)
    return {"ours": (ss_ours, (h, w, b, t, sampled)), "plain": (ss_plain, (h, w, b, t, sampled)),
            "full_softmax": (full_softmax, (h, w, b, t))}, [h, w, b]


def bench_word2vec(device, dtype, shape, args, rows):
    n, d, v, k = shape
    providers, params = make_word2vec(device, dtype, shape)
    h, w, t, neg = providers["ours"][1]
    check_close((ns_ours, (h, w, t, neg)), (ns_plain, (h, w, t, neg)), params, dtype, "word2vec")
    bound = bound_model.negative_sampling(n, k, d, v, e=torch.finfo(dtype).bits // 8)
    bound_ms = bound.seconds(args.bandwidth) * 1e3 if args.bandwidth else float("nan")
    providers = [("ours", ns_ours, (h, w, t, neg)), ("plain", ns_plain, (h, w, t, neg))]
    # the full softmax of the same weight on the first true class, where its [N, V] logits
    # fit in memory (N = 2^16, V = 10^5 would need 26 GB)
    if args.lce and n * v * torch.finfo(dtype).bits // 8 <= LCE_MAX_LOGIT_BYTES:
        providers += lce_providers(h, w, None, t, device, args)
    ours = run_providers("negative_sampling", f"N={n} D={d} V={v} K={k}",
                         [p + (params,) for p in providers], device, dtype, args, rows)
    if math.isfinite(bound_ms):
        ours["bound_ms"] = bound_ms


def bench_lm(device, dtype, shape, args, rows):
    n, d, v, s = shape
    providers, params = make_lm(device, dtype, shape)
    h, w, b, t, sampled = providers["ours"][1]
    check_close((ss_ours, (h, w, b, t, sampled)), (ss_plain, (h, w, b, t, sampled)), params,
                dtype, "sampled softmax")
    providers = [("ours", ss_ours, (h, w, b, t, sampled)),
                 ("plain", ss_plain, (h, w, b, t, sampled)),
                 ("full_softmax", full_softmax, (h, w, b, t))]
    if args.smoothing:  # the cost of label_smoothing (and weight) in training
        class_weight = torch.rand(v, generator=torch.Generator().manual_seed(1)).to(device) + 0.5
        providers += [("ours_smoothed", ss_smoothed, (h, w, b, t, sampled, None)),
                      ("ours_smoothed_weighted", ss_smoothed,
                       (h, w, b, t, sampled, class_weight))]
    if args.lce:
        providers += lce_providers(h, w, b, t, device, args)
    run_providers("sampled_softmax", f"N={n} D={d} V={v} S={s}",
                  [p + (params,) for p in providers], device, dtype, args, rows)
    bench_nce(h, w, b, t, sampled, params, device, dtype, args, rows)


def bench_nce(h, w, b, t, sampled, params, device, dtype, args, rows):
    """NCE on the LM case's inputs and candidates, against plain PyTorch and the exact full
    softmax (F.linear + F.cross_entropy, and linear_cross_entropy)."""
    n, d = h.shape
    v, s = w.shape[0], sampled[0].numel()
    check_close((nce_ours, (h, w, b, t, sampled)), (nce_plain, (h, w, b, t, sampled)), params,
                dtype, "nce")
    providers = [("ours", nce_ours, (h, w, b, t, sampled)),
                 ("plain", nce_plain, (h, w, b, t, sampled)),
                 ("full_softmax", full_softmax, (h, w, b, t))]
    if args.lce:
        providers += lce_providers(h, w, b, t, device, args)
    run_providers("nce", f"N={n} D={d} V={v} S={s}", [p + (params,) for p in providers],
                  device, dtype, args, rows)


def bench_hs(device, dtype, shape, args, rows):
    """Hierarchical softmax (word2vec.c's Huffman tree over Zipfian counts) against the same
    loss in plain PyTorch and against the exact full softmax of linear_cross_entropy."""
    n, d, v = shape
    c = make_hs(device, dtype, shape)
    h, w, t, tree, w_full = c["h"], c["w"], c["t"], c["tree"], c["w_full"]
    plain_args = (h, w, t, c["points"], c["signs"], c["valid"])
    check_close((hs_ours, (h, w, t, tree)), (hs_plain, plain_args), [h, w], dtype,
                "hierarchical softmax")
    providers = [("ours", hs_ours, (h, w, t, tree), [h, w]),
                 ("plain", hs_plain, plain_args, [h, w])]
    if args.lce:
        providers += [p + ([h, w_full],) for p in lce_providers(h, w_full, None, t, device, args)]
    run_providers("hierarchical_softmax", f"N={n} D={d} V={v} depth={c['mean_depth']:.1f}",
                  providers, device, dtype, args, rows)


def bench_eval(device, dtype, shape, args, rows):
    """The modules' exact eval loss (what `.eval()` layers, log_prob and perplexity run): our
    streamed log-sum-exp against linear_cross_entropy, forward only, without autograd."""
    n, d, v, _ = shape
    _, params = make_lm(device, dtype, shape)
    w, b = params[1], params[2]
    g = torch.Generator().manual_seed(1)
    h = torch.randn(n, d, generator=g).to(device, dtype)
    t = torch.randint(0, v, (n,), generator=g).to(device)
    providers = [("ours", lambda: FF.full_softmax_loss(h, w, t, linear_bias=b, reduction="sum")),
                 ("full_softmax", lambda: F.cross_entropy(F.linear(h, w, b).float(), t,
                                                          reduction="sum"))]
    if args.lce:
        providers += [(name, lambda o=options: lce_loss(o)(h, w, b, t))
                      for name, options in lce_variants(n, v, device, args.lce_rows)]
    with torch.no_grad():
        ref = providers[1][1]()
        results, first = {}, len(rows)
        for name, fn in providers:
            tol = 1e-4 if dtype in (torch.float32, torch.float64) else 0.1  # bfloat16 logits
            torch.testing.assert_close(fn().float(), ref, rtol=tol, atol=1e-2)
            med, lo, hi = time_it(fn, device, args.repeat, args.warmup, budget_s=120)
            mem = peak_extra_bytes(fn, device) / 2**20
            results[name] = 1e3 * med
            rows.append(dict(case="exact_eval", provider=name, dtype=str(dtype)[6:],
                             shape=f"N={n} D={d} V={v}", median_ms=1e3 * med, min_ms=1e3 * lo,
                             max_ms=1e3 * hi, peak_extra_mb=mem))
    add_ratios(rows[first], results)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--cases", default="word2vec,lm,hs,eval")
    parser.add_argument("--no-lce", dest="lce", action="store_false",
                        help="leave out the F.linear_cross_entropy providers")
    parser.add_argument("--lce-rows", type=int, default=256,
                        help="batch_chunk_size of the explicitly chunked linear_cross_entropy")
    parser.add_argument("--no-smoothing", dest="smoothing", action="store_false",
                        help="leave out sampled softmax with label_smoothing (and weight)")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="time torch.compile of the plain loss (default: on CUDA only)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, no result file")
    bound_model.add_flag(parser)
    args = parser.parse_args()
    device = torch.device(args.device)
    args.compile = device.type == "cuda" if args.compile is None else args.compile
    shapes = SHAPES["smoke" if args.smoke else ("cuda" if device.type == "cuda" else "cpu")]
    print(f"device: {device_name(device)}")
    if args.bound_model:
        cuda = SHAPES["cuda"]
        bound_model.print_model(
            [bound_model.negative_sampling(n, k, d, v) for n, d, v, k in cuda["word2vec"]]
            + [bound_model.sampled_softmax(n, s_, d, v) for n, d, v, s_ in cuda["lm"]]
            + [bound_model.full_softmax(n, d, v) for n, d, v, _ in cuda["lm"]])
        return
    args.bandwidth = bound_model.copy_bandwidth(device) if device.type == "cuda" else None
    rows = []
    for dtype in shapes["dtypes"]:
        if args.lce:
            check_lce(device, dtype, args.lce_rows)
        if "word2vec" in args.cases:
            for shape in shapes["word2vec"]:
                bench_word2vec(device, dtype, shape, args, rows)
        if "lm" in args.cases:
            for shape in shapes["lm"]:
                bench_lm(device, dtype, shape, args, rows)
        if "hs" in args.cases:
            for shape in shapes["hs"]:
                bench_hs(device, dtype, shape, args, rows)
        if "eval" in args.cases:
            for shape in shapes["lm"]:
                bench_eval(device, dtype, shape, args, rows)
    long_rows = []
    for r in rows:
        shape = f"{r['dtype']} {r['shape']}"
        for metric in ("median_ms", "min_ms", "max_ms", "peak_extra_mb", "bound_ms") + RATIOS:
            if metric in r:
                long_rows.append(dict(case=r["case"], provider=r["provider"], shape=shape,
                                      metric=metric, value=round(r[metric], 3)))
    if args.bandwidth:
        long_rows.append(dict(case="copy", provider="torch", shape="256 MiB",
                              metric="copy_bandwidth_gbs", value=round(args.bandwidth / 1e9, 1)))
    out = os.devnull if args.smoke else args.out
    out = write_results("losses", device, long_rows, out)
    for r in rows:
        extra = " ".join(f"{k[11:]}={r[k]:.2f}x" for k in RATIOS if k in r)
        if "bound_ms" in r:
            extra += f" bound {r['bound_ms']:.2f} ms ({r['median_ms'] / r['bound_ms']:.2f}x)"
        print(f"{r['case']:20s} {r['provider']:16s} {r['dtype']:9s} {r['shape']:32s} "
              f"median {r['median_ms']:9.2f} ms [{r['min_ms']:.2f}, {r['max_ms']:.2f}] "
              f"peak +{r['peak_extra_mb']:.0f} MiB {extra}")
    print(f"wrote {len(rows)} rows to {out}")


if __name__ == "__main__":
    main()
