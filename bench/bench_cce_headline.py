"""Cut Cross-Entropy's headline case: the exact full softmax of a Gemma-2-sized output layer,
V = 256,000 classes, D = 2304, N = 8192 rows, bfloat16, forward + backward, in ms and GB.

    python bench/bench_cce_headline.py --device cuda     # the headline shape (GPU)
    python bench/bench_cce_headline.py                   # CPU: scaled down, see below

Providers: ours (fastsoftmax.functional.full_softmax_loss as a user gets it: the streamed
path, until a GPU run puts the fused kernels on the default), ours_fused and ours_streamed
(each path forced with fused=True / False; ours_fused on CUDA only: on CPU tensors the kernels run
only under Triton's interpreter, a correctness run that tests/test_fused_softmax.py makes,
far too slow to time), the plain
F.cross_entropy(F.linear(...)) in float32 logits, F.linear_cross_entropy unchunked and in
1024-row chunks, and bench/fused_peers.py's torch.compile, Liger-Kernel and Cut
Cross-Entropy (the last two on CUDA only; skipped with the reason otherwise). Every provider is
checked against the plain loss on a small case first.

Memory is what one forward + backward allocates beyond its inputs (the gradients of h and W
included): on CUDA torch.cuda.max_memory_allocated above the allocation before the call; on the
CPU the resident-set high-water mark above the resident set before it. Time: median of
--repeat runs after a warm-up (CUDA events on CUDA). Errors, since Cut Cross-Entropy's speed
comes partly from its gradient filter: the loss's absolute error and the relative (Frobenius)
errors of grad_h and grad_W against the plain loss on float32 logits of the same inputs.

On the CPU the headline shape would take minutes per provider on 2 cores (29 TFLOP per step),
so the default CPU shape is scaled down to N = 128, V = 16,000 (D = 2304 and bfloat16 kept):
1/64 of the rows and 1/16 of the classes. --shape N,V,D overrides either default.
Rows go to bench/results/cce-headline-<cpu|cuda>.csv (bench/common.py's schema).
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bound_model as bm  # noqa: E402
import fused_peers  # noqa: E402
from common import device_name, peak_extra_bytes, time_it, write_results  # noqa: E402
from fastsoftmax import functional as FF  # noqa: E402
from fastsoftmax.losses import fused as fused_kernels  # noqa: E402
from peers import HAS_LCE  # noqa: E402

HEADLINE = (8192, 256_000, 2304)
CPU_SHAPE = (128, 16_000, 2304)


def ours(h, w, b, t, fused=None):
    return FF.full_softmax_loss(h, w, t, linear_bias=b, reduction="sum", fused=fused)


def our_paths(device, dtype):
    """ours_streamed, and ours_fused where the fused kernels can run here."""
    out = [("ours_streamed", lambda h, w, b, t: ours(h, w, b, t, fused=False))]
    probe = torch.zeros(1, 16, device=device, dtype=dtype)
    reason = ("on CPU tensors the kernels run interpreted: a test, not a timing"
              if device.type == "cpu" else fused_kernels.unavailable(probe, probe, None, None))
    if reason is None:
        out.append(("ours_fused", lambda h, w, b, t: ours(h, w, b, t, fused=True)))
    else:
        print(f"skipped: ours_fused ({reason})")
    return out


def errors(fn, h, w, t, reference):
    """(loss absolute error, grad_h and grad_W relative errors) of fn against `reference`,
    the plain loss's (loss, grad_h, grad_w) in float64."""
    hh, ww = (x.detach().clone().requires_grad_() for x in (h, w))
    loss = fn(hh, ww, None, t)
    loss.backward()
    ref_loss, ref_h, ref_w = reference
    return (abs(loss.double().item() - ref_loss),
            ((hh.grad.double() - ref_h).norm() / ref_h.norm()).item(),
            ((ww.grad.double() - ref_w).norm() / ref_w.norm()).item())


def lce(chunk_rows=None):
    opts = None if chunk_rows is None else torch.nn.LinearCrossEntropyOptions(
        batch_chunk_size=chunk_rows)
    return lambda h, w, b, t: F.linear_cross_entropy(h, w, t, linear_bias=b, reduction="sum",
                                                     options=opts)


def providers(device, dtype, args):
    out = [("ours", ours)] + our_paths(device, dtype) + [("plain", fused_peers.plain)]
    if HAS_LCE:
        out += [("lce", lce()), ("lce_chunked", lce(1024))]
    else:
        print("skipped: F.linear_cross_entropy (this torch has none)")
    out += fused_peers.providers(device, dtype, False, args.compile)
    return out


def check(fn, name, device, dtype):
    """Loss and gradients of fn against the plain loss on a small case."""
    reason = fused_peers._check(name, fn, device, dtype, bias=False)
    if reason:
        raise AssertionError(reason)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shape", default=None, help="N,V,D (default: the headline on CUDA, "
                    f"{CPU_SHAPE} on the CPU)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                    help="time torch.compile of the plain loss (default: on CUDA only)")
    ap.add_argument("--providers", default=None, help="comma-separated subset")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    args.compile = device.type == "cuda" if args.compile is None else args.compile
    n, v, d = (tuple(int(float(x)) for x in args.shape.split(",")) if args.shape
               else HEADLINE if device.type == "cuda" else CPU_SHAPE)
    scaled = "" if (n, v, d) == HEADLINE else " (scaled down from the headline)"
    print(f"device: {device_name(device)}; N={n} V={v} D={d} {args.dtype}{scaled}")
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(v, d, generator=g, dtype=torch.float32) * 0.02).to(device, dtype)
    w.requires_grad_()
    h = torch.randn(n, d, generator=g, dtype=torch.float32).to(device, dtype).requires_grad_()
    t = torch.randint(0, v, (n,), generator=g).to(device)
    bound = bm.full_softmax(n, d, v, e=torch.finfo(dtype).bits // 8)
    if device.type == "cuda":
        gpu = bm.GpuCeilings(bandwidth=bm.copy_bandwidth(device))
        print(f"bound at {gpu.bandwidth / 1e12:.2f} TB/s, {gpu.flops / 1e12:.0f} TFLOP/s: "
              f"{gpu.seconds(bound) * 1e3:.1f} ms")
    rows, shape = [], f"N={n} V={v} D={d} {args.dtype}"
    chosen = providers(device, dtype, args)
    if args.providers:
        keep = set(args.providers.split(","))
        chosen = [p for p in chosen if p[0] in keep]
    results = {}
    hh, ww = (x.detach().clone().requires_grad_() for x in (h, w))
    ref_loss = fused_peers.plain(hh, ww, None, t)
    ref_loss.backward()
    reference = (ref_loss.double().item(), hh.grad.double(), ww.grad.double())
    del hh, ww, ref_loss
    for name, fn in chosen:
        check(fn, name, device, dtype)

        def step(fn=fn):
            h.grad = w.grad = None
            fn(h, w, None, t).backward()
        try:
            med, lo, hi = time_it(step, device, args.repeat, args.warmup, budget_s=300)
            h.grad = w.grad = None
            peak = peak_extra_bytes(step, device)
        except torch.OutOfMemoryError as exc:
            print(f"{name:14s} out of memory: {str(exc).splitlines()[0][:100]}")
            rows.append(dict(case="cce_headline", provider=name, shape=shape, metric="oom",
                             value=1))
            continue
        results[name] = (med, peak)
        loss_err, h_err, w_err = errors(fn, h, w, t, reference)
        print(f"{name:14s} {med * 1e3:10.1f} ms [{lo * 1e3:.1f}, {hi * 1e3:.1f}]  "
              f"{peak / 1e9:7.3f} GB  loss err {loss_err:.2e}  grad_h {h_err:.1e}  "
              f"grad_W {w_err:.1e}")
        rows += [dict(case="cce_headline", provider=name, shape=shape, metric=m, value=x)
                 for m, x in (("median_ms", med * 1e3), ("min_ms", lo * 1e3),
                              ("max_ms", hi * 1e3), ("peak_extra_gb", peak / 1e9),
                              ("loss_abs_error", loss_err), ("grad_h_rel_error", h_err),
                              ("grad_w_rel_error", w_err))]
    if "ours" in results:
        for name, (med, peak) in results.items():
            if name != "ours":
                print(f"{name}'s time / ours: {med / results['ours'][0]:.2f}; our memory / "
                      f"{name}'s: {results['ours'][1] / max(peak, 1):.2f}")
    print("wrote", write_results("cce-headline", device, rows, args.out))


if __name__ == "__main__":
    main()
